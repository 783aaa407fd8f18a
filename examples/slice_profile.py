"""A slice-selective excitation from the slice1d preset: design the pulse,
print the summary, plot the slice profile and the whole design.

    python examples/slice_profile.py [--spec slice1d:thk=0.3] [-o slice_profile.png]
"""

import argparse

import persolve
import persolve.plot

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--spec", default="slice1d", help="preset spec (default slice1d)")
ap.add_argument("--max-iterations", type=int, default=1000)
ap.add_argument("-o", "--output", default="slice_profile.png")
args = ap.parse_args()

res = persolve.design(args.spec, max_iterations=args.max_iterations, progress=True)
print(res.summary())

persolve.plot.magnetization(res).savefig(args.output, dpi=150)
persolve.plot.save(res, args.output.replace(".png", "_design.png"))
print("wrote", args.output, "and", args.output.replace(".png", "_design.png"))
