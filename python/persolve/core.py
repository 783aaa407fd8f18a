"""Problems, designs, evaluations and asynchronous runs over the C library.

Units everywhere (docs/model.md): positions in cm, gradients in G/cm, RF in
G (complex b1 = u + i v), dt in s, off-resonance in Hz, T1 and T2 in s,
gamma-bar in Hz/G. A point ``x`` is the solver's layout (``nx`` float64):
the RF of every channel (u_c then v_c, channel after channel), then the
waveform of every designed gradient axis (G/cm) in the order x, y, z.
"""

import dataclasses
import enum
import os
import time
import warnings

import numpy as np

from . import _persolve
from ._errors import InputError, Status, _from_status

__all__ = [
    "Problem", "Result", "History", "Evaluation", "Progress", "RunState", "Run",
    "Batch", "BatchProgress", "BatchState",
    "design", "evaluate", "simulate", "load_result", "export_pulseq", "pulseq_resample",
    "presets", "options_default",
]


def presets():
    """The names of the presets (``slice1d``, ``spiral2d``, ...)."""
    return list(_persolve.preset_names())


def options_default():
    """The solver options and their defaults (``ps_options_default``).

    Every function that solves or evaluates takes these as keyword
    arguments: ``backend`` ("auto", "cpu", "gpu"), ``precision`` ("single",
    "double"), ``memory``, ``max_iterations``, ``max_evaluations``,
    ``time_limit``, ``gtol``, ``ftol``, ``past``, ``c1``, ``c2``,
    ``max_linesearch``, ``fnoise``, ``threads``, ``max_rounds``,
    ``constraint_tol``, ``penalty_mu``; and the GPU launch shape
    (``persolve_gpu.h``): ``tune_cache``, ``gpu_block``,
    ``gpu_spins_per_tile``, ``gpu_max_registers``, ``gpu_blocks_per_sm``,
    ``gpu_grid``, ``gpus`` (the GPUs one solve's spins are split over: 0 or
    1 one, N, -1 every GPU), and of a :class:`Batch` ``batch_team_blocks`` and
    ``batch_team_barrier`` (0 automatic, 1 range, 2 cluster).
    """
    return dict(_persolve.options_default())


# ---- arrays -----------------------------------------------------------------

def _real(a, name):
    """float64, C-contiguous (no copy when it already is)."""
    if a is None:
        return None
    a = np.asarray(a)
    if np.iscomplexobj(a):
        raise InputError(Status.ERR_SIZE, f"{name}: expected real values, got a complex array")
    return np.ascontiguousarray(a, dtype=np.float64)


def _pairs(a, name):
    """A complex array as float64 (Re, Im) pairs in a last axis of 2 (a view
    when it is complex128 and C-contiguous); a real array as given."""
    if a is None:
        return None
    a = np.asarray(a)
    if np.iscomplexobj(a):
        c = np.ascontiguousarray(a, dtype=np.complex128)
        return c.view(np.float64).reshape(c.shape + (2,))
    return _real(a, name)


def _complex(a):
    """Read-only complex view of (Re, Im) pairs [..., 2]."""
    if a is None:
        return None
    return a.view(np.complex128)[..., 0]


# ---- problems ---------------------------------------------------------------

