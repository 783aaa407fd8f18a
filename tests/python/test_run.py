"""Asynchronous runs from Python: progress, pause, resume, yield, cancel,
checkpoints, and their bit-identical continuation."""

import time

import numpy as np
import pytest

import persolve
from conftest import wait_for
from persolve import RunState

SPEC = "spiral2d:n=16,nt=300"
ITERS = 60


@pytest.fixture(scope="module")
def reference():
    return persolve.design(SPEC, backend="cpu", max_iterations=ITERS, ftol=0, gtol=0)


def test_pause_resume_checkpoint_and_cancel(reference, tmp_path):
    problem = reference.problem
    with persolve.Run(problem, backend="cpu", max_iterations=ITERS, ftol=0, gtol=0) as run:
        wait_for(run, lambda p: p.iteration >= 3)
        run.pause()
        p = wait_for(run, lambda p: p.state == RunState.PAUSED and p.idle)
        time.sleep(0.2)
        assert run.progress().iteration == p.iteration  # paused: nothing moves
        assert run.wait(timeout=0) is None
        blob = run.checkpoint(tmp_path / "run.ckpt")
        assert (tmp_path / "run.ckpt").read_bytes() == blob
        run.resume()
        wait_for(run, lambda q: q.state in (RunState.RUNNING, RunState.FINISHED))
        res = run.wait()
    assert res.status == persolve.Status.MAX_ITERATIONS
    np.testing.assert_array_equal(res.x, reference.x)  # paused and resumed: the same run
    np.testing.assert_array_equal(res.history.f, reference.history.f)

    # the checkpoint, continued in a new run, ends where the reference ended
    again = persolve.Run.resume_from(tmp_path / "run.ckpt", problem, backend="cpu",
                                     max_iterations=ITERS, ftol=0, gtol=0)
    res2 = again.wait()
    again.close()
    np.testing.assert_array_equal(res2.x, reference.x)
    assert res2.iterations == ITERS

    # cancel: the best point so far, status CANCELLED; a finished run refuses a pause
    run = persolve.Run(problem, backend="cpu", max_iterations=0, ftol=0, gtol=0)
    wait_for(run, lambda p: p.iteration >= 2)
    run.cancel()
    res3 = run.wait(timeout=30)
    assert res3 is not None and res3.status == persolve.Status.CANCELLED
    assert res3.f <= res3.f0
    with pytest.raises(persolve.StateError) as e:
        run.pause()
    assert e.value.status == persolve.Status.ERR_STATE
    run.close()


def test_yield_and_resume(reference):
    with persolve.Run(reference.problem, backend="cpu", max_iterations=ITERS, ftol=0,
                      gtol=0) as run:
        wait_for(run, lambda p: p.iteration >= 2)
        run.yield_gpu()
        wait_for(run, lambda p: p.state == RunState.YIELDED)
        run.resume()
        res = run.wait()
    np.testing.assert_array_equal(res.x, reference.x)


def test_checkpoint_refused_when_corrupted(reference):
    with persolve.Run(reference.problem, backend="cpu", max_iterations=5) as run:
        assert run.wait().iterations == 5
        blob = bytearray(run.checkpoint())
    blob[len(blob) // 2] ^= 0xFF
    with pytest.raises(persolve.CheckpointError) as e:
        persolve.Run.resume_from(bytes(blob), reference.problem, backend="cpu")
    assert e.value.status == persolve.Status.ERR_CHECKPOINT


def test_the_gil_is_released_while_waiting(reference):
    import threading

    with persolve.Run(reference.problem, backend="cpu", max_iterations=0, ftol=0,
                      gtol=0) as run:
        waiter = threading.Thread(target=run.wait, args=(1.5,))
        waiter.start()
        gap, last, t_end = 0.0, time.monotonic(), time.monotonic() + 1.0
        while time.monotonic() < t_end:  # Python work while the other thread waits
            now = time.monotonic()
            gap, last = max(gap, now - last), now
        waiter.join()
        assert run.progress().state == RunState.RUNNING  # still solving: the wait timed out
        run.cancel()
    assert gap < 0.5, gap
