"""Figures of a design (matplotlib): the pulse's magnitude and phase per
channel, the gradient waveforms, the magnetization profile (1D) or map (2D;
one row per subject for universal designs) beside the target and the error,
and the objective history.

Every function takes a :class:`persolve.Result` (or a result file name)
and draws on the axes given, or returns a new ``matplotlib.figure.Figure``
(no pyplot: nothing opens a window; ``fig.savefig("x.png")``).
"""

import os

import numpy as np
from matplotlib.figure import Figure

from .core import Result, load_result

__all__ = ["result", "pulse", "gradient", "magnetization", "history", "save"]

_UNIVERSAL_ROWS = 8  # subjects shown at most (evenly spaced)


def _result(r):
    if isinstance(r, Result):
        return r
    if isinstance(r, (str, os.PathLike)):
        return load_result(r)
    raise TypeError(f"expected a persolve.Result or a result file, got {type(r).__name__}")


def _ms(problem):
    return problem.time * 1e3


def pulse(res, ax_mag=None, ax_phase=None):
    """|b1| (G) and its phase (rad) per channel against time (ms)."""
    res = _result(res)
    fig = None
    if ax_mag is None or ax_phase is None:
        fig = Figure(figsize=(7, 5), layout="constrained")
        ax_mag, ax_phase = fig.subplots(2, 1, sharex=True)
    t = _ms(res.problem)
    b = res.b1
    nc = b.shape[0]
    for c in range(nc):
        label = f"channel {c}" if nc > 1 else None
        mag = np.abs(b[c])
        ax_mag.step(t, mag, where="post", lw=1.0, label=label)
        ph = np.angle(b[c])
        ph = np.where(ph < -np.pi + 1e-3, np.pi, ph)  # -pi and pi: one phase, drawn at pi
        ph = np.where(mag > 1e-3 * max(mag.max(), 1e-300), ph, np.nan)
        ax_phase.step(t, ph, where="post", lw=1.0, label=label)
    ax_mag.set_ylabel("|$b_1$| (G)")
    ax_mag.set_title("RF magnitude")
    ax_phase.set_ylabel("phase (rad)")
    ax_phase.set_xlabel("time (ms)")
    ax_phase.set_title("RF phase")
    ax_phase.set_ylim(-np.pi * 1.1, np.pi * 1.1)
    ax_phase.set_yticks([-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi])
    ax_phase.set_yticklabels(["$-\\pi$", "$-\\pi/2$", "0", "$\\pi/2$", "$\\pi$"])
    if 1 < nc <= 16:
        ax_mag.legend(fontsize="small", ncols=2 if nc > 4 else 1)
    for a in (ax_mag, ax_phase):
        a.grid(True, alpha=0.3)
    return fig


def gradient(res, ax=None):
    """The gradient waveform of every axis that is not zero (G/cm) against
    time (ms); designed axes are marked."""
    res = _result(res)
    fig = None
    if ax is None:
        fig = Figure(figsize=(7, 3), layout="constrained")
        ax = fig.subplots()
    t = _ms(res.problem)
    g = res.g
    designed = res.problem.design_g or ""
    drawn = 0
    for a, name in enumerate("xyz"):
        if np.any(g[:, a] != 0):
            label = f"$G_{name}$" + (" (designed)" if name in designed else "")
            ax.step(t, g[:, a], where="post", lw=1.0, label=label)
            drawn += 1
    ax.axhline(0, color="0.5", lw=0.8)
    if drawn == 0:
        ax.text(0.5, 0.5, "no gradient", transform=ax.transAxes, ha="center")
        ax.set_xlim(t[0], t[-1] + res.problem.dt * 1e3)
    else:
        ax.legend(fontsize="small")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("gradient (G/cm)")
    ax.set_title("gradient waveforms")
    ax.grid(True, alpha=0.3)
    return fig


