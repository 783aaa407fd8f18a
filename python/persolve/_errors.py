"""The library's statuses (``ps_status``) and the exceptions that carry them."""

import enum


class Status(enum.IntEnum):
    """How a solve ended (0 and small positives) or which error it met
    (negatives): the values of ``ps_status`` in ``persolve.h``."""

    CONVERGED = 0
    CONVERGED_FTOL = 1
    MAX_ITERATIONS = 2
    MAX_EVALUATIONS = 3
    TIME_LIMIT = 4
    CANCELLED = 5
    YIELDED = 6
    RUNNING = 7
    CONSTRAINT_VIOLATED = 8

    ERR_NULL = -1
    ERR_SIZE = -2
    ERR_NONFINITE = -3
    ERR_DT = -4
    ERR_NEGATIVE = -5
    ERR_RELAXATION = -6
    ERR_LOSS = -7
    ERR_B1MAX = -8
    ERR_OPTION = -9
    ERR_LINE_SEARCH = -10
    ERR_OBJECTIVE = -11
    ERR_NO_MEMORY = -12
    ERR_NO_GPU = -13
    ERR_GPU_UNSUPPORTED = -14
    ERR_GPU_MEMORY = -15
    ERR_GPU_LAUNCH = -16
    ERR_NOT_IMPLEMENTED = -17
    ERR_PRESET = -18
    ERR_FILE = -19
    ERR_STATE = -20
    ERR_CHECKPOINT = -21
    ERR_CHANNELS = -22
    ERR_SAR = -23
    ERR_GRADIENT = -24
    ERR_RF_MASK = -25
    ERR_SCALE = -26

    @property
    def message(self):
        """The library's text for this status (``ps_strerror``)."""
        from . import _persolve

        return _persolve.strerror(int(self))

    @property
    def converged(self):
        return self in (Status.CONVERGED, Status.CONVERGED_FTOL)


class Error(Exception):
    """An error status of the library.

    Attributes: ``status`` (a :class:`Status`), ``message`` (the library's
    text for it, ``ps_strerror``) and ``detail`` (what the library said
    about this case: the field and element of a bad problem, the file and
    dataset, the option; may be empty).
    """

    def __init__(self, status, detail=""):
        self.status = _status(status)
        self.message = self.status.message if isinstance(self.status, Status) else "unknown status"
        self.detail = detail or ""
        text = f"{self.message} ({_name(self.status)})"
        if self.detail:
            text += f": {self.detail}"
        super().__init__(text)


class InputError(Error, ValueError):
    """A bad argument: a problem, an array, an option, a preset (statuses
    ERR_NULL .. ERR_OPTION, ERR_PRESET, ERR_CHANNELS .. ERR_SCALE)."""


class FileError(Error, OSError):
    """A file missing, unreadable, malformed or not writable (ERR_FILE)."""


class SolverError(Error, RuntimeError):
    """The solve failed (ERR_LINE_SEARCH, ERR_OBJECTIVE, ERR_NO_MEMORY)."""


class BackendError(Error, RuntimeError):
    """The backend asked for is not available (ERR_NO_GPU .. ERR_NOT_IMPLEMENTED)."""


class StateError(Error, RuntimeError):
    """A run was asked for something its state does not allow (ERR_STATE)."""


class CheckpointError(Error, ValueError):
    """A checkpoint corrupted, truncated or of another problem (ERR_CHECKPOINT)."""


def _status(status):
    try:
        return Status(status)
    except ValueError:
        return int(status)


def _name(status):
    return f"{status.name}, {int(status)}" if isinstance(status, Status) else str(status)


def _class_of(status):
    s = int(status)
    if s == Status.ERR_FILE:
        return FileError
    if s == Status.ERR_STATE:
        return StateError
    if s == Status.ERR_CHECKPOINT:
        return CheckpointError
    if s in (Status.ERR_LINE_SEARCH, Status.ERR_OBJECTIVE, Status.ERR_NO_MEMORY):
        return SolverError
    if Status.ERR_NOT_IMPLEMENTED <= s <= Status.ERR_NO_GPU:
        return BackendError
    if s < 0:
        return InputError
    return Error


def _from_status(status, detail=""):
    """The exception for a status (the extension raises what this returns)."""
    return _class_of(status)(status, detail)
