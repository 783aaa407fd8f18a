"""design(), evaluate() and simulate() against the CLI and finite differences."""

import subprocess

import h5py
import numpy as np
import pytest

import persolve
from conftest import SMALL_SLICE

ITERS = 40


def test_design_equals_the_cli_bit_for_bit(cli, tmp_path):
    out = tmp_path / "cli.h5"
    subprocess.run([cli, "design", SMALL_SLICE, "--backend", "cpu", "--max-iters", str(ITERS),
                    "-q", "-o", str(out)], check=False, capture_output=True)
    assert out.exists()
    res = persolve.design(SMALL_SLICE, backend="cpu", max_iterations=ITERS)
    with h5py.File(out, "r") as f:
        b1 = np.array(f["pulse/b1"])
        m = np.array(f["result/m"])
        hist = np.array(f["result/history"])
        status = int(f["result"].attrs["status"])
    assert res.status == status == persolve.Status.MAX_ITERATIONS
    np.testing.assert_array_equal(res.b1[0], b1[:, 0] + 1j * b1[:, 1])
    np.testing.assert_array_equal(res.m, m)
    np.testing.assert_array_equal(res.history.f, hist[:, 1])
    np.testing.assert_array_equal(res.history.evaluations, hist[:, 4])
    # and the CLI's file read back through the package
    loaded = persolve.load_result(out)
    np.testing.assert_array_equal(loaded.x, res.x)
    assert loaded.iterations == res.iterations == ITERS


def test_result_fields_and_save(tmp_path):
    res = persolve.design(SMALL_SLICE, backend="cpu", max_iterations=15)
    assert res.iterations == 15 and len(res.history) == 16
    assert res.history.f[-1] == res.f < res.f0
    assert res.message == persolve.Status.MAX_ITERATIONS.message
    assert res.backend == "cpu" and res.device.startswith("cpu")
    np.testing.assert_array_equal(res.m, persolve.simulate(res.problem, res.x, backend="cpu"))
    assert persolve.evaluate(res.problem, res.x, backend="cpu").f == res.f
    res.save(tmp_path / "r.h5")
    back = persolve.load_result(tmp_path / "r.h5")
    np.testing.assert_array_equal(back.x, res.x)
    np.testing.assert_array_equal(back.m, res.m)
    np.testing.assert_array_equal(back.history.array, res.history.array)
    assert (back.status, back.f, back.iterations) == (res.status, res.f, res.iterations)
    assert "iterations   15" in res.summary()


def test_ptx_design_with_every_constraint(ptx):
    res = persolve.design(ptx, backend="cpu", precision="double", max_iterations=60)
    assert res.f < res.f0
    c = res.constraints
    assert np.all(c["peak_b1"] <= ptx.b1_max)  # exact by the reparametrization
    assert c["sar"].shape == (2,) and c["peak_slew"][0] < ptx.smax
    assert c["rf_free_steps"] == ptx.nt - 4
    assert np.all(res.b1[:, :4] == 0)  # the RF mask holds these steps
    assert res.g[:, 0].shape == (ptx.nt,) and not np.array_equal(res.g[:, 0], ptx.g[:, 0])


def test_gradient_against_central_differences(ptx):
    x = ptx.x0
    x[ptx.nx - ptx.nt:] *= 0.5  # the designed waveform inside gmax
    e = persolve.evaluate(ptx, x, backend="cpu", precision="double")
    assert e.gradient.shape == (ptx.nx,) and e.gradient_g.shape == (ptx.nt, 3)
    rng = np.random.default_rng(3)
    free = [i for i in range(ptx.nx) if i % ptx.nt >= 4 or i >= 2 * ptx.nc * ptx.nt]
    for i in rng.choice(free, 12, replace=False):
        h = 1e-6
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        fd = (persolve.evaluate(ptx, xp, backend="cpu", precision="double", gradient_g=False).f
              - persolve.evaluate(ptx, xm, backend="cpu", precision="double",
                                  gradient_g=False).f) / (2 * h)
        assert abs(fd - e.gradient[i]) <= 1e-5 * max(1.0, abs(fd)), i


def test_callback_cancels_and_errors_propagate():
    seen = []

    def stop(p):
        seen.append(p["iteration"])
        return p["iteration"] >= 5

    res = persolve.design(SMALL_SLICE, backend="cpu", callback=stop)
    assert res.status == persolve.Status.CANCELLED and res.iterations == 5
    assert seen == list(range(6))

    def boom(p):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError):
        persolve.design(SMALL_SLICE, backend="cpu", callback=boom)


def test_progress_bar_runs(capsys):
    res = persolve.design(SMALL_SLICE, backend="cpu", max_iterations=5, progress=True)
    assert res.iterations == 5
