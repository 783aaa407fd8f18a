"""Every bad-input class of the C API raises persolve.Error with its status
and the library's message."""

import numpy as np
import pytest

import persolve
from persolve import Status
from conftest import ptx_arrays


def base(**change):
    a = ptx_arrays()
    a.update(change)
    return a


def raises(status, cls, fn, *args, text=None, **kw):
    with pytest.raises(cls) as e:
        fn(*args, **kw)
    err = e.value
    assert isinstance(err, persolve.Error)
    assert err.status == status, err
    assert err.message == persolve.Status(status).message
    assert status.name in str(err)
    if text:
        assert text in err.detail, err.detail
    return err


def nan_at(name, i):
    a = ptx_arrays()
    v = np.array(a[name], dtype=float)
    v.flat[i] = np.nan
    return v


CASES = [
    # status, changed fields, text the message holds
    (Status.ERR_SIZE, dict(target=np.zeros((5, 3))), "target"),
    (Status.ERR_SIZE, dict(df=np.zeros(3)), "df"),
    (Status.ERR_SIZE, dict(g=np.zeros((0, 3))), None),
    (Status.ERR_NONFINITE, dict(df=nan_at("df", 12)), "df[12]"),
    (Status.ERR_DT, dict(dt=0.0), "dt"),
    (Status.ERR_NEGATIVE, dict(w=-np.ones(60)), "w"),
    (Status.ERR_NEGATIVE, dict(lambda_=-1.0), "lambda"),
    (Status.ERR_RELAXATION, dict(t1=np.zeros(60)), "t1"),
    (Status.ERR_LOSS, dict(loss="l2"), "loss"),
    (Status.ERR_B1MAX, dict(b1_max=np.array([0.2, -1.0, 0.3])), "b1_max"),
    (Status.ERR_CHANNELS, dict(b1scale=np.ones(60)), None),
    (Status.ERR_SAR, dict(sar_max=-1.0), "sar_max"),
    (Status.ERR_SAR, dict(vop=np.triu(np.ones((2, 3, 3))) + 0j), None),  # not Hermitian
    (Status.ERR_GRADIENT, dict(smax=0.0), None),
    (Status.ERR_GRADIENT, dict(design_g="zx"), "design_g"),
    (Status.ERR_RF_MASK, dict(rf_mask=np.full(80, 0.5)), "rf_mask"),
    (Status.ERR_SCALE, dict(dt=1e40), "dt = 1e+40 s"),
]


@pytest.mark.parametrize("status,change,text", CASES,
                         ids=[f"{c[0].name}-{i}" for i, c in enumerate(CASES)])
def test_bad_problem(status, change, text):
    raises(status, persolve.InputError, persolve.Problem, **base(**change), text=text)


def test_gradient_options_without_design():
    a = base(design_g=None, smax=None)
    raises(Status.ERR_GRADIENT, persolve.InputError, persolve.Problem, **a)


def test_bad_options_and_points(ptx):
    raises(Status.ERR_OPTION, persolve.InputError, persolve.evaluate, ptx, memory=0,
           text="memory")
    raises(Status.ERR_OPTION, persolve.InputError, persolve.evaluate, ptx, backend="tpu",
           text="backend")
    raises(Status.ERR_OPTION, persolve.InputError, persolve.design, ptx, max_iters=3,
           text="max_iters")
    raises(Status.ERR_SIZE, persolve.InputError, persolve.simulate, ptx, np.zeros(3),
           text="x")
    raises(Status.ERR_OPTION, persolve.InputError, persolve.design, ptx, gpus=-2,
           text="gpus")
    x = ptx.x0
    x[7] = np.inf
    raises(Status.ERR_NONFINITE, persolve.InputError, persolve.Run, ptx, x, backend="cpu")


def test_presets_and_files(tmp_path):
    raises(Status.ERR_PRESET, persolve.InputError, persolve.Problem.preset, "slice1d:nz=-3",
           text="nz")
    raises(Status.ERR_PRESET, persolve.InputError, persolve.Problem.preset, "nothing")
    raises(Status.ERR_FILE, persolve.FileError, persolve.Problem.from_file,
           tmp_path / "missing.h5", text="missing.h5")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    raises(Status.ERR_FILE, persolve.FileError, persolve.Problem.from_file, bad)
    import h5py

    p = persolve.Problem.preset("slice1d:nz=20,nt=10")
    p.save(tmp_path / "p.h5")
    with h5py.File(tmp_path / "p.h5", "r+") as f:
        del f["spins/r"]
        f["spins/r"] = np.zeros((20, 2))
    raises(Status.ERR_FILE, persolve.FileError, persolve.Problem.from_file,
           tmp_path / "p.h5", text="/spins/r")
    with pytest.raises(persolve.FileError):
        persolve.load_result(tmp_path / "missing.h5")


def test_backend_unavailable():
    if persolve.gpus():
        pytest.skip("a GPU is present")
    p = persolve.Problem.preset("slice1d:nz=20,nt=10")
    err = raises(Status.ERR_NO_GPU, persolve.BackendError, persolve.design, p, backend="gpu")
    assert isinstance(err, RuntimeError)
    raises(Status.ERR_NO_GPU, persolve.BackendError, persolve.evaluate, p, backend="gpu")


def test_objective_not_finite_at_the_start():
    p = persolve.Problem.preset("slice1d:nz=20,nt=10")
    x = np.full(p.nx, 1e300)
    raises(Status.ERR_OBJECTIVE, persolve.SolverError, persolve.design, p, x, backend="cpu",
           precision="double")
