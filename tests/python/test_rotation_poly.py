"""The float32 rotation-coefficient polynomials of the shared model math
(src/model/bloch_math_tmpl.h, PS_MID_*) against float64 at every float32
q of their range, with tools/rotation_poly.py --check."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_rotation_polynomials_every_float():
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "rotation_poly.py"), "--check",
         str(ROOT / "src" / "model" / "bloch_math_tmpl.h")],
        capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "largest mean over 30 stretches" in r.stdout