class Problem:
    """A pulse design problem (immutable once made).

    Make one from arrays (the constructor), from a preset
    (:meth:`preset`) or from an HDF5 problem or result file
    (:meth:`from_file`). The arrays are copied into the library once; the
    attributes (``r``, ``target``, ``g``, ...) are read-only views of its
    copy.

    Arrays (Ns spins, Nt steps, Nc channels, Nq VOPs):

    - ``r`` [Ns,3] positions (cm), ``target`` [Ns,3] target magnetization,
      ``g`` [Nt,3] gradient waveform (G/cm; the start of designed axes),
      ``dt`` the time step (s): required.
    - ``df`` [Ns] off-resonance (Hz), ``b1scale`` [Ns] B1 scale of one
      channel, ``w`` [Ns] weights, ``m0`` [Ns,3] start magnetization,
      ``t1``, ``t2`` [Ns] relaxation (s).
    - ``b1map`` [Ns,Nc] complex B1+ sensitivities (or [Ns,Nc,2] Re, Im):
      several transmit channels.
    - ``b1`` the start pulse: complex [Nt] or [Nc,Nt] (or [Nt,2], [Nc,Nt,2]).
    - ``vop`` [Nq,Nc,Nc] complex VOP matrices (W/kg per G^2) with
      ``sar_max`` (W/kg) and ``tr`` (s): local SAR limits.
    - ``b1_max``: peak |b1| (G), one number or one per channel [Nc].
    - ``rf_mask`` [Nt]: 1 where the RF is free, 0 where it is held at zero.
    - ``design_g`` ("x", "xy", "xyz", ...): gradient axes designed with the
      pulse, with ``smax`` (G/cm/s), optional ``gmax`` (G/cm) and
      ``g_end`` (return to zero at the end).
    - ``loss`` ("full", "xy", "mls", "z"), ``lambda_`` (RF power weight),
      ``gamma_bar`` (Hz/G; default 4257.59).

    Invalid input raises :class:`persolve.InputError` with the library's
    status and message naming the field and element.
    """

    def __init__(self, r, target, g, dt, *, df=None, b1scale=None, w=None, m0=None,
                 t1=None, t2=None, b1map=None, b1=None, vop=None, sar_max=None, tr=None,
                 rf_mask=None, b1_max=None, gamma_bar=None, lambda_=0.0, loss="full",
                 design_g=None, smax=None, gmax=None, g_end=False):
        b1_scalar, b1_channel = None, None
        if b1_max is not None:
            if np.ndim(b1_max) == 0:
                b1_scalar = float(b1_max)
            else:
                b1_channel = _real(b1_max, "b1_max")
        pulse = None
        if b1 is not None:
            b1 = np.asarray(b1)
            if np.iscomplexobj(b1):
                pulse = _pairs(b1 if b1.ndim == 2 else b1.reshape(1, -1), "b1")
            else:
                pulse = _real(b1, "b1")
        self._c = _persolve.Problem.from_arrays(
            _real(r, "r"), _real(target, "target"), _real(g, "g"), float(dt),
            df=_real(df, "df"), b1scale=_real(b1scale, "b1scale"), w=_real(w, "w"),
            m0=_real(m0, "m0"), t1=_real(t1, "t1"), t2=_real(t2, "t2"),
            b1map=_pairs(b1map, "b1map"), b1=pulse, vop=_pairs(vop, "vop"),
            rf_mask=_real(rf_mask, "rf_mask"), b1_max_channel=b1_channel,
            gamma_bar=float(gamma_bar or 0.0), lambda_=float(lambda_), loss=str(loss),
            b1_max=b1_scalar, sar_max=float(sar_max or 0.0), tr=float(tr or 0.0),
            design_g=design_g or "", smax=float(smax or 0.0), gmax=float(gmax or 0.0),
            g_end=bool(g_end))
        self._d = None

    @classmethod
    def _wrap(cls, c):
        p = cls.__new__(cls)
        p._c = c
        p._d = None
        return p

    @classmethod
    def preset(cls, spec):
        """A preset, ``NAME[:key=value,...]`` (docs/presets.md), e.g.
        ``Problem.preset("spiral2d:n=32,nt=1000")``."""
        return cls._wrap(_persolve.Problem.preset(str(spec)))

    @classmethod
    def from_file(cls, path):
        """Read an HDF5 problem file (or the problem of a result file) with
        the library's own reader (docs/file-format.md)."""
        return cls._wrap(_persolve.Problem.read(os.fspath(path)))

    def save(self, path):
        """Write the problem as an HDF5 problem file (the library's writer)."""
        self._c.write(os.fspath(path))

    @property
    def _desc(self):
        if self._d is None:
            self._d = self._c.describe()
        return self._d

    ns = property(lambda self: self._c.ns, doc="number of spins")
    nt = property(lambda self: self._c.nt, doc="number of time steps")
    nc = property(lambda self: self._c.nc, doc="number of transmit channels")
    nq = property(lambda self: self._c.nq, doc="number of SAR VOPs (0: no SAR limit)")
    nx = property(lambda self: self._c.nx, doc="number of unknowns (the length of x)")
    penalized = property(lambda self: self._c.penalized,
                         doc="constraints met by penalty rounds (SAR, gmax, g_end)")
    r = property(lambda self: self._desc["r"], doc="[Ns,3] positions, cm")
    target = property(lambda self: self._desc["target"], doc="[Ns,3] target magnetization")
    df = property(lambda self: self._desc["df"], doc="[Ns] off-resonance, Hz (None: 0)")
    b1scale = property(lambda self: self._desc["b1scale"], doc="[Ns] B1 scale (None: 1)")
    w = property(lambda self: self._desc["w"], doc="[Ns] weights (None: 1)")
    m0 = property(lambda self: self._desc["m0"], doc="[Ns,3] start magnetization (None: +z)")
    t1 = property(lambda self: self._desc["t1"], doc="[Ns] T1, s (None: no relaxation)")
    t2 = property(lambda self: self._desc["t2"], doc="[Ns] T2, s (None: no relaxation)")
    g = property(lambda self: self._desc["g"], doc="[Nt,3] gradient waveform, G/cm")
    rf_mask = property(lambda self: self._desc["rf_mask"], doc="[Nt] RF mask (None: free)")
    dt = property(lambda self: self._desc["dt"], doc="time step, s")
    gamma_bar = property(lambda self: self._desc["gamma_bar"], doc="Hz/G")
    lambda_ = property(lambda self: self._desc["lambda"], doc="RF power penalty weight")
    loss = property(lambda self: self._desc["loss"], doc="loss type")
    sar_max = property(lambda self: self._desc["sar_max"] if self.nq else None,
                       doc="local SAR limit, W/kg (None without VOPs)")
    tr = property(lambda self: self._desc["tr"] if self.nq else None,
                  doc="repetition time of the SAR average, s (None without VOPs)")
    design_g = property(lambda self: self._desc["design_g"] or None,
                        doc="designed gradient axes ('xy'), None when g is fixed")
    smax = property(lambda self: self._desc["smax"] if self.design_g else None)
    gmax = property(lambda self: (self._desc["gmax"] or None) if self.design_g else None)
    g_end = property(lambda self: self._desc["g_end"])

    @property
    def b1map(self):
        """[Ns,Nc] complex B1+ sensitivities (None for one channel)."""
        return _complex(self._desc["b1map"])

    @property
    def vop(self):
        """[Nq,Nc,Nc] complex VOP matrices, W/kg per G^2 (None without)."""
        return _complex(self._desc["vop"])

    @property
    def b1(self):
        """[Nc,Nt] complex start pulse, G."""
        return _complex(self._desc["b1"])

    @property
    def b1_max(self):
        """Peak |b1| limit, G: a number, an array [Nc] per channel, or None."""
        per = self._desc["b1_max_channel"]
        if per is not None:
            return per
        v = self._desc["b1_max"]
        return None if not np.isfinite(v) else v

    @property
    def x0(self):
        """The start point in solver layout (a new array)."""
        return self._c.x0()

    @property
    def time(self):
        """[Nt] the start of every step, s."""
        return np.arange(self.nt) * self.dt

    def pulse_of(self, x):
        """[Nc,Nt] complex RF pulse (G) of a point x."""
        x = np.asarray(x, dtype=np.float64)
        uv = x[: 2 * self.nc * self.nt].reshape(self.nc, 2, self.nt)
        return uv[:, 0, :] + 1j * uv[:, 1, :]

    def gradient_of(self, x):
        """[Nt,3] the gradient waveform in effect at x (G/cm): the problem's,
        with the designed axes' waveforms from x."""
        x = np.asarray(x, dtype=np.float64)
        g = np.array(self.g)
        axes = self.design_g or ""
        off = 2 * self.nc * self.nt
        for i, a in enumerate(axes):
            g[:, "xyz".index(a)] = x[off + i * self.nt: off + (i + 1) * self.nt]
        return g

    def point(self, b1, g=None):
        """The point x of a pulse b1 (complex [Nt] or [Nc,Nt]) and, with
        designed axes, a gradient waveform g [Nt,3] (default: the problem's)."""
        b1 = np.asarray(b1, dtype=np.complex128).reshape(self.nc, self.nt)
        x = np.empty(self.nx)
        uv = x[: 2 * self.nc * self.nt].reshape(self.nc, 2, self.nt)
        uv[:, 0, :] = b1.real
        uv[:, 1, :] = b1.imag
        g = self.g if g is None else np.asarray(g, dtype=np.float64)
        off = 2 * self.nc * self.nt
        for i, a in enumerate(self.design_g or ""):
            x[off + i * self.nt: off + (i + 1) * self.nt] = g[:, "xyz".index(a)]
        return x

    def _x(self, x, name="x"):
        if x is None:
            return self.x0
        return _real(x, name)

    def __repr__(self):
        extra = []
        if self.nc > 1:
            extra.append(f"nc={self.nc}")
        if self.nq:
            extra.append(f"nq={self.nq}")
        if self.design_g:
            extra.append(f"design_g={self.design_g!r}")
        more = (", " + ", ".join(extra)) if extra else ""
        return f"Problem(ns={self.ns}, nt={self.nt}, dt={self.dt:g}, loss={self.loss!r}{more})"


