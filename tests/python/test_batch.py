"""Batches from Python: results equal solo designs at one thread bit for
bit, pause, resume, cancel, yield, checkpoint and restore, errors as
exceptions."""

import numpy as np
import pytest

import persolve
from conftest import wait_for
from persolve import BatchState, RunState

MIXED = ["slice1d:nz=60,nt=80", "spiral2d:n=8,nt=100", "ptx2d:n=12,nc=4,nt=60",
         "inversion:ndf=11,nb1=2,nt=30"]
LONG = "spiral2d:n=16,nt=300"
ITERS = 60


def wait_problem(batch, i, pred, limit=120.0):
    """Poll problem i's snapshot until pred(snapshot) holds."""
    class _One:
        def progress(self):
            return batch.snapshot(i)
    return wait_for(_One(), pred, limit)


@pytest.mark.parametrize("precision", ["single", "double"])
def test_batch_equals_solo(precision):
    opts = dict(backend="cpu", precision=precision, max_iterations=12)
    with persolve.Batch(threads=2, **opts) as batch:
        for spec in MIXED:
            batch.add(spec)
        # a problem from arrays with its own start point
        p = persolve.Problem.preset(MIXED[0])
        x0 = 0.9 * p.x0
        assert batch.add(p, x0) == len(MIXED)
        assert len(batch) == len(MIXED) + 1
        assert batch.progress().state == BatchState.IDLE
        batch.start()
        assert batch.wait(progress=True)  # a tqdm bar of the problems finished
        prog = batch.progress()
        assert prog.state == BatchState.FINISHED
        assert prog.finished == len(batch) and prog.failed == 0
        assert prog.block == 0 and prog.team_blocks == 0  # the GPU's only
        results = batch.results()
        shapes = [batch.shape(i) for i in range(len(batch))]
    for i, spec in enumerate(MIXED + [None]):
        shape = shapes[i]
        assert shape["threads"] == 1
        solo = persolve.design(p if spec is None else spec, x0 if spec is None else None,
                               **shape, **opts)
        res = results[i]
        assert isinstance(res, persolve.Result)
        assert res.status == solo.status
        np.testing.assert_array_equal(res.x, solo.x)
        np.testing.assert_array_equal(res.history.f, solo.history.f)
        np.testing.assert_array_equal(res.m, solo.m)
        assert res.iterations == solo.iterations


@pytest.fixture(scope="module")
def reference():
    return persolve.design(LONG, backend="cpu", max_iterations=ITERS, ftol=0, gtol=0,
                           threads=1)


def test_pause_resume_cancel(reference):
    problem = reference.problem
    opts = dict(backend="cpu", ftol=0, gtol=0, threads=2)
    with persolve.Batch(max_iterations=ITERS, **opts) as batch:
        batch.add(problem)
        batch.add(problem)
        batch.start()
        wait_problem(batch, 0, lambda s: s.iteration >= 3)
        batch.pause(0)
        s = wait_problem(batch, 0, lambda s: s.state == RunState.PAUSED and s.idle)
        assert batch.progress().paused == 1
        batch.wait(timeout=0.3)  # problem 1 goes on meanwhile, problem 0 does not
        assert batch.snapshot(0).iteration == s.iteration
        assert batch.result(0) is None
        batch.resume(0)
        assert batch.wait(timeout=120)
        for res in batch.results():  # paused and resumed: the same run
            np.testing.assert_array_equal(res.x, reference.x)
            np.testing.assert_array_equal(res.history.f, reference.history.f)
        with pytest.raises(persolve.StateError):
            batch.pause(0)  # finished

    # cancel one problem and then all: the best point so far, CANCELLED
    with persolve.Batch(max_iterations=0, **opts) as batch:
        for _ in range(3):
            batch.add(problem)
        batch.start()
        wait_problem(batch, 0, lambda s: s.iteration >= 2)
        batch.cancel(0)
        wait_problem(batch, 0, lambda s: s.state == RunState.FINISHED)
        assert batch.snapshot(1).state != RunState.FINISHED
        batch.cancel()
        assert batch.wait(timeout=60)
        for res in batch.results():
            assert res.status == persolve.Status.CANCELLED
            if res.evaluations:
                assert res.f <= res.f0
            else:  # cancelled while queued: the start point
                np.testing.assert_array_equal(res.x, problem.x0)


