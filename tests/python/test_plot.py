"""Plots render to PNG without warnings (Agg), and are not blank."""

import subprocess
import sys
import warnings

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402

import persolve  # noqa: E402
import persolve.plot as plot  # noqa: E402
from conftest import SMALL_SLICE  # noqa: E402


def not_blank(path):
    img = mpimg.imread(path)[..., :3]
    ink = np.mean(np.any(img < 0.9, axis=-1))  # share of pixels that are not near white
    assert img.shape[0] > 300 and img.shape[1] > 300
    assert 0.02 < ink < 0.6, ink
    assert np.std(img) > 0.05


@pytest.fixture(scope="module")
def slice_result():
    return persolve.design(SMALL_SLICE, backend="cpu", max_iterations=30)


def test_every_plot_renders_without_warnings(slice_result, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot.save(slice_result, tmp_path / "all.png")
        plot.pulse(slice_result).savefig(tmp_path / "pulse.png")
        plot.gradient(slice_result).savefig(tmp_path / "g.png")
        plot.magnetization(slice_result).savefig(tmp_path / "m.png")
        plot.history(slice_result).savefig(tmp_path / "h.png")
    not_blank(tmp_path / "all.png")
    not_blank(tmp_path / "m.png")


def test_maps_of_a_universal_design(tmp_path):
    res = persolve.design("ptx2d:n=16,nt=100,nc=4,nsub=3,nb0=2,b0off=20", backend="cpu",
                          max_iterations=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot.magnetization(res)
        fig.savefig(tmp_path / "subjects.png")
        plot.save(res, tmp_path / "ptx.png")
    assert len(fig.axes) == 3 * 2 * 3  # three subjects: map, target, error with colour bars
    titles = [a.get_title() for a in fig.axes]
    assert any("subject 3 of 3" in t for t in titles)
    assert all(a.get_xlabel() and a.get_ylabel() for a in fig.axes[::2] if a.get_title())
    not_blank(tmp_path / "subjects.png")


def test_module_plot_of_a_cli_result(cli, tmp_path):
    out = tmp_path / "cli.h5"
    subprocess.run([cli, "design", SMALL_SLICE, "--backend", "cpu", "--max-iters", "20", "-q",
                    "-o", str(out)], check=False)
    png = tmp_path / "fig.png"
    r = subprocess.run([sys.executable, "-W", "error", "-m", "persolve", "plot", str(out), "-o",
                        str(png)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    not_blank(png)
    r = subprocess.run([sys.executable, "-m", "persolve", "plot", str(tmp_path / "none.h5"),
                        "-o", str(png)], capture_output=True, text=True)
    assert r.returncode == 3 and "ERR_FILE" in r.stderr
