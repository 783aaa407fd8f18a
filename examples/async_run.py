"""An asynchronous design with live progress: start a run, watch it, pause
it, save a checkpoint, resume it to the end, then continue the checkpoint in
a new run and find the same pulse bit for bit. (Several problems at once:
examples/batch_progress.py.)

    python examples/async_run.py [--spec spiral2d:n=24,nt=600] [-o async_history.png]
"""

import argparse
import time

import numpy as np

import persolve
import persolve.plot

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--spec", default="spiral2d:n=24,nt=600")
ap.add_argument("--max-iterations", type=int, default=150)
ap.add_argument("--checkpoint", default="async_run.ckpt")
ap.add_argument("-o", "--output", default="async_history.png")
args = ap.parse_args()

problem = persolve.Problem.preset(args.spec)
opts = dict(max_iterations=args.max_iterations)


def show(p, last=[None]):
    if (p.iteration, p.state) == last[0]:
        return  # print a line when something moved
    last[0] = (p.iteration, p.state)
    print(f"  {p.state.name:8s} iteration {p.iteration:4d}  f {p.f:.6e}  "
          f"|g| {p.gnorm:.2e}  {p.seconds:6.2f} s", flush=True)


with persolve.Run(problem, **opts) as run:
    print("running:")
    while run.progress().iteration < args.max_iterations // 4 and not run.done:
        show(run.progress())
        time.sleep(0.25)

    try:
        run.pause()
    except persolve.StateError:
        pass  # it finished first
    while not run.done and not (run.state == persolve.RunState.PAUSED and run.progress().idle):
        time.sleep(0.01)
    if not run.done:
        before = run.progress()
        time.sleep(0.5)
        after = run.progress()
        show(after)
        print(f"paused: iteration {before.iteration} -> {after.iteration} over 0.5 s, "
              f"solve time {before.seconds:.3f} -> {after.seconds:.3f} s")
    run.checkpoint(args.checkpoint)
    print("checkpoint written to", args.checkpoint)

    if not run.done:
        run.resume()
        print("resumed:")
    while (res := run.wait(timeout=0.25)) is None:
        show(run.progress())
print(res.summary())

# the checkpoint, continued in a new run, ends on the same pulse
again = persolve.Run.resume_from(args.checkpoint, problem, **opts)
res2 = again.wait()
again.close()
print("continued from the checkpoint: same pulse bit for bit:",
      bool(np.array_equal(res.x, res2.x)))

persolve.plot.history(res).savefig(args.output, dpi=150)
print("wrote", args.output)
