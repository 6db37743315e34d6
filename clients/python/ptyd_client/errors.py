"""The client's exceptions: one class per ``error.data.kind`` the daemon reports, and one for a daemon that is down.

Every JSON-RPC error becomes a :class:`PtydError` subclass chosen by ``error.data.kind`` (the stable switch; codes
are for humans and other clients), carrying the wire ``code``, ``message`` and ``data``. A daemon that cannot be
reached is a :class:`DaemonUnavailable`, which is a :class:`ConnectionError` and names the socket path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar


class PtydError(Exception):
    """An error the daemon answered with. ``kind`` is ``data["kind"]``; unknown kinds arrive as this base class."""

    CODE: ClassVar[int] = -32000
    KIND: ClassVar[str] = "error"

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data: dict[str, Any] = data if data is not None else {}

    @property
    def kind(self) -> str:
        return str(self.data.get("kind", self.KIND))

    def __str__(self) -> str:
        return f"{self.message} ({self.kind})"


class Unauthorized(PtydError):
    """The token is missing, unknown or revoked (released, idle too long, or the daemon was stopped)."""

    CODE, KIND = -32001, "unauthorized"


class SessionNotFound(PtydError):
    """Unknown, closed, or another agent's session id: the daemon answers the three identically."""

    CODE, KIND = -32002, "session_not_found"

    @property
    def session_id(self) -> str | None:
        value = self.data.get("session_id")
        return value if isinstance(value, str) else None


class SessionBusy(PtydError):
    """A send is already active on the session; ``operation_id`` names it (collect it with ``wait``)."""

    CODE, KIND = -32003, "session_busy"

    @property
    def operation_id(self) -> str | None:
        value = self.data.get("operation_id")
        return value if isinstance(value, str) else None


class SessionExited(PtydError):
    """The session's program has exited: it can be read and closed, not written."""

    CODE, KIND = -32004, "session_exited"


class BackendNotFound(PtydError):
    """No backend serves the requested session ``type``."""

    CODE, KIND = -32005, "backend_not_found"


class SpawnFailed(PtydError):
    """The program could not be started; ``data["reason"]`` holds the OS reason (``ENOENT``...)."""

    CODE, KIND = -32006, "spawn_failed"


class LimitExceeded(PtydError):
    """A configured limit would be exceeded; ``data["limit"]`` names it."""

    CODE, KIND = -32007, "limit_exceeded"


class SandboxRefused(PtydError):
    """The sandbox profile asked for is unknown or looser than the agent's own; ``data["profile"]`` names it,
    ``data["looser"]`` lists how it is looser."""

    CODE, KIND = -32018, "sandbox_refused"


class SandboxUnavailable(PtydError):
    """The session's sandbox profile cannot be set up on the daemon's system; ``data["reason"]`` says why."""

    CODE, KIND = -32019, "sandbox_unavailable"


class OperationLost(PtydError):
    """The send was in flight when a previous daemon crashed and its result did not survive; it is not typed again.
    ``data["request_key"]`` or ``data["operation_id"]`` names it (daemon protocol 5)."""

    CODE, KIND = -32030, "operation_lost"


class ExtraMissing(PtydError):
    """The daemon was installed without the optional part the call needs; ``data["extra"]`` names the extra
    (``pip install 'ptyd[EXTRA]'``) (daemon protocol 6)."""

    CODE, KIND = -32031, "extra_missing"


class WorkspaceRefused(PtydError):
    """A sandboxed session may not work in the cwd asked for (the home, ptyd's own directories, another agent's
    workspace); ``data["path"]`` names it, ``data["reason"]`` the rule."""

    CODE, KIND = -32027, "workspace_refused"


class InvalidParams(PtydError):
    """A parameter has the wrong type, bounds or value; ``data["detail"]`` or ``data["field"]`` names it."""

    CODE, KIND = -32602, "invalid_params"


class MethodNotFound(PtydError):
    """The daemon has no such method (an older daemon than this client, or a typo in :meth:`Client.call`)."""

    CODE, KIND = -32601, "method_not_found"


class InvalidRequest(PtydError):
    """The daemon could not read the request as JSON-RPC (also ``frame_too_large`` and batch errors)."""

    CODE, KIND = -32600, "invalid_request"


class ParseError(PtydError):
    """The daemon could not parse the request line as JSON."""

    CODE, KIND = -32700, "parse_error"


class InternalError(PtydError):
    """A daemon bug; ``incident`` matches a line in the daemon's log."""

    CODE, KIND = -32603, "internal"

    @property
    def incident(self) -> str | None:
        value = self.data.get("incident")
        return value if isinstance(value, str) else None


ERROR_CLASSES: tuple[type[PtydError], ...] = (
    Unauthorized,
    SessionNotFound,
    SessionBusy,
    SessionExited,
    BackendNotFound,
    SpawnFailed,
    LimitExceeded,
    SandboxRefused,
    SandboxUnavailable,
    OperationLost,
    WorkspaceRefused,
    ExtraMissing,
    InvalidParams,
    MethodNotFound,
    InvalidRequest,
    ParseError,
    InternalError,
)

_BY_KIND: dict[str, type[PtydError]] = {cls.KIND: cls for cls in ERROR_CLASSES}
# The framing errors share one class: a caller handles them the same way.
_BY_KIND.update(empty_batch=InvalidRequest, batch_too_large=InvalidRequest, frame_too_large=InvalidRequest)
_BY_CODE: dict[int, type[PtydError]] = {cls.CODE: cls for cls in ERROR_CLASSES}


def error_from_wire(error: object) -> PtydError:
    """The exception for a JSON-RPC ``error`` member: by ``data.kind``, else by ``code``, else the base class."""
    if not isinstance(error, dict):
        return PtydError(-32603, f"malformed error from the daemon: {error!r}")
    code = error.get("code")
    code = code if isinstance(code, int) else -32603
    message = str(error.get("message", ""))
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    kind = data.get("kind")
    cls = _BY_KIND.get(kind) if isinstance(kind, str) else None
    return (cls or _BY_CODE.get(code, PtydError))(code, message, data)


class DaemonUnavailable(ConnectionError):
    """The daemon cannot be reached at ``socket_path`` (a path, or an ``ssh://`` host): not running, a stale
    socket, no permission, or ssh failed."""

    def __init__(self, socket_path: Path | str, reason: str) -> None:
        super().__init__(f"ptyd is not available at {socket_path}: {reason}")
        self.socket_path = socket_path
        self.reason = reason


class ConnectionLost(DaemonUnavailable):
    """The connection dropped during a call whose outcome is unknown and which is unsafe to repeat.

    Raised for ``agent_register``, ``agent_release``, ``terminal_open``, ``terminal_output``,
    ``terminal_cancel``, ``terminal_integrate``, ``terminal_signal``, ``terminal_subscribe`` and
    ``terminal_unsubscribe``; every other call (``ptyd_client.core.RETRY_SAFE``) is retried once on a new
    connection.
    """
