"""python -m persolve: figures and exports of result files.

    python -m persolve plot RESULT.h5 -o FIG.png [--dpi N] [--subjects FIG2.png]
    python -m persolve export RESULT.h5 --pulseq OUT.seq
    python -m persolve info

Result files from ``persolve design`` (the CLI) or ``Result.save``.
"""

import argparse
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m persolve", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    pl = sub.add_parser("plot", help="draw a result: pulse, gradients, magnetization, history")
    pl.add_argument("result", help="result file (HDF5)")
    pl.add_argument("-o", "--output", required=True, help="figure file (.png, .pdf, .svg)")
    pl.add_argument("--dpi", type=int, default=150)
    pl.add_argument("--subjects", metavar="FILE",
                    help="also the magnetization maps of every subject (universal designs)")
    ex = sub.add_parser("export", help="write the pulse as Pulseq files")
    ex.add_argument("result", help="result file (HDF5)")
    ex.add_argument("--pulseq", required=True, metavar="OUT.seq")
    sub.add_parser("info", help="version, build and GPUs")
    args = ap.parse_args(argv)

    import persolve

    try:
        if args.command == "plot":
            import persolve.plot as plot

            res = persolve.load_result(args.result)
            plot.save(res, args.output, dpi=args.dpi)
            print(args.output)
            if args.subjects:
                plot.magnetization(res).savefig(args.subjects, dpi=args.dpi)
                print(args.subjects)
        elif args.command == "export":
            for f in persolve.export_pulseq(args.result, args.pulseq):
                print(f)
        else:
            print(f"persolve {persolve.__version__}, CUDA backend "
                  f"{'yes' if persolve.have_cuda() else 'no'}, GPUs: {persolve.gpus() or 'none'}")
    except persolve.Error as e:
        print(f"persolve: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
