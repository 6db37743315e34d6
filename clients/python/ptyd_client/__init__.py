"""Python client for ptyd, the per-user daemon that owns persistent PTY sessions for AI agents.

``Client`` blocks, ``AsyncClient`` is its asyncio twin; both speak ptyd's JSON-RPC over its Unix socket with
nothing beyond the standard library. Result types (``ptyd_client.types``) are generated from the daemon's wire
types; errors are typed per ``error.data.kind`` (``ptyd_client.errors``).
"""

from ptyd_client.aio import AsyncClient, AsyncSession
from ptyd_client.client import Client, Session
from ptyd_client.core import default_socket_path, operator_token_path, read_operator_token
from ptyd_client.errors import (
    BackendNotFound,
    ConnectionLost,
    DaemonUnavailable,
    ExtraMissing,
    InternalError,
    InvalidParams,
    InvalidRequest,
    LimitExceeded,
    MethodNotFound,
    OperationLost,
    ParseError,
    PtydError,
    SandboxRefused,
    SandboxUnavailable,
    SessionBusy,
    SessionExited,
    SessionNotFound,
    SpawnFailed,
    Unauthorized,
    WorkspaceRefused,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncSession",
    "BackendNotFound",
    "Client",
    "ConnectionLost",
    "DaemonUnavailable",
    "ExtraMissing",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "LimitExceeded",
    "MethodNotFound",
    "OperationLost",
    "ParseError",
    "PtydError",
    "SandboxRefused",
    "SandboxUnavailable",
    "Session",
    "SessionBusy",
    "SessionExited",
    "SessionNotFound",
    "SpawnFailed",
    "Unauthorized",
    "WorkspaceRefused",
    "default_socket_path",
    "operator_token_path",
    "read_operator_token",
]
