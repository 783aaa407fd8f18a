"""Pulseq export: files from the CLI and from Python load in pypulseq, with
the waveforms of the result within the resampling tolerance."""

import subprocess
import warnings

import numpy as np
import pytest

import persolve
from conftest import SMALL_SLICE, ptx_arrays

pp = pytest.importorskip("pypulseq")

RF_RASTER, GRAD_RASTER = 1e-6, 1e-5
# The shapes are quantized to 1e-7 (of the peak; the phase in turns): the RF
# within (0.5 + pi) 1e-7 of its peak, a gradient within 0.5e-7 of its peak,
# plus rounding.
QUANT = 4e-7
QUANT_G = 1e-7


def box_mean(w, dt, raster):
    """Independent reference: the mean of the piecewise-constant w over each
    raster interval, from the exact running integral."""
    knots = np.arange(len(w) + 1) * dt
    area = np.concatenate([[0.0], np.cumsum(w) * dt])
    n = int(np.ceil(len(w) * dt / raster - 1e-9))
    edges = np.arange(n + 1) * raster
    integral = np.interp(edges, knots, area)  # constant (the total) after the end
    return np.diff(integral) / raster


def read(path):
    seq = pp.Sequence()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seq.read(str(path))
    return seq, seq.get_block(1)


def check(path, res, c):
    p = res.problem
    seq, blk = read(path)
    assert seq.grad_raster_time == GRAD_RASTER and seq.rf_raster_time == RF_RASTER
    b = res.b1[c]
    ref = box_mean(b.real, p.dt, RF_RASTER) + 1j * box_mean(b.imag, p.dt, RF_RASTER)
    got = blk.rf.signal / p.gamma_bar  # Hz -> G
    assert got.shape == ref.shape
    np.testing.assert_allclose(blk.rf.t, (np.arange(len(ref)) + 0.5) * RF_RASTER)
    assert np.max(np.abs(got - ref)) <= QUANT * np.max(np.abs(ref))
    for a, name in enumerate("xyz"):
        g = res.g[:, a]
        ev = getattr(blk, "g" + name)
        if not np.any(g):
            assert ev is None
            continue
        gref = box_mean(g, p.dt, GRAD_RASTER)
        ggot = ev.waveform / (p.gamma_bar * 100)  # Hz/m -> G/cm
        assert np.max(np.abs(ggot - gref)) <= QUANT_G * np.max(np.abs(gref)), name
    # the block lasts the pulse, rounded up to the 10 us block raster
    assert abs(seq.block_durations[1] - np.ceil(p.nt * p.dt / 1e-5 - 1e-9) * 1e-5) < 1e-12
    return blk


def test_cli_export_of_a_cli_result(cli, tmp_path):
    h5 = tmp_path / "s.h5"
    subprocess.run([cli, "design", SMALL_SLICE, "--backend", "cpu", "--max-iters", "30", "-q",
                    "-o", str(h5)], check=False)
    out = tmp_path / "s.seq"
    r = subprocess.run([cli, "export", str(h5), "--pulseq", str(out)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(out)
    res = persolve.load_result(h5)
    blk = check(out, res, 0)
    # dt = 4 us is a multiple of the RF raster: the RF is kept sample for sample
    b = np.repeat(res.b1[0], 4)
    assert np.max(np.abs(blk.rf.signal / res.problem.gamma_bar - b)) <= QUANT * np.abs(b).max()
    # the constant Gz shape is compressed (its derivative is one run of zeros)
    text = out.read_text()
    assert "[SHAPES]" in text and "major 1\nminor 4" in text
    shapes = text.split("[SHAPES]")[1].split("shape_id")[1:]
    last = [v for v in shapes[-1].split("\n") if v.strip()]
    n, values = int(last[1].split()[1]), last[2:]
    assert n == round(res.problem.nt * res.problem.dt / GRAD_RASTER) and len(values) == 4
    # Python's export writes the same file
    same = persolve.export_pulseq(h5, tmp_path / "py.seq")
    assert (tmp_path / "py.seq").read_text() == text and same == [str(tmp_path / "py.seq")]
    bad = subprocess.run([cli, "export", str(tmp_path / "none.h5"), "--pulseq", str(out)],
                         capture_output=True, text=True)
    assert bad.returncode == 3 and "none.h5" in bad.stderr


def test_several_channels_one_file_each(tmp_path):
    p = persolve.Problem(**ptx_arrays())
    res = persolve.design(p, backend="cpu", max_iterations=20)
    files = res.export_pulseq(tmp_path / "ptx.seq")
    assert files == [str(tmp_path / f"ptx_ch{c}.seq") for c in range(p.nc)]
    for c, f in enumerate(files):
        check(f, res, c)


def test_resampling_error_when_dt_is_not_a_multiple():
    rng = np.random.default_rng(5)
    dt = 3.3e-6
    w = np.cumsum(rng.normal(size=400)) * 0.01
    for raster in (RF_RASTER, GRAD_RASTER):
        got = persolve.pulseq_resample(w, dt, raster)
        ref = box_mean(w, dt, raster)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(w).max())
        # the area (RF: the flip; gradients: k-space) is exact at every boundary
        np.testing.assert_allclose(np.cumsum(got) * raster, np.cumsum(ref) * raster,
                                   rtol=0, atol=1e-15)
        assert abs(got.sum() * raster - w.sum() * dt) < 1e-12 * abs(w).sum() * dt
        # against the waveform at the interval's centre: within the steps it
        # covers, at most raster / dt + 1 of them
        t = (np.arange(len(got)) + 0.5) * raster
        k = np.minimum((t / dt).astype(int), len(w) - 1)
        bound = np.max(np.abs(np.diff(w))) * (raster / dt + 1)
        err = np.abs(got[:-1] - w[k[:-1]])
        assert np.all(err <= bound + 1e-12) and err.max() > 0
    # a multiple of the raster: the samples repeat exactly
    np.testing.assert_array_equal(persolve.pulseq_resample(w, 4e-6, 1e-6), np.repeat(w, 4))
