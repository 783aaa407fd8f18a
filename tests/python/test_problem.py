"""Problems from arrays, presets and files: every field round-trips."""

import gc

import numpy as np
import pytest

import persolve
from conftest import ptx_arrays


def test_arrays_round_trip(ptx):
    a = ptx_arrays()
    assert (ptx.ns, ptx.nt, ptx.nc, ptx.nq) == (60, 80, 3, 2)
    assert ptx.nx == 2 * 3 * 80 + 80  # RF of 3 channels, then the designed x axis
    for name in ("r", "target", "g", "df", "w", "m0", "t1", "t2", "rf_mask"):
        np.testing.assert_array_equal(getattr(ptx, name), a[name], err_msg=name)
    np.testing.assert_array_equal(ptx.b1map, a["b1map"])
    np.testing.assert_array_equal(ptx.vop, a["vop"])
    np.testing.assert_array_equal(ptx.b1, a["b1"])
    np.testing.assert_array_equal(ptx.b1_max, a["b1_max"])
    assert ptx.dt == a["dt"] and ptx.loss == "mls" and ptx.lambda_ == a["lambda_"]
    assert (ptx.sar_max, ptx.tr) == (50.0, 0.01)
    assert (ptx.design_g, ptx.smax, ptx.gmax, ptx.g_end) == ("x", 15000.0, 2.0, True)
    assert ptx.penalized


def test_views_are_read_only_and_keep_the_problem_alive():
    r = persolve.Problem.preset("slice1d:nz=50,nt=20").r
    gc.collect()
    assert r.shape == (50, 3) and not r.flags.writeable
    np.testing.assert_allclose(r[:, 2], -2 + 4 * np.arange(50) / 50)
    with pytest.raises(ValueError):
        r[0, 0] = 1.0


def test_outputs_are_new_arrays(ptx):
    x = ptx.x0
    assert x.flags.writeable and x.dtype == np.float64 and x.shape == (ptx.nx,)
    x[:] = 7.0
    assert not np.all(ptx.x0 == 7.0)


def test_point_layout(ptx):
    x0 = ptx.x0
    b = ptx.pulse_of(x0)
    np.testing.assert_array_equal(b, ptx.b1)  # the start pulse, in the problem's shape
    np.testing.assert_array_equal(ptx.point(b, ptx.gradient_of(x0)), x0)
    g = ptx.gradient_of(x0)
    np.testing.assert_array_equal(g[:, 1:], ptx.g[:, 1:])  # axes not designed: the problem's


def test_file_round_trip(ptx, tmp_path):
    path = tmp_path / "ptx.h5"
    ptx.save(path)
    q = persolve.Problem.from_file(path)
    for name in ("r", "target", "g", "df", "w", "m0", "t1", "t2", "rf_mask", "b1map",
                 "vop", "b1", "b1_max"):
        np.testing.assert_array_equal(getattr(q, name), getattr(ptx, name), err_msg=name)
    assert (q.design_g, q.smax, q.gmax, q.g_end, q.sar_max, q.tr) == \
        (ptx.design_g, ptx.smax, ptx.gmax, ptx.g_end, ptx.sar_max, ptx.tr)
    e1 = persolve.evaluate(ptx, backend="cpu", precision="double")
    e2 = persolve.evaluate(q, backend="cpu", precision="double")
    assert e1.f == e2.f
    np.testing.assert_array_equal(e1.gradient, e2.gradient)


def test_preset_and_single_channel_arrays():
    p = persolve.Problem.preset("slice1d:nz=40,nt=30")
    q = persolve.Problem(p.r, p.target, p.g, p.dt, w=p.w, loss=p.loss, b1=p.b1[0])
    assert q.nc == 1 and q.b1map is None and q.b1_max is None
    x = p.x0
    assert persolve.evaluate(p, x, backend="cpu").f == persolve.evaluate(q, x, backend="cpu").f
    assert set(persolve.presets()) >= {"slice1d", "spiral2d", "inversion", "ptx2d"}
