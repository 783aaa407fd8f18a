"""A batch with live progress and a pause: several slice and parallel-
transmit problems solved together (on the GPU in one launch, on the CPU by
worker threads), an aggregate progress line, one problem paused while the
others go on, then resumed, and a summary of every result.

    python examples/batch_progress.py [--slices 4] [--max-iterations 200] [-o batch.png]
"""

import argparse
import sys
import time

import persolve
import persolve.plot

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--slices", type=int, default=4,
                help="ptx2d problems, one per B0 scale (stand-ins for the slices of a protocol)")
ap.add_argument("--ptx", default="ptx2d:n=24,nt=300", help="the ptx2d spec they start from")
ap.add_argument("--slice1d", default="slice1d:nz=200,nt=300", help="a slice-selective problem")
ap.add_argument("--max-iterations", type=int, default=200)
ap.add_argument("-o", "--output", default="batch_history.png")
args = ap.parse_args()

specs = [args.slice1d, args.slice1d + ",thk=0.3"]
specs += [f"{args.ptx},b0={10 + 20 * k},obj={10 - k % 3}" for k in range(args.slices)]


def line(p, note=""):
    sys.stdout.write(f"\r  {p.finished}/{p.problems} done, {p.running} running, {p.paused} "
                     f"paused, {p.queued} queued   slowest iteration {p.slowest_iteration:4d}  "
                     f"{p.seconds:6.2f} s {note}\033[K")
    sys.stdout.flush()


with persolve.Batch(max_iterations=args.max_iterations) as batch:
    for s in specs:
        batch.add(s)
    batch.start()
    print(f"{len(batch)} problems:")

    # pause the last problem once it has started: its team (worker) moves on
    last = len(batch) - 1
    while batch.snapshot(last).iteration < 2 and batch.snapshot(last).state != persolve.RunState.FINISHED:
        line(batch.progress())
        time.sleep(0.05)
    try:
        batch.pause(last)
        paused = True
    except persolve.StateError:
        paused = False  # it finished first
    while paused and not batch.snapshot(last).idle:
        time.sleep(0.01)
    # a pause asked for during its last iteration comes too late: it finished
    paused = paused and batch.snapshot(last).state == persolve.RunState.PAUSED
    if paused:
        before = batch.snapshot(last).iteration
        for _ in range(10):  # the others go on meanwhile
            line(batch.progress(), f"(problem {last} paused)")
            time.sleep(0.05)
        print(f"\n  problem {last} paused: iteration {before} -> "
              f"{batch.snapshot(last).iteration} while paused")
        batch.resume(last)
        print(f"  problem {last} resumed")
    while not batch.wait(timeout=0.1):
        line(batch.progress())
    line(batch.progress())
    print()
    results = batch.results()

for spec, res in zip(specs, results):
    print(f"\n{spec}\n{res.summary()}")

persolve.plot.history(results[-1]).savefig(args.output, dpi=150)
print("wrote", args.output)
