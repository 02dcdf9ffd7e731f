"""The errors :class:`tidelake.Client` raises, one class per kind of refusal.

The server answers a refused request with a gRPC status (``src/server/status.rs`` maps its error
kinds to codes). Through ``pyarrow.flight`` that status arrives as a pyarrow exception
(``pyarrow.ArrowKeyError`` for NotFound, ``pyarrow.ArrowInvalid`` for InvalidArgument,
``pyarrow.flight.FlightUnauthenticatedError``, ...; AlreadyExists has no class of its own), and
through ADBC as an ``adbc_driver_manager.Error`` with a ``status_code``. :func:`map_error` turns
either into an exception that is *both*: an instance of the tidelake class for its code (say
:class:`NotFoundError`) and of the original exception's class, with the same attributes. So
``except tidelake.NotFoundError`` and ``except pyarrow.ArrowKeyError`` (or ``except
adbc_driver_manager.ProgrammingError``) both catch it.

``str(e)`` is the server's message (``table 'shop.orders' does not exist``); ``e.code`` is the gRPC
code name (``"NOT_FOUND"``) and ``e.original`` the exception as the transport raised it, with its
full text.

::

    Error
    ├── NotFoundError            NOT_FOUND
    ├── AlreadyExistsError       ALREADY_EXISTS
    ├── InvalidArgumentError     INVALID_ARGUMENT, FAILED_PRECONDITION
    │   └── OutOfRangeError      OUT_OF_RANGE (e.g. a snapshot that expiry removed)
    ├── ConflictError            ABORTED (a concurrent commit won; retrying may succeed)
    ├── UnauthenticatedError     UNAUTHENTICATED
    ├── PermissionDeniedError    PERMISSION_DENIED
    ├── UnsupportedError         UNIMPLEMENTED
    ├── ResourceExhaustedError   RESOURCE_EXHAUSTED
    ├── UnavailableError         UNAVAILABLE (server down or unreachable)
    ├── TimedOutError            DEADLINE_EXCEEDED
    ├── CancelledError           CANCELLED
    └── InternalError            INTERNAL, DATA_LOSS
"""
import re
from typing import Dict, Optional, Tuple, Type


class Error(Exception):
    """A request the server (or the connection to it) refused. ``str(e)`` is the server's message."""

    code = "UNKNOWN"

    def __init__(self, message: str = "", *args):
        super().__init__(message, *args)
        self.message = message
        self.original: Optional[BaseException] = None

    def __str__(self) -> str:
        message = self.__dict__.get("message")
        return message if message else super().__str__()


class NotFoundError(Error):
    code = "NOT_FOUND"


class AlreadyExistsError(Error):
    code = "ALREADY_EXISTS"


class InvalidArgumentError(Error):
    code = "INVALID_ARGUMENT"


class OutOfRangeError(InvalidArgumentError):
    code = "OUT_OF_RANGE"


class ConflictError(Error):
    code = "ABORTED"


class UnauthenticatedError(Error):
    code = "UNAUTHENTICATED"


class PermissionDeniedError(Error):
    code = "PERMISSION_DENIED"


class UnsupportedError(Error):
    code = "UNIMPLEMENTED"


class ResourceExhaustedError(Error):
    code = "RESOURCE_EXHAUSTED"


class UnavailableError(Error):
    code = "UNAVAILABLE"


class TimedOutError(Error):
    code = "DEADLINE_EXCEEDED"


class CancelledError(Error):
    code = "CANCELLED"


class InternalError(Error):
    code = "INTERNAL"


_BY_CODE: Dict[str, Type[Error]] = {
    "NOT_FOUND": NotFoundError,
    "ALREADY_EXISTS": AlreadyExistsError,
    "INVALID_ARGUMENT": InvalidArgumentError,
    "FAILED_PRECONDITION": InvalidArgumentError,
    "OUT_OF_RANGE": OutOfRangeError,
    "ABORTED": ConflictError,
    "UNAUTHENTICATED": UnauthenticatedError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "UNIMPLEMENTED": UnsupportedError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError,
    "UNAVAILABLE": UnavailableError,
    "DEADLINE_EXCEEDED": TimedOutError,
    "CANCELLED": CancelledError,
    "INTERNAL": InternalError,
    "DATA_LOSS": InternalError,
    "UNKNOWN": Error,
}

# pyarrow.flight words its errors "Flight returned <phrase> error, with message: <server message>"
# (followed, for most codes, by ". gRPC client debug context: <CODE>:...").
_FLIGHT_PHRASES = {
    "not found": "NOT_FOUND", "already exists": "ALREADY_EXISTS", "invalid argument": "INVALID_ARGUMENT",
    "failed precondition": "FAILED_PRECONDITION", "out of range": "OUT_OF_RANGE", "aborted": "ABORTED",
    "unauthenticated": "UNAUTHENTICATED", "unauthorized": "PERMISSION_DENIED",
    "permission denied": "PERMISSION_DENIED", "unimplemented": "UNIMPLEMENTED",
    "resource exhausted": "RESOURCE_EXHAUSTED", "unavailable": "UNAVAILABLE", "timeout": "DEADLINE_EXCEEDED",
    "timed out": "DEADLINE_EXCEEDED", "cancelled": "CANCELLED", "internal": "INTERNAL", "data loss": "DATA_LOSS",
}
# pyarrow words most codes "Flight returned <phrase> error", some (RESOURCE_EXHAUSTED, surfacing as
# ArrowInvalid) "gRPC returned <phrase> error".
_FLIGHT_RE = re.compile(r"(?:Flight|gRPC) returned ([a-z ]+?) error, with message: (.*)", re.S)
# CANCELLED has its own wording: "Flight cancelled call, with message: <server message>".
_FLIGHT_CANCELLED_RE = re.compile(r"Flight cancelled call, with message: (.*)", re.S)
_DEBUG_CONTEXT_RE = re.compile(r"\. gRPC client debug context: ([A-Z_]+):", re.S)
# ADBC: "NOT_FOUND: [FlightSQL] table 'db.t' does not exist (NotFound; Prepare)". The prefix is ADBC's own
# status (gRPC codes it has no status for, such as RESOURCE_EXHAUSTED, become INTERNAL); the suffix names the
# gRPC code, which wins.
# ADBC's own status names for the gRPC codes they stand for.
_ADBC_ALIASES = {
    "UNAUTHORIZED": "PERMISSION_DENIED", "NOT_IMPLEMENTED": "UNIMPLEMENTED", "TIMEOUT": "DEADLINE_EXCEEDED",
    "IO": "UNAVAILABLE", "INVALID_STATE": "INVALID_ARGUMENT", "INVALID_DATA": "INVALID_ARGUMENT",
}
_ADBC_RE = re.compile(r"^([A-Z_]+): (?:\[FlightSQL\] )?(.*)$", re.S)
_ADBC_SUFFIX_RE = re.compile(r" \(([A-Z][A-Za-z]+); [^\n]*\)$")