def test_yield_checkpoint_restore(reference, tmp_path):
    problem = reference.problem
    opts = dict(backend="cpu", max_iterations=ITERS, ftol=0, gtol=0, threads=2)
    specs = [problem, "slice1d:nz=60,nt=80"]
    with persolve.Batch(**opts) as batch:
        for p in specs:
            batch.add(p)
        batch.start()
        wait_problem(batch, 0, lambda s: s.iteration >= 3)
        with pytest.raises(persolve.StateError):
            batch.checkpoint()  # running: yield first
        batch.yield_gpu()
        assert batch.state == BatchState.YIELDED
        blob = batch.checkpoint(tmp_path / "batch.ckpt")
        assert (tmp_path / "batch.ckpt").read_bytes() == blob
        batch.resume()
        assert batch.wait(timeout=120)
        first = batch.results()
    np.testing.assert_array_equal(first[0].x, reference.x)

    # in a new batch from the file: the same results
    with persolve.Batch.restore(tmp_path / "batch.ckpt", specs, **opts) as again:
        assert len(again) == 2
        again.start()
        assert again.wait(timeout=120)
        for a, b in zip(again.results(), first):
            np.testing.assert_array_equal(a.x, b.x)
            np.testing.assert_array_equal(a.history.f, b.history.f)

    # another problem list, a corrupted blob: refused
    with pytest.raises(persolve.CheckpointError):
        persolve.Batch.restore(blob, specs[::-1], **opts)
    with pytest.raises(persolve.CheckpointError):
        persolve.Batch.restore(blob, specs + specs, **opts)
    bad = bytearray(blob)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(persolve.CheckpointError):
        persolve.Batch.restore(bytes(bad), specs, **opts)


def test_errors():
    with pytest.raises(persolve.InputError) as e:
        persolve.Batch(backend="cpu", memory=0)
    assert e.value.status == persolve.Status.ERR_OPTION
    with pytest.raises(persolve.InputError):
        persolve.Batch(backend="cpu", no_such_option=1)
    with persolve.Batch(backend="cpu", max_iterations=3) as batch:
        p = persolve.Problem.preset("slice1d:nz=20,nt=30")
        with pytest.raises(persolve.InputError) as e:
            batch.add(p, np.zeros(7))  # wrong length
        assert e.value.status == persolve.Status.ERR_SIZE
        assert len(batch) == 0
        with pytest.raises(TypeError):
            batch.add(42)
        batch.add(p)
        # a start point that is not finite: added, its own error at its result
        x = p.x0
        x[0] = np.nan
        i = batch.add(p, x)
        batch.start()
        with pytest.raises(persolve.StateError):
            batch.start()
        assert batch.wait(timeout=60)
        assert batch.result(0).iterations == 3
        with pytest.raises(persolve.Error) as e:
            batch.result(i)
        assert e.value.status < 0
        assert batch.progress().failed == 1
        with pytest.raises(persolve.InputError) as e:
            batch.result(5)
        assert e.value.status == persolve.Status.ERR_SIZE
        with pytest.raises(persolve.InputError):
            batch.snapshot(5)
    with pytest.raises(persolve.StateError):
        batch.progress()  # closed


def test_empty_batch_and_adding_while_running():
    with persolve.Batch(backend="cpu", max_iterations=5, threads=1) as batch:
        batch.start()
        assert batch.wait(timeout=10)  # zero problems: finished at once
        assert batch.progress().problems == 0
        i = batch.add("slice1d:nz=20,nt=30")  # runs again
        assert batch.wait(timeout=60)
        assert batch.result(i).iterations == 5


def test_the_gil_is_released_while_waiting():
    import threading
    import time

    with persolve.Batch(backend="cpu", max_iterations=0, ftol=0, gtol=0, threads=1) as batch:
        batch.add(LONG)
        batch.start()
        waiter = threading.Thread(target=batch.wait, args=(1.5,))
        waiter.start()
        gap, last, t_end = 0.0, time.monotonic(), time.monotonic() + 1.0
        while time.monotonic() < t_end:  # Python work while the other thread waits
            now = time.monotonic()
            gap, last = max(gap, now - last), now
        waiter.join()
        assert batch.progress().state == BatchState.RUNNING  # the wait timed out
        batch.cancel()
    assert gap < 0.5, gap