def _problem(p):
    if isinstance(p, Problem):
        return p
    if isinstance(p, (str, os.PathLike)):
        path = os.fspath(p)
        return Problem.from_file(path) if os.path.exists(path) else Problem.preset(path)
    raise TypeError(f"expected a Problem, a preset spec or a file name, got {type(p).__name__}")


# ---- evaluations ------------------------------------------------------------

@dataclasses.dataclass
class Evaluation:
    """F at a point, its exact gradient (solver layout, ``nx``) and dF/dG
    [Nt,3], the gradient with respect to the gradient waveform of every
    axis (None when not asked for)."""

    f: float
    gradient: np.ndarray
    gradient_g: np.ndarray = None


def evaluate(problem, x=None, *, gradient_g=True, **options):
    """F and its exact gradient at x (default: the start point).

    With ``gradient_g`` (the default) also dF/dG by ``ps_eval_g``, which the
    CPU backend computes (``backend="gpu"`` then raises BackendError;
    "auto" runs it on the CPU), as ``persolve eval`` does.
    """
    problem = _problem(problem)
    f, grad, gg = _persolve.evaluate(problem._c, problem._x(x), options, bool(gradient_g))
    return Evaluation(f, grad, gg)


def simulate(problem, x=None, **options):
    """The final magnetization [Ns,3] of the pulse x (default: the start)."""
    problem = _problem(problem)
    return _persolve.simulate(problem._c, problem._x(x), options)


