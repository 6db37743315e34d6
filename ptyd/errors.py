"""Application errors: one base class carrying the wire code and a stable ``kind``, one subclass per condition.

The wire form is ``{"code": CODE, "message": ..., "data": {"kind": KIND, ...}}``; clients switch on ``kind``.
"""

from __future__ import annotations

from typing import ClassVar


class PtydError(Exception):
    """Base of every error the daemon reports to a caller on purpose."""

    code: ClassVar[int] = -32000
    kind: ClassVar[str] = "error"

    def __init__(self, message: str, **data: object) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, object] = {"kind": self.kind, **data}


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


class InvalidArgument(PtydError):
    """Parameters that are well-typed but make no sense together (an unknown signal name, say)."""

    code = -32602
    kind = "invalid_params"


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
)
