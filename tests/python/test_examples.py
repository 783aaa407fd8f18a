"""The scripts of examples/ run (small sizes) and write their figures."""

import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

CASES = {
    "slice_profile.py": ["--spec", "slice1d:nz=60,nt=80", "--max-iterations", "5"],
    "ptx_from_arrays.py": ["--max-iterations", "3"],
    "async_run.py": ["--spec", "spiral2d:n=8,nt=200", "--max-iterations", "40"],
    "batch_progress.py": ["--slices", "2", "--ptx", "ptx2d:n=12,nc=4,nt=60",
                          "--slice1d", "slice1d:nz=60,nt=80", "--max-iterations", "30"],
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_example_runs(script, tmp_path):
    png = tmp_path / "fig.png"
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *CASES[script],
                        "-o", str(png)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert png.exists() and png.stat().st_size > 10000
    assert "status" in r.stdout
    if script == "batch_progress.py":
        assert "4/4 done" in r.stdout and r.stdout.count("status ") == 4
    if script == "async_run.py":
        assert "same pulse bit for bit: True" in r.stdout