# ---- results ----------------------------------------------------------------

class History:
    """The objective history of a solve, one row per iteration (row 0: the
    start point): ``iteration``, ``f``, ``gnorm``, ``step``,
    ``evaluations``, ``seconds``, ``round`` (the penalty round), each an
    array; ``array`` is the [rows,7] table as result files hold it."""

    columns = ("iteration", "f", "gnorm", "step", "evaluations", "seconds", "round")

    def __init__(self, array):
        self.array = np.asarray(array, dtype=np.float64).reshape(-1, 7)

    def __len__(self):
        return len(self.array)

    def __getattr__(self, name):
        if name in History.columns:
            return self.array[:, History.columns.index(name)]
        raise AttributeError(name)

    def __repr__(self):
        return f"History({len(self)} rows)"


class Result:
    """The outcome of a design.

    ``x`` (the point, solver layout), ``b1`` ([Nc,Nt] complex pulse, G),
    ``g`` ([Nt,3] gradient waveform in effect, G/cm), ``m`` ([Ns,3] final
    magnetization), ``history`` (:class:`History`), ``status`` (a
    :class:`persolve.Status`) and ``message`` (its text), ``iterations``,
    ``evaluations``, ``f``, ``gnorm``, ``seconds``, ``backend``, ``device``,
    ``rounds``, ``mu``, ``violation``, and :attr:`constraints`.
    """

    def __init__(self, problem, x, m, info):
        self.problem = problem
        self.x = x
        self.m = m
        self.status = _as_status(info["status"])
        self.message = _persolve.strerror(int(self.status))
        self.iterations = int(info["iterations"])
        self.evaluations = int(info["evaluations"])
        self.f = float(info["f"])
        self.gnorm = float(info["gnorm"])
        self.seconds = float(info["seconds"])
        self.kernel_seconds = float(info.get("kernel_seconds", 0.0))
        self.backend = str(info["backend"])
        self.fell_back = bool(info.get("fell_back", False))
        self.device = str(info["device"])
        self.rounds = int(info["rounds"])
        self.mu = float(info["mu"])
        self.violation = float(info["violation"])
        self.history = History(info["history"])

    @property
    def converged(self):
        return self.status in (Status.CONVERGED, Status.CONVERGED_FTOL)

    @property
    def b1(self):
        """[Nc,Nt] complex pulse, G."""
        return self.problem.pulse_of(self.x)

    pulse = b1

    @property
    def g(self):
        """[Nt,3] gradient waveform in effect, G/cm."""
        return self.problem.gradient_of(self.x)

    @property
    def f0(self):
        return float(self.history.f[0]) if len(self.history) else float("nan")

    @property
    def constraints(self):
        """The hardware constraints at the result and their limits
        (``ps_constraints``, ``ps_gradient_constraints``): ``peak_b1`` [Nc]
        (max |b1| per channel, G) and ``b1_max``; ``sar`` [Nq] (W/kg) and
        ``sar_max``; per designed gradient axis (``design_g``) ``peak_g``
        (max |g|, G/cm), ``peak_slew`` (G/cm/s), ``end_g`` (|g(T)|, G/cm) with
        ``gmax``, ``smax``, ``g_end``; ``rf_free_steps``."""
        p = self.problem
        c = _persolve.constraints(p._c, self.x)
        axes = [("xyz".index(a)) for a in (p.design_g or "")]
        mask = p.rf_mask
        return {
            "peak_b1": c["peak_b1"], "b1_max": p.b1_max,
            "sar": c["sar"] if p.nq else None, "sar_max": p.sar_max,
            "design_g": p.design_g,
            "peak_g": c["peak_g"][axes] if axes else None,
            "peak_slew": c["peak_slew"][axes] if axes else None,
            "end_g": c["end_g"][axes] if axes else None,
            "gmax": p.gmax, "smax": p.smax, "g_end": p.g_end,
            "rf_free_steps": int(p.nt if mask is None else np.count_nonzero(mask)),
        }

    def save(self, path):
        """Write the result file (the library's writer, as ``persolve design``)."""
        _persolve.write_result(os.fspath(path), self.problem._c, self.x, self.m,
                               self.history.array, int(self.status), self.iterations,
                               self.evaluations, self.f, self.gnorm, self.seconds,
                               self.backend, self.device, self.rounds, self.mu, self.violation)

    def export_pulseq(self, path):
        """Write the pulse as Pulseq files (see :func:`export_pulseq`)."""
        return export_pulseq(self, path)

    def summary(self):
        """A text summary, the lines of ``persolve design``'s."""
        lines = [
            f"status       {self.message} ({int(self.status)})",
            f"iterations   {self.iterations}",
            f"evaluations  {self.evaluations}",
            f"f            {self.f0:.6e} -> {self.f:.6e}",
            f"gnorm        {self.gnorm:.3e}",
            f"seconds      {self.seconds:.3f}",
            f"backend      {self.backend} ({self.device})",
        ]
        c = self.constraints
        if self.problem.nc > 1 or c["b1_max"] is not None:
            lines.append("peak |b1|    " + " ".join(f"{v:.4g}" for v in c["peak_b1"]) + " G")
        if c["sar"] is not None:
            lines.append("SAR          " + " ".join(f"{v:.4g}" for v in c["sar"])
                         + f" W/kg (sar_max {c['sar_max']:.4g})")
        if c["design_g"]:
            lines.append("max |g|      " + " ".join(f"{v:.4g}" for v in c["peak_g"]) + " G/cm")
            lines.append("max slew     " + " ".join(f"{v:.4g}" for v in c["peak_slew"])
                         + " G/cm/s")
        if self.problem.penalized:
            lines.append(f"rounds       {self.rounds}")
            lines.append(f"violation    {self.violation:.3e}")
        return "\n".join(lines)

    def __repr__(self):
        return (f"Result(status={self.status!r}, iterations={self.iterations}, "
                f"f={self.f:.6g}, backend={self.backend!r})")


