"""Shared fixtures of the Python suite: small problems, the CLI binary."""

import os
import shutil
import time

import numpy as np
import pytest

import persolve

SMALL_SLICE = "slice1d:nz=120,nt=200"


@pytest.fixture(scope="session")
def cli():
    """The persolve binary of this build (PERSOLVE_CLI), else one on PATH."""
    path = os.environ.get("PERSOLVE_CLI") or shutil.which("persolve")
    if not path or not os.path.exists(path):
        pytest.fail("the persolve CLI was not found (PERSOLVE_CLI)")
    return path


def ptx_arrays(seed=1, ns=60, nt=80, nc=3, nq=2):
    """A small synthetic parallel-transmit problem: random B1 maps, VOPs,
    per-channel peak limits, a designed gradient axis and an RF mask."""
    rng = np.random.default_rng(seed)
    r = np.zeros((ns, 3))
    r[:, 0] = np.linspace(-4, 4, ns)
    r[:, 1] = rng.uniform(-2, 2, ns)
    target = np.tile([0.0, np.sin(np.pi / 6), np.cos(np.pi / 6)], (ns, 1))
    g = np.zeros((nt, 3))
    g[:, 0] = 0.2 * np.sin(np.linspace(0, 2 * np.pi, nt))
    g[:, 1] = 0.1
    b1map = (0.5 + rng.uniform(0, 0.5, (ns, nc))) * np.exp(1j * rng.uniform(-1, 1, (ns, nc)))
    a = rng.normal(size=(nq, nc, nc)) + 1j * rng.normal(size=(nq, nc, nc))
    vop = 0.1 * (a @ np.conj(np.transpose(a, (0, 2, 1))) + 0.1 * np.eye(nc))
    b1 = 0.02 * np.exp(1j * rng.uniform(0, 2 * np.pi, (nc, nt)))
    rf_mask = np.ones(nt)
    rf_mask[:4] = 0
    b1[:, :4] = 0
    return dict(r=r, target=target, g=g, dt=4e-6, df=rng.uniform(-30, 30, ns),
                w=rng.uniform(0.5, 1.5, ns), m0=np.tile([0.0, 0.0, 1.0], (ns, 1)),
                t1=np.full(ns, 1.0), t2=np.full(ns, 0.08), b1map=b1map, b1=b1, vop=vop,
                sar_max=50.0, tr=0.01, rf_mask=rf_mask, b1_max=np.array([0.2, 0.25, 0.3]),
                loss="mls", lambda_=1e-3, design_g="x", smax=15000.0, gmax=2.0, g_end=True)


@pytest.fixture
def ptx():
    return persolve.Problem(**ptx_arrays())


def wait_for(run, pred, limit=120.0):
    """Poll a run's progress until pred(progress) holds (fails after limit s)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        p = run.progress()
        if pred(p):
            return p
        time.sleep(0.002)
    pytest.fail(f"timed out: {run.progress()}")