def history(res, ax=None):
    """The objective f against the iteration (log scale); the penalty rounds
    of constrained designs are marked."""
    res = _result(res)
    fig = None
    if ax is None:
        fig = Figure(figsize=(5, 3.5), layout="constrained")
        ax = fig.subplots()
    h = res.history
    f = h.f
    if len(f) and np.all(f[np.isfinite(f)] > 0):
        ax.semilogy(h.iteration, f, lw=1.2)
    else:
        ax.plot(h.iteration, f, lw=1.2)
    rounds = h.round
    for i in np.nonzero(np.diff(rounds) > 0)[0]:
        ax.axvline(h.iteration[i + 1], color="0.6", ls=":", lw=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective f")
    ax.set_title("objective history")
    ax.grid(True, which="both", alpha=0.3)
    return fig


# ---- magnetization -------------------------------------------------------------

def _quantity(loss):
    """What to show for a loss: (name, of M, signed error)."""
    if loss == "z":
        return "$M_z$", lambda m: m[:, 2], True
    return "$|M_{xy}|$", lambda m: np.hypot(m[:, 0], m[:, 1]), True


def _coordinates(problem):
    """The one or two coordinates the spins spread over: positions first,
    else off-resonance and B1 scale. [(label, values)]."""
    out = []
    r = problem.r
    for a, name in enumerate("xyz"):
        if np.ptp(r[:, a]) > 0:
            out.append((f"{name} (cm)", r[:, a]))
    if not out:
        if problem.df is not None and np.ptp(problem.df) > 0:
            out.append(("off-resonance (Hz)", problem.df))
        if problem.b1scale is not None and np.ptp(problem.b1scale) > 0:
            out.append(("$B_1$ scale", problem.b1scale))
        if problem.b1map is not None and not out:
            out.append(("spin", np.arange(problem.ns, dtype=float)))
    return out[:2]


def _subjects(u, v):
    """Split the spins into subjects: the spin order restarts (a later spin
    before an earlier one in (u, v) order) where a new subject begins."""
    starts = [0]
    for j in range(1, len(u)):
        if (u[j], v[j]) < (u[j - 1], v[j - 1]):
            starts.append(j)
    starts.append(len(u))
    return [np.arange(starts[i], starts[i + 1]) for i in range(len(starts) - 1)]


def _grid(u, v, values, idx):
    """values[idx] on the grid of the unique u and v (mean over the spins
    of one cell: B0 copies); NaN where no spin is."""
    xs, ys = np.unique(u), np.unique(v)
    img = np.zeros((len(ys), len(xs)))
    cnt = np.zeros_like(img)
    i = np.searchsorted(xs, u[idx])
    k = np.searchsorted(ys, v[idx])
    np.add.at(img, (k, i), values[idx])
    np.add.at(cnt, (k, i), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        img = np.where(cnt > 0, img / np.maximum(cnt, 1), np.nan)
    return xs, ys, img


def _extent(xs, ys):
    dx = (xs[1] - xs[0]) if len(xs) > 1 else 1.0
    dy = (ys[1] - ys[0]) if len(ys) > 1 else 1.0
    return [xs[0] - dx / 2, xs[-1] + dx / 2, ys[0] - dy / 2, ys[-1] + dy / 2]


def magnetization(res, axes=None):
    """The final magnetization beside the target and the error (M - target
    of the quantity the loss looks at: |Mxy|, or Mz for the z loss): a
    profile along one coordinate, or maps over two (one row per subject of
    a universal design, at most 8, evenly spaced)."""
    res = _result(res)
    p = res.problem
    name, of, _ = _quantity(p.loss)
    m, mt = of(res.m), of(p.target)
    err = m - mt
    coords = _coordinates(p)
    if len(coords) < 2:
        return _profile(res, coords, name, m, mt, err, axes)
    (ul, u), (vl, v) = coords
    subjects = _subjects(u, v)
    show = subjects
    if len(subjects) > _UNIVERSAL_ROWS:
        pick = np.unique(np.linspace(0, len(subjects) - 1, _UNIVERSAL_ROWS).round().astype(int))
        show = [subjects[i] for i in pick]
    else:
        pick = np.arange(len(subjects))
    fig = None
    if axes is None:
        fig = Figure(figsize=(11, 3.4 * len(show) + 0.3), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(show), 3))
    axes = np.atleast_2d(axes)
    vmax = max(np.nanmax(np.abs(m)), np.nanmax(np.abs(mt)), 1e-12)
    emax = max(np.nanmax(np.abs(err)), 1e-12)
    lo = 0.0 if p.loss != "z" else -vmax
    for row, (q, idx) in enumerate(zip(pick, show)):
        xs, ys, img_m = _grid(u, v, m, idx)
        _, _, img_t = _grid(u, v, mt, idx)
        _, _, img_e = _grid(u, v, err, idx)
        ext = _extent(xs, ys)
        sub = f" (subject {q + 1} of {len(subjects)})" if len(subjects) > 1 else ""
        panels = [(img_m, f"{name}{sub}", "viridis", lo, vmax, name),
                  (img_t, f"target {name}", "viridis", lo, vmax, name),
                  (img_e, f"error {name} $-$ target", "RdBu_r", -emax, emax, "error")]
        for ax, (img, title, cmap, a, b, clabel) in zip(axes[row], panels):
            im = ax.imshow(img, origin="lower", extent=ext, cmap=cmap, vmin=a, vmax=b,
                           aspect="equal" if ul.endswith("(cm)") and vl.endswith("(cm)")
                           else "auto", interpolation="nearest")
            ax.set_title(title, fontsize="medium")
            ax.set_xlabel(ul)
            ax.set_ylabel(vl)
            cb = ax.figure.colorbar(im, ax=ax, shrink=0.85)
            cb.set_label(clabel)
    return fig


def _profile(res, coords, name, m, mt, err, axes):
    p = res.problem
    if coords:
        label, u = coords[0]
    else:
        label, u = "spin", np.arange(p.ns, dtype=float)
    order = np.argsort(u, kind="stable")
    fig = None
    if axes is None:
        fig = Figure(figsize=(10, 3.6), layout="constrained")
        axes = fig.subplots(1, 2)
    ax, ax_e = np.ravel(axes)[:2]
    w = p.w
    if w is not None and np.any(w[order] == 0):
        free = np.where(w[order] == 0, 1.0, 0.0)
        ax.fill_between(u[order], 0, 1, where=free > 0, color="0.9",
                        transform=ax.get_xaxis_transform(), label="weight 0")
    ax.plot(u[order], mt[order], "k--", lw=1.2, label=f"target {name}")
    ax.plot(u[order], m[order], lw=1.5, label=name)
    if name == "$|M_{xy}|$":
        ax.plot(u[order], res.m[order, 2], lw=1.0, alpha=0.7, label="$M_z$")
    ax.set_xlabel(label)
    ax.set_ylabel("magnetization ($M_0$ = 1)")
    ax.set_title("magnetization profile")
    ax.legend(fontsize="small", loc="best")
    ax.grid(True, alpha=0.3)
    shown = err[order] if w is None else np.where(w[order] > 0, err[order], np.nan)
    ax_e.plot(u[order], shown, color="C3", lw=1.2)
    ax_e.axhline(0, color="0.5", lw=0.8)
    ax_e.set_xlabel(label)
    ax_e.set_ylabel(f"error ({name} $-$ target)")
    ax_e.set_title("profile error" + (" (weighted spins)" if w is not None else ""))
    ax_e.grid(True, alpha=0.3)
    return fig


def result(res):
    """One figure of a design: the pulse (magnitude, phase), the gradients,
    the objective history, and the magnetization against the target with
    the error (the first subject of a universal design: see
    :func:`magnetization` for all of them)."""
    res = _result(res)
    p = res.problem
    two_d = len(_coordinates(p)) == 2
    fig = Figure(figsize=(13, 8.5), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.05])
    a = top.subplot_mosaic([["mag", "grad", "hist"], ["phase", "grad", "hist"]],
                           width_ratios=[1.3, 1.3, 1])
    pulse(res, a["mag"], a["phase"])
    a["mag"].set_xlabel("time (ms)")
    gradient(res, a["grad"])
    history(res, a["hist"])
    if two_d:
        axes = bottom.subplots(1, 3)
        _first_subject(res, axes)
    else:
        magnetization(res, bottom.subplots(1, 2))
    fig.suptitle(f"persolve: {res.message}, {res.iterations} iterations, "
                 f"f {res.f0:.4g} $\\to$ {res.f:.4g}", fontsize="large")
    return fig