def _as_status(s):
    try:
        return Status(int(s))
    except ValueError:
        return int(s)


def load_result(path):
    """Read a result file (written by :meth:`Result.save` or ``persolve
    design``): the problem and the point with the library's reader, the
    magnetization, history and outcome from /result with h5py."""
    import h5py

    path = os.fspath(path)
    problem = Problem.from_file(path)
    x = _persolve.read_x(path, problem._c)
    with h5py.File(path, "r") as f:
        if "result" not in f:
            from ._errors import FileError

            raise FileError(Status.ERR_FILE, f"{path}: /result: no such group (not a result file)")
        res = f["result"]
        a = res.attrs
        cons = res["constraints"].attrs if "constraints" in res else {}
        info = {
            "status": int(a.get("status", 0)),
            "iterations": int(a.get("iterations", 0)),
            "evaluations": int(a.get("evaluations", 0)),
            "f": float(a.get("f", np.nan)),
            "gnorm": float(a.get("gnorm", np.nan)),
            "seconds": float(a.get("seconds", 0.0)),
            "backend": _text(a.get("backend", "cpu")),
            "device": _text(a.get("device", "")),
            "fell_back": bool(a.get("fell_back", 0)),
            "rounds": int(cons.get("rounds", 1)),
            "mu": float(cons.get("mu", 0.0)),
            "violation": float(cons.get("violation", 0.0)),
            "history": np.array(res["history"], dtype=np.float64) if "history" in res
            else np.zeros((0, 7)),
        }
        m = np.array(res["m"], dtype=np.float64)
    return Result(problem, x, m, info)


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


# ---- export -----------------------------------------------------------------

def export_pulseq(source, path):
    """Write a designed pulse as Pulseq v1.4.2 files with the C writer that
    ``persolve export --pulseq`` uses; returns the files written.

    ``source`` is a :class:`Result` or the name of a result file. RF on the
    1 us raster, gradients on the 10 us raster, each interval the mean of
    the piecewise-constant waveform over it (:func:`pulseq_resample`). Pulseq
    has no dynamic parallel transmit: Nc > 1 channels give one file per
    channel, ``OUT_ch0.seq`` .. (README "Export").
    """
    if isinstance(source, Result):
        problem, x = source.problem, source.x
    else:
        problem = Problem.from_file(source)
        x = _persolve.read_x(os.fspath(source), problem._c)
    return list(_persolve.pulseq_write(os.fspath(path), problem._c, x))


def pulseq_resample(w, dt, raster):
    """The piecewise-constant waveform w (one value per step of dt) on a
    raster: the mean of w over each raster interval (zero after the end),
    as the Pulseq export resamples."""
    return _persolve.pulseq_resample(_real(w, "w").ravel(), float(dt), float(raster))


# ---- runs -------------------------------------------------------------------

class RunState(enum.IntEnum):
    """What an asynchronous run is doing (``ps_run_state``)."""

    RUNNING = 0
    PAUSED = 1
    YIELDED = 2
    FINISHED = 3


@dataclasses.dataclass
class Progress:
    """A consistent snapshot of a run (``ps_snapshot``)."""

    iteration: int
    f: float
    gnorm: float
    step: float
    evaluations: int
    seconds: float
    state: RunState
    status: object
    round: int
    idle: bool
    phase: int
    heartbeat: int
    sequence: int