def _grpc_code_name(camel: str) -> str:
    """``ResourceExhausted`` -> ``RESOURCE_EXHAUSTED`` (gRPC-Go spells CANCELLED ``Canceled``)."""
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()
    return "CANCELLED" if name == "CANCELED" else name


# adbc_driver_manager.AdbcStatusCode values -> gRPC code names (when the message names none).
_ADBC_STATUS = {2: "UNIMPLEMENTED", 3: "NOT_FOUND", 4: "ALREADY_EXISTS", 5: "INVALID_ARGUMENT",
                6: "FAILED_PRECONDITION", 7: "INVALID_ARGUMENT", 9: "INTERNAL", 10: "UNAVAILABLE",
                11: "CANCELLED", 12: "DEADLINE_EXCEEDED", 13: "UNAUTHENTICATED", 14: "PERMISSION_DENIED"}


def classify(exc: BaseException) -> Optional[Tuple[str, str]]:
    """``(gRPC code name, server message)`` of a pyarrow.flight or ADBC error; ``None`` for others."""
    text = str(exc)
    status = getattr(exc, "status_code", None)
    if status is not None and type(exc).__module__.startswith("adbc_driver_manager"):
        suffix = _ADBC_SUFFIX_RE.search(text)
        grpc = _grpc_code_name(suffix.group(1)) if suffix else None
        m = _ADBC_RE.match(text[:suffix.start()] if suffix else text)
        prefix = _ADBC_ALIASES.get(m.group(1), m.group(1)) if m else None
        if m and prefix in _BY_CODE:
            return (grpc if grpc in _BY_CODE else prefix), m.group(2)
        return (grpc if grpc in _BY_CODE else _ADBC_STATUS.get(int(status), "UNKNOWN")), text
    m = _FLIGHT_RE.search(text)
    cancelled = None if m else _FLIGHT_CANCELLED_RE.search(text)
    if m or cancelled:
        if m:
            message, code = m.group(2), _FLIGHT_PHRASES.get(m.group(1), "UNKNOWN")
        else:
            message, code = cancelled.group(1), "CANCELLED"
        ctx = _DEBUG_CONTEXT_RE.search(message)
        if ctx:
            message = message[:ctx.start()]
            if ctx.group(1) in _BY_CODE:
                code = ctx.group(1)
        return code, message
    try:
        import pyarrow as pa
        import pyarrow.flight as flight
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    by_type = [
        (flight.FlightUnauthenticatedError, "UNAUTHENTICATED"), (flight.FlightUnauthorizedError, "PERMISSION_DENIED"),
        (flight.FlightUnavailableError, "UNAVAILABLE"), (flight.FlightTimedOutError, "DEADLINE_EXCEEDED"),
        (flight.FlightCancelledError, "CANCELLED"), (flight.FlightInternalError, "INTERNAL"),
        (pa.ArrowKeyError, "NOT_FOUND"), (pa.ArrowInvalid, "INVALID_ARGUMENT"),
        (pa.ArrowNotImplementedError, "UNIMPLEMENTED"), (flight.FlightError, "UNKNOWN"),
    ]
    for cls, code in by_type:
        if isinstance(exc, cls):
            return code, text
    return None


_MIXED: Dict[Tuple[type, type], type] = {}


def _mixed_class(kind: Type[Error], original: type) -> type:
    key = (kind, original)
    cls = _MIXED.get(key)
    if cls is None:
        cls = type(kind.__name__, (kind, original), {"__module__": kind.__module__})
        cls.__qualname__ = kind.__qualname__
        _MIXED[key] = cls
    return cls


def map_error(exc: BaseException) -> BaseException:
    """The tidelake counterpart of ``exc`` (see the module doc), or ``exc`` itself when it is not an
    error of the server or the connection (a ``TypeError`` from bad arguments stays what it is)."""
    if isinstance(exc, Error):
        return exc
    found = classify(exc)
    if found is None:
        return exc
    code, message = found
    kind = _BY_CODE.get(code, Error)
    try:
        cls = _mixed_class(kind, type(exc))
        new = cls.__new__(cls)
        new.__dict__.update(getattr(exc, "__dict__", {}))
        new.args = exc.args
    except TypeError:  # a base class whose layout does not mix; keep the tidelake class alone
        new = kind(message)
    new.message = message.strip()
    new.code = code
    new.original = exc
    new.__traceback__ = exc.__traceback__
    return new
