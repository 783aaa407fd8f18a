"""persolve: MRI RF pulse design by L-BFGS over a Bloch simulation.

A compiled extension (nanobind) over the C library, which runs the whole
optimization in one persistent GPU kernel or on the CPU backend::

    import persolve
    res = persolve.design("slice1d", backend="cpu")
    print(res.summary())
    persolve.plot.result(res).savefig("slice1d.png")

Problems from arrays, presets or files (:class:`Problem`); :func:`design`,
:func:`evaluate`, :func:`simulate`; asynchronous runs (:class:`Run`);
result files (:meth:`Result.save`, :func:`load_result`); Pulseq export
(:func:`export_pulseq`); plots (:mod:`persolve.plot`). Errors raise
:class:`Error` subclasses carrying the library's :class:`Status`.

Batches of problems solved together, on the GPU in one launch
(:class:`Batch`).
"""

from . import _persolve
from ._errors import (BackendError, CheckpointError, Error, FileError, InputError,
                      SolverError, StateError, Status)
from .core import (Batch, BatchProgress, BatchState, Evaluation, History, Problem, Progress,
                   Result, Run, RunState, design,
                   evaluate, export_pulseq, load_result, options_default, presets,
                   pulseq_resample, simulate)

__version__ = _persolve.version()


def have_cuda():
    """True when the library was built with the CUDA backend."""
    return _persolve.have_cuda()


def have_openmp():
    """True when the CPU backend was built with OpenMP threads."""
    return _persolve.have_openmp()


def gpus():
    """Descriptions of the usable GPUs (empty without CUDA or a GPU)."""
    return [_persolve.gpu_describe(i) for i in range(_persolve.gpu_count())]


def __getattr__(name):
    # persolve.plot is imported on first use (it needs matplotlib)
    if name == "plot":
        import importlib

        return importlib.import_module(".plot", __name__)
    raise AttributeError(f"module 'persolve' has no attribute {name!r}")


__all__ = [
    "Problem", "Result", "History", "Evaluation", "Progress", "Run", "RunState", "Batch",
    "BatchProgress", "BatchState", "Status",
    "Error", "InputError", "FileError", "SolverError", "BackendError", "StateError",
    "CheckpointError", "design", "evaluate", "simulate", "load_result", "export_pulseq",
    "pulseq_resample", "presets", "options_default", "have_cuda", "have_openmp", "gpus", "plot",
]
