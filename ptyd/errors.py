"""Every error the daemon reports: one base class carrying the wire code and a stable ``kind``, one subclass per
condition, JSON-RPC 2.0's own errors (parse, request, method, params, internal) included.

The wire form is ``{"code": CODE, "message": ..., "data": {"kind": KIND, ...}}``; clients switch on ``kind``.
``ERROR_CLASSES`` is the one table: dispatch, the server's framing, docs/protocol.md, OpenRPC and both clients'
generated error maps read it.
"""

from __future__ import annotations

from typing import ClassVar


class PtydError(Exception):
    """Base of every error the daemon reports to a caller on purpose."""

    code: ClassVar[int] = -32000
    kind: ClassVar[str] = "error"
    title: ClassVar[str] = "Error"  # the message when none is given (JSON-RPC's own errors use the spec's)

    def __init__(self, message: str | None = None, **data: object) -> None:
        message = self.title if message is None else message
        super().__init__(message)
        self.message = message
        self.data: dict[str, object] = {"kind": self.kind, **data}

    @classmethod
    def standard(cls) -> bool:
        """One of JSON-RPC 2.0's own errors (-32768 to -32100), not one of this application's."""
        return cls.code < -32099


class Unauthorized(PtydError):
    """The token is missing, unknown or revoked."""

    code = -32001
    kind = "unauthorized"


class SessionNotFound(PtydError):
    """Unknown, closed-and-forgotten, or another agent's session id: the three answers are identical."""

    code = -32002
    kind = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__("session not found", session_id=session_id)


class SessionBusy(PtydError):
    """A send is already active on this session."""

    code = -32003
    kind = "session_busy"


class SessionExited(PtydError):
    """The session's top-level program has exited; it can be read and closed, not written."""

    code = -32004
    kind = "session_exited"


class BackendNotFound(PtydError):
    """No backend is registered for the requested session type."""

    code = -32005
    kind = "backend_not_found"


class SpawnFailed(PtydError):
    """The program could not be started; ``data.reason`` holds the OS reason."""

    code = -32006
    kind = "spawn_failed"


class LimitExceeded(PtydError):
    """A configured limit (sessions, agents, sizes) would be exceeded; ``data.limit`` names it."""

    code = -32007
    kind = "limit_exceeded"


class SandboxRefused(PtydError):
    """terminal_open asked for a sandbox profile that is unknown or looser than the agent's own; ``data.profile``
    names it, ``data.agent_profile`` the agent's, ``data.looser`` the properties in which it is looser."""

    code = -32018
    kind = "sandbox_refused"


class SandboxUnavailable(PtydError):
    """The session's profile needs a sandbox (or a resource limit) this system cannot set up; nothing was
    started. ``data.reason`` says what is missing."""

    code = -32019
    kind = "sandbox_unavailable"


class WorkspaceRefused(PtydError):
    """A sandboxed session may not work in this directory (the home directory or one holding it, ptyd's own
    directories, another agent's workspace, a dot-directory of the home); ``data.path`` names it, ``data.reason``
    says which rule; nothing was started."""

    code = -32027
    kind = "workspace_refused"


class ParseError(PtydError):
    """The line is not JSON."""

    code = -32700
    kind = "parse_error"
    title = "Parse error"


class InvalidRequest(PtydError):
    """Not a JSON-RPC request."""

    code = -32600
    kind = "invalid_request"
    title = "Invalid request"


class EmptyBatch(InvalidRequest):
    """An empty batch array."""

    kind = "empty_batch"


class BatchTooLarge(InvalidRequest):
    """A batch over max_batch elements; ``data.limit`` is the bound."""

    kind = "batch_too_large"


class FrameTooLarge(InvalidRequest):
    """A frame over max_frame_bytes, skipped to its newline; the connection lives on."""

    kind = "frame_too_large"


class MethodNotFound(PtydError):
    """No such method; ``data.method`` names it."""

    code = -32601
    kind = "method_not_found"
    title = "Method not found"


class InvalidArgument(PtydError):
    """Wrong type, missing or unknown field, or values that make no sense together; ``data.detail`` or
    ``data.field`` names the field."""

    code = -32602
    kind = "invalid_params"
    title = "Invalid params"


class OperationLost(PtydError):
    """The send operation was in flight when a previous daemon crashed, and its result did not survive: whether its
    input ran is unknown (read the transcript). ``data.operation_id`` or ``data.request_key`` names it."""

    code = -32030
    kind = "operation_lost"


class ExtraMissing(PtydError):
    """The daemon was installed without the optional part this call needs; ``data.extra`` names the extra
    (``pip install 'ptyd[EXTRA]'``), ``data.module`` the missing module."""

    code = -32031
    kind = "extra_missing"


class InternalError(PtydError):
    """A daemon bug; ``data.incident`` matches a line in the daemon's log."""

    code = -32603
    kind = "internal"
    title = "Internal error"


ERROR_CLASSES: tuple[type[PtydError], ...] = (
    ParseError,
    InvalidRequest,
    EmptyBatch,
    BatchTooLarge,
    FrameTooLarge,
    MethodNotFound,
    InvalidArgument,
    InternalError,
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
)
"""Every error kind the daemon reports, JSON-RPC's own first."""

APPLICATION_ERRORS: tuple[type[PtydError], ...] = tuple(cls for cls in ERROR_CLASSES if not cls.standard())
"""This application's errors (-32000 to -32099): what OpenRPC lists per method."""