class _Handle:
    """What a run and a batch share: close() frees the library's handle, and
    a context manager closes it."""

    def close(self):
        """Free the handle (a running solve is cancelled and joined first)."""
        if self._c is not None:
            self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read_blob(source):
    """A checkpoint given as bytes or as a file name."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    with open(os.fspath(source), "rb") as f:
        return f.read()


class Run(_Handle):
    """An asynchronous solve (``ps_solve_start``): it runs on a worker (the
    CPU backend's threads, or the GPU's persistent kernel) while Python
    watches and steers it.

    ``Run(problem, x0=None, **options)`` starts it; :meth:`progress` reads a
    snapshot without blocking; :meth:`pause`, :meth:`resume`,
    :meth:`cancel`, :meth:`yield_gpu` steer it; :meth:`wait` waits (the GIL
    released) and returns the :class:`Result`; :meth:`checkpoint` saves its
    state (paused, yielded or finished) and :meth:`resume_from` continues
    one, in this process or another (the CLI's ``--resume`` reads the same
    files). ``callback(progress_dict)``, when given, is called once per
    iteration from the worker on the CPU backend (not on the GPU); a true
    return cancels the run. Use it as a context manager, or :meth:`close`
    it (a running run is cancelled).
    """

    def __init__(self, problem, x0=None, *, callback=None, **options):
        problem = _problem(problem)
        self._init(problem, options)
        self._c = _persolve.Run.start(problem._c, problem._x(x0, "x0"), options, callback)

    def _init(self, problem, options):
        self.problem = problem
        self.options = dict(options)
        self._result = None
        self._c = None

    @classmethod
    def resume_from(cls, source, problem, *, callback=None, **options):
        """Continue a run from a checkpoint (bytes, or a file name) of the
        same problem. The limits (max_iterations, max_evaluations,
        time_limit) may change; the algorithmic settings may not."""
        problem = _problem(problem)
        blob = _read_blob(source)
        run = cls.__new__(cls)
        run._init(problem, options)
        run._c = _persolve.Run.resume_from(problem._c, blob, options, callback)
        return run

    def progress(self):
        """The latest progress (:class:`Progress`), without blocking."""
        return _progress_of(self._c.snapshot())

    @property
    def state(self):
        return self.progress().state

    @property
    def done(self):
        return self.state == RunState.FINISHED

    def pause(self):
        """Ask the run to pause at its next control point (returns at once)."""
        self._c.pause()

    def resume(self):
        """Continue a paused or yielded run."""
        self._c.resume()

    def cancel(self):
        """End the run at its next control point with CANCELLED and the best
        point so far (at once when paused or yielded)."""
        self._c.cancel()

    def yield_gpu(self):
        """Ask the run to yield: its state is kept and its worker (the GPU
        kernel or the CPU threads) exits, freeing the device; resume()
        continues it bit-identically."""
        self._c.yield_()

    def wait(self, timeout=None):
        """Wait for the end, at most ``timeout`` seconds (None: no limit).
        Returns the :class:`Result`, or None when the time passed first;
        raises :class:`persolve.Error` when the solve ended in an error that
        leaves no point (a line-search failure returns the last good point,
        with a RuntimeWarning).
        The GIL is released while waiting; Ctrl-C interrupts the wait (not
        the run)."""
        if self._result is not None:
            return self._result
        if timeout is None:
            info = None
            while info is None:
                info = self._c.wait(0.1)
        else:
            info = self._c.wait(float(timeout))
            if info is None:
                return None
        self._result = _finish(self.problem, info, self.options)
        return self._result

    result = wait

    def checkpoint(self, path=None):
        """The run's state as bytes (the run must be paused, yielded or
        finished), also written to ``path`` when given (replaced atomically)."""
        blob = self._c.checkpoint()
        if path is not None:
            _write_atomic(os.fspath(path), blob)
        return blob

    def __repr__(self):
        try:
            p = self.progress()
            return f"Run(state={p.state.name}, iteration={p.iteration}, f={p.f:.6g})"
        except Exception:
            return "Run(closed)"


def _write_atomic(path, data):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _finish(problem, info, options):
    """A Result from a finished run's outcome: the final magnetization by
    ps_simulate with the same options, as ``persolve design`` does."""
    status = info["status"]
    if status < 0 and status != Status.ERR_LINE_SEARCH:
        raise _from_status(status, info.get("message", ""))  # no usable point
    if status == Status.ERR_LINE_SEARCH:
        warnings.warn(f"{_persolve.strerror(status)}: the result holds the last good point",
                      RuntimeWarning, stacklevel=3)
    x = info["x"]
    m = _persolve.simulate(problem._c, x, options)
    return Result(problem, x, m, info)


def design(problem, x0=None, *, progress=False, callback=None, **options):
    """Design the pulse: minimize F from x0 (default: the problem's start).

    ``problem`` is a :class:`Problem`, a preset spec or a problem file.
    Options as keyword arguments (:func:`options_default`), e.g.
    ``backend="cpu"``, ``max_iterations=500``. With ``progress=True`` a
    tqdm progress bar shows the iterations and f (when tqdm is installed).
    ``callback`` as for :class:`Run`. The solve runs with the GIL released;
    Ctrl-C cancels it and raises KeyboardInterrupt.

    Returns a :class:`Result` (same algorithm and result as ``persolve
    design`` with the same options and backend); errors that leave no
    point raise :class:`persolve.Error`.
    """
    problem = _problem(problem)
    bar = _progress_bar(options) if progress else None
    run = Run(problem, x0, callback=callback, **options)
    try:
        while True:
            info = run._c.wait(0.1)
            if bar is not None:
                bar.update_from(run.progress())
            if info is not None:
                break
    except KeyboardInterrupt:
        run.cancel()
        run._c.wait(-1.0)
        raise
    finally:
        if bar is not None:
            bar.close()
        run.close()
    return _finish(problem, info, options)


class _Bar:
    def __init__(self, tqdm, total):
        self.bar = tqdm(total=total or None, unit="it", desc="persolve", leave=False)
        self.n = 0

    def update_from(self, p):
        if p.iteration > self.n:
            self.bar.update(p.iteration - self.n)
            self.n = p.iteration
        if p.evaluations > 0:
            self.bar.set_postfix(f=f"{p.f:.4e}", gnorm=f"{p.gnorm:.2e}", refresh=False)

    def close(self):
        self.bar.close()


def _progress_bar(options):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    total = options.get("max_iterations", _persolve.options_default()["max_iterations"])
    return _Bar(tqdm, total)



# ---- batches ----------------------------------------------------------------

def _batch_bar(total):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="problem", desc="persolve batch", leave=False)


class BatchState(enum.IntEnum):
    """What a batch is doing (``ps_batch_state``)."""

    IDLE = 0
    RUNNING = 1
    YIELDED = 2
    FINISHED = 3


@dataclasses.dataclass
class BatchProgress:
    """Aggregate progress of a batch (``ps_batch_report``): counts of its
    problems, the fewest completed iterations of an unfinished one
    (``slowest_iteration``), the iterations summed over all, the seconds
    since the start (yielded time excluded), the state, the teams (GPU)
    or workers (CPU) once started, and on the GPU the blocks per team, the
    host time setting the problems up, the batch kernel's time, the teams'
    barrier and the threads per block."""

    problems: int
    queued: int
    running: int
    paused: int
    finished: int
    failed: int
    slowest_iteration: int
    iterations: int
    seconds: float
    state: BatchState
    teams: int
    team_blocks: int = 0
    setup_seconds: float = 0.0
    kernel_seconds: float = 0.0
    team_barrier: int = 0
    block: int = 0


def _progress_of(s):
    return Progress(s["iteration"], s["f"], s["gnorm"], s["step"], s["evaluations"],
                    s["seconds"], RunState(s["state"]), _as_status(s["status"]), s["round"],
                    s["idle"], s["phase"], s["heartbeat"], s["sequence"])


class Batch(_Handle):
    """Many problems solved together (``ps_batch_*``): on the GPU in one
    persistent launch whose teams of blocks take the problems from a queue,
    on the CPU by worker threads (``threads`` of them) of one thread each.

    ``Batch(**options)`` makes an empty batch (the options, as for
    :func:`design`, apply to every problem; ``batch_team_blocks`` forces the
    GPU team size). :meth:`add` a problem (a :class:`Problem`, preset spec
    or file, and an optional start point) before or after :meth:`start`;
    watch it with :meth:`progress` (aggregate) and :meth:`snapshot` (one
    problem); steer one problem or all (``i=None``) with :meth:`pause`,
    :meth:`resume`, :meth:`cancel`; :meth:`yield_gpu` frees the device with
    every state kept; :meth:`wait` releases the GIL; :meth:`result` gives
    problem i's :class:`Result`, the same as :func:`design` returns (bit
    for bit the same as a solo design with ``threads=1`` on the CPU).
    :meth:`checkpoint` saves a batch that is not running (yield it first)
    and :meth:`restore` continues it over the same problems. The batch
    keeps its problems alive. Use it as a context manager, or :meth:`close`
    it (a running batch is cancelled).
    """

    def __init__(self, **options):
        self._init(options)
        self._c = _persolve.Batch.create(options)

    def _init(self, options):
        self.options = dict(options)
        self.problems = []
        self._results = {}
        self._c = None

    def add(self, problem, x0=None):
        """Add a problem (queued at once if the batch runs); returns its
        index. A problem the batch cannot run is still added and its error
        is raised by :meth:`result`."""
        problem = _problem(problem)
        x0 = None if x0 is None else problem._x(x0, "x0")
        index, _ = self._c.add(problem._c, x0)
        self.problems.append(problem)
        return int(index)

    def start(self):
        """Start solving (a restored batch continues)."""
        self._c.start()

    def progress(self):
        """The aggregate progress (:class:`BatchProgress`), without blocking."""
        d = self._c.progress()
        return BatchProgress(d["problems"], d["queued"], d["running"], d["paused"],
                             d["finished"], d["failed"], d["slowest_iteration"],
                             d["iterations"], d["seconds"], BatchState(d["state"]), d["teams"],
                             d["team_blocks"], d["setup_seconds"], d["kernel_seconds"],
                             d["team_barrier"], d["block"])

    @property
    def state(self):
        return self.progress().state

    def snapshot(self, i):
        """Problem i's progress (:class:`Progress`: RUNNING while queued or
        on a team, PAUSED once parked, FINISHED with its status)."""
        return _progress_of(self._c.snapshot(int(i)))

    def pause(self, i=None):
        """Pause problem i (None: every unfinished one): it parks at its next
        control point and its team takes the next problem."""
        self._c.pause(None if i is None else int(i))

    def resume(self, i=None):
        """Resume problem i (None: every paused one, and a yielded batch)."""
        self._c.resume(None if i is None else int(i))

    def cancel(self, i=None):
        """Cancel problem i (None: every unfinished one): it ends with
        CANCELLED and its best point."""
        self._c.cancel(None if i is None else int(i))

    def yield_gpu(self):
        """Yield the batch: the kernel (the CPU workers) exits with every
        state kept; ``resume()`` continues it. Returns once yielded."""
        self._c.yield_()

    def wait(self, timeout=None, *, progress=False):
        """Wait until every problem has finished, at most ``timeout`` seconds
        (None: no limit; paused problems and a yielded batch never finish by
        themselves). Returns True when all have finished. The GIL is
        released; Ctrl-C interrupts the wait (not the batch). With
        ``progress=True`` a tqdm bar counts the problems finished (when
        tqdm is installed)."""
        bar = _batch_bar(len(self)) if progress else None
        end = None if timeout is None else time.monotonic() + float(timeout)
        try:
            while True:
                step = 0.1 if end is None else max(0.0, min(0.1, end - time.monotonic()))
                done = self._c.wait(step)
                if bar is not None:
                    p = self.progress()
                    bar.update(p.finished - bar.n)
                    bar.set_postfix(running=p.running, paused=p.paused, queued=p.queued,
                                    slowest=p.slowest_iteration, refresh=False)
                if done or (end is not None and time.monotonic() >= end):
                    return bool(done)
        finally:
            if bar is not None:
                bar.close()

    def result(self, i):
        """Problem i's :class:`Result` (the final magnetization simulated with
        the batch's options, as :func:`design` does), or None while it has
        not finished; raises :class:`persolve.Error` when it ended in an
        error that leaves no point."""
        i = int(i)
        if i in self._results:
            return self._results[i]
        info = self._c.result(i)
        if info is None:
            return None
        res = _finish(self.problems[i], info, self.options)
        self._results[i] = res
        return res

    def shape(self, i):
        """The options that force a solo :func:`design` to problem i's shape
        (``ps_batch_shape``): ``threads`` (1) and the GPU launch shape
        (``gpu_grid`` = its team's blocks, ``gpu_block``, ...; automatic on
        the CPU). With them and the batch's other options, design() gives
        the problem's result bit for bit. On the GPU, StateError before
        the problem is set up there (before :meth:`start`)."""
        return dict(self._c.shape(int(i)))

    def results(self):
        """Every problem's :meth:`result`, in order."""
        return [self.result(i) for i in range(len(self))]

    def checkpoint(self, path=None):
        """The batch's state as bytes (it must not be running: yield it
        first, or let it finish), also written to ``path`` when given
        (replaced atomically)."""
        blob = self._c.checkpoint()
        if path is not None:
            _write_atomic(os.fspath(path), blob)
        return blob

    @classmethod
    def restore(cls, source, problems, **options):
        """A batch from a checkpoint (bytes, or a file name) over the same
        problems in the same order; :meth:`start` continues it (paused
        problems stay paused). The limits may change, the algorithmic
        settings may not."""
        problems = [_problem(p) for p in problems]
        blob = _read_blob(source)
        b = cls.__new__(cls)
        b._init(options)
        b._c = _persolve.Batch.restore(blob, [p._c for p in problems], options)
        b.problems = problems
        return b

    def __len__(self):
        return int(self._c.size())

    def __repr__(self):
        try:
            p = self.progress()
            return (f"Batch({p.problems} problems: {p.finished} finished, {p.running} running, "
                    f"{p.paused} paused, {p.queued} queued; {p.state.name})")
        except Exception:
            return "Batch(closed)"
