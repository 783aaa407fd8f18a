"""The GPU backend from Python (skipped without a GPU): design equals the
CLI's bit for bit, a run steered on the GPU (pause, checkpoint, yield,
resume) ends bit-identical to one that was not, evaluations agree with the
CPU's."""

import subprocess
import time

import numpy as np
import pytest

import persolve
from conftest import wait_for
from persolve import RunState, Status

pytestmark = pytest.mark.skipif(not persolve.gpus(), reason="no GPU")


def test_design_equals_the_cli_on_the_gpu(cli, tmp_path):
    spec = "spiral2d:n=32,nt=1000"
    out = tmp_path / "gpu.h5"
    subprocess.run([cli, "design", spec, "--backend", "gpu", "--max-iters", "50", "-q", "-o",
                    str(out)], check=False)
    res = persolve.design(spec, backend="gpu", max_iterations=50)
    assert res.backend == "gpu" and res.iterations == 50
    cli_x = persolve.core._persolve.read_x(str(out), res.problem._c)
    np.testing.assert_array_equal(res.x, cli_x)


def test_a_run_steered_on_the_gpu():
    spec, iters = "spiral2d:n=64,nt=2000", 60
    opts = dict(backend="gpu", max_iterations=iters, gtol=0, ftol=0)
    ref = persolve.design(spec, **opts)
    with persolve.Run(ref.problem, **opts) as run:
        wait_for(run, lambda p: p.iteration >= 5)
        run.pause()
        p = wait_for(run, lambda p: p.state == RunState.PAUSED and p.idle)
        time.sleep(0.1)
        assert run.progress().iteration == p.iteration
        blob = run.checkpoint()
        run.resume()
        wait_for(run, lambda p: p.iteration >= 20)
        run.yield_gpu()
        wait_for(run, lambda p: p.state in (RunState.YIELDED, RunState.FINISHED))
        if run.state == RunState.YIELDED:
            run.resume()
        res = run.wait()
    assert res.backend == "gpu"
    np.testing.assert_array_equal(res.x, ref.x)
    np.testing.assert_array_equal(res.history.f, ref.history.f)
    again = persolve.Run.resume_from(blob, ref.problem, **opts)
    np.testing.assert_array_equal(again.wait().x, ref.x)
    again.close()


def test_evaluations_agree_with_the_cpu():
    p = persolve.Problem.preset("ptx2d:n=24,nt=300")
    x = p.x0
    g = persolve.evaluate(p, x, backend="gpu", precision="double", gradient_g=False)
    c = persolve.evaluate(p, x, backend="cpu", precision="double", gradient_g=False)
    assert abs(g.f - c.f) <= 1e-10 * abs(c.f)
    np.testing.assert_allclose(g.gradient, c.gradient, rtol=1e-8,
                               atol=1e-10 * np.abs(c.gradient).max())
    np.testing.assert_allclose(persolve.simulate(p, x, backend="gpu", precision="double"),
                               persolve.simulate(p, x, backend="cpu", precision="double"),
                               atol=1e-10)
    try:
        e = persolve.evaluate(p, x, backend="gpu", precision="double", gradient_g=True)
        np.testing.assert_allclose(e.gradient_g, persolve.evaluate(
            p, x, backend="cpu", precision="double").gradient_g, rtol=1e-8, atol=1e-12)
    except persolve.BackendError as err:
        assert err.status == Status.ERR_NOT_IMPLEMENTED


def test_a_batch_on_the_gpu(tmp_path):
    """A batch of mixed problems in one launch: every result equals a solo
    design forced to its team's shape (Batch.shape), also for a problem
    paused and resumed meanwhile and after a yield and a checkpoint resumed
    in a new batch."""
    specs = ["spiral2d:n=32,nt=1000", "ptx2d:n=32,nt=400", "slice1d", "inversion",
             "spiral2d:n=32,nt=1000,fov=20"]
    opts = dict(backend="gpu", max_iterations=1000, gtol=0, ftol=0)
    with persolve.Batch(**opts) as batch:
        for s in specs:
            batch.add(s)
        batch.start()
        wait_for(batch, lambda p: p.running > 0 or p.finished == len(specs))
        try:  # it may have finished already: then a StateError
            batch.pause(0)
            batch.wait(timeout=0.05)
            batch.resume(0)
        except persolve.StateError:
            pass
        batch.yield_gpu()
        assert batch.state in (persolve.BatchState.YIELDED, persolve.BatchState.FINISHED)
        blob = batch.checkpoint(tmp_path / "batch.ckpt")
        if batch.state == persolve.BatchState.YIELDED:
            batch.resume()
        assert batch.wait(timeout=300)
        results = batch.results()
        shapes = [batch.shape(i) for i in range(len(batch))]
        prog = batch.progress()
    # a problem of the channels kernels (ptx2d): blocks of 512 for all
    assert prog.block == 512
    assert all(shape["gpu_block"] == prog.block for shape in shapes)
    for spec, res, shape in zip(specs, results, shapes):
        assert res.backend == "gpu"
        solo = persolve.design(spec, **shape, **opts)
        np.testing.assert_array_equal(res.x, solo.x)
        np.testing.assert_array_equal(res.history.f, solo.history.f)
    with persolve.Batch.restore(blob, specs, **opts) as again:
        again.start()
        assert again.wait(timeout=300)
        for a, b in zip(again.results(), results):
            np.testing.assert_array_equal(a.x, b.x)
