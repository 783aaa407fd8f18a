"""Runs the Python suite for `meson test` (suite `python`).

Exit 77 (meson's skip) when the extension was not built or pytest or a
test package is missing; pytest's exit 5 (no test collected) becomes a
failure, so that an empty run never passes.
"""

import importlib
import os
import sys

SKIP = 77
NEEDED = ("pytest", "numpy", "h5py", "matplotlib", "pypulseq")


def main(argv):
    if "--not-built" in argv:
        print("python suite skipped: the extension was not built (configure with "
              "nanobind and the Python headers: ./setup.sh --python)")
        return SKIP
    missing = []
    for name in NEEDED:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        print("python suite skipped: missing " + ", ".join(missing) +
              " (./setup.sh --python installs them)")
        return SKIP
    import pytest

    os.environ.setdefault("MPLBACKEND", "Agg")
    here = argv[-1] if len(argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    code = pytest.main(["-q", "-ra", "-p", "no:cacheprovider", here])
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("python suite: no test collected")
        return 1
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