def _first_subject(res, axes):
    p = res.problem
    (ul, u), (vl, v) = _coordinates(p)
    first = _subjects(u, v)[0]
    if len(first) == p.ns:
        return magnetization(res, axes)
    # a universal design: the first subject's spins only
    keep = np.zeros(p.ns, bool)
    keep[first] = True
    sub = _Subset(res, keep)
    magnetization(sub, axes)
    for ax in np.ravel(axes)[:1]:
        ax.set_title(ax.get_title() + f" (subject 1 of {len(_subjects(u, v))})")


class _Subset(Result):
    """A view of a result restricted to some spins (for one subject's maps)."""

    def __init__(self, res, keep):  # noqa: D401 - no Result.__init__
        self.__dict__.update(res.__dict__)
        self.m = res.m[keep]
        self.problem = _SubProblem(res.problem, keep)


class _SubProblem:
    def __init__(self, p, keep):
        self._p, self._k = p, keep

    def __getattr__(self, name):
        v = getattr(self._p, name)
        if name in ("r", "target", "df", "b1scale", "w", "m0") and v is not None:
            return v[self._k]
        if name == "ns":
            return int(np.count_nonzero(self._k))
        return v


def save(res, path, dpi=150):
    """Draw :func:`result` and write it (PNG, PDF, SVG: by the extension)."""
    fig = result(res)
    fig.savefig(os.fspath(path), dpi=dpi)
    return fig
