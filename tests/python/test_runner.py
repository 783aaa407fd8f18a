"""The suite's runner: a pytest run that collects no test fails."""

import os
import subprocess
import sys


def test_no_test_collected_is_a_failure(tmp_path):
    runner = os.path.join(os.path.dirname(__file__), "run_pytest.py")
    (tmp_path / "test_nothing.py").write_text("# no tests\n")
    r = subprocess.run([sys.executable, runner, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no test collected" in r.stdout
    r = subprocess.run([sys.executable, runner, "--not-built", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 77
