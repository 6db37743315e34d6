"""The protocol core both clients share: where the daemon is, framing, request ids, responses, and retry policy.

No I/O happens here, so :class:`~ptyd_client.Client` and :class:`~ptyd_client.AsyncClient` differ only in how
they move bytes.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Literal, TypedDict

from ptyd_client import types as wire
from ptyd_client.errors import DaemonUnavailable, PtydError, error_from_wire

OPERATOR_TOKEN_FILE = "operator.token"  # noqa: S105 - a file name, not a secret

# Calls that are safe to send again when the connection dropped before their answer arrived: the daemon's table
# (OpenRPC ``x-retry-safe``, generated into types.py), plus terminal_send, because this client gives every send a
# request_key and the daemon answers a repeated key with the original operation instead of writing again.
# Not terminal_output: it consumes, so a lost answer lost its chunk, and the caller hears of it (ConnectionLost)
# rather than silently getting the next one.
RETRY_SAFE = wire.RETRY_SAFE | {"terminal_send"}


def default_socket_path() -> Path:
    """The socket the daemon listens on by default: ``$PTYD_SOCKET``, ``$XDG_RUNTIME_DIR/ptyd/ptyd.sock``, or
    ``/tmp/ptyd-$UID/ptyd.sock`` (the same rule as ``ptyd`` itself)."""
    if os.environ.get("PTYD_SOCKET"):
        return Path(os.environ["PTYD_SOCKET"])
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "ptyd" / "ptyd.sock"
    return Path(f"/tmp/ptyd-{os.getuid()}") / "ptyd.sock"


def resolve_token(explicit: str | None) -> str | None:
    """The token argument, else ``$PTYD_TOKEN``, else None (call ``agent_register`` to mint one)."""
    return explicit if explicit is not None else (os.environ.get("PTYD_TOKEN") or None)


def operator_token_path(socket_path: Path) -> Path:
    """Where the daemon writes its operator token (0600): beside its socket."""
    return socket_path.parent / OPERATOR_TOKEN_FILE


def read_operator_token(socket_path: Path) -> str:
    """The operator token of the daemon serving ``socket_path``; it sees and acts on every agent's sessions.

    Raises :class:`DaemonUnavailable` when the file is missing (the daemon writes it at start and removes it when
    it stops) or unreadable.
    """
    path = operator_token_path(socket_path)
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        reason = "no operator token beside the socket" if socket_path.exists() else "no socket (is ptyd running?)"
        raise DaemonUnavailable(socket_path, reason) from None
    except OSError as exc:
        raise DaemonUnavailable(socket_path, f"cannot read {path}: {exc.strerror}") from None
    if not token:
        raise DaemonUnavailable(socket_path, f"{path} is empty")
    return token


def connect_failure(socket_path: Path, exc: OSError) -> DaemonUnavailable:
    """A friendly :class:`DaemonUnavailable` for a failed ``connect()``."""
    if isinstance(exc, FileNotFoundError):
        reason = "no socket (is ptyd running? start it with `ptyd`, or `make run` in its checkout)"
    elif isinstance(exc, ConnectionRefusedError):
        try:
            is_socket = stat.S_ISSOCK(socket_path.stat().st_mode)
        except OSError:
            is_socket = True
        reason = (
            "the socket refuses connections (a stale socket: ptyd is not running)"
            if is_socket
            else "the path is not a socket (remove it, or point $PTYD_SOCKET elsewhere)"
        )
    elif isinstance(exc, PermissionError):
        reason = "permission denied (the socket belongs to another user)"
    elif isinstance(exc, TimeoutError):
        reason = "timed out connecting"
    else:
        reason = exc.strerror or str(exc)
    return DaemonUnavailable(socket_path, reason)


def new_request_key() -> str:
    """A client-generated idempotency key for one send."""
    return "py-" + secrets.token_hex(12)


def drop_none(params: dict[str, Any]) -> dict[str, Any]:
    """Omitted optional parameters are left out of the request, so the daemon's defaults apply."""
    return {k: v for k, v in params.items() if v is not None}


class Requests:
    """Encodes requests with connection-unique integer ids."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def encode(self, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        request_id = next(self._ids)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return request_id, json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class LineBuffer:
    """Splits a byte stream into newline-terminated frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        if b"\n" not in data:
            return []
        *lines, rest = self._buffer.split(b"\n")
        self._buffer = bytearray(rest)
        return [bytes(line) for line in lines if line.strip()]


class Response:
    """One decoded response frame: ``id`` and either ``result`` or an ``error`` exception."""

    __slots__ = ("error", "id", "result")

    def __init__(self, response_id: object, result: Any, error: PtydError | None) -> None:
        self.id = response_id
        self.result = result
        self.error = error

    def unwrap(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


def decode_response(line: bytes) -> Response | None:
    """A response frame, or None for anything that is not a response to a request of ours (ignored)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or ("result" not in message and "error" not in message):
        return None
    if "error" in message:
        return Response(message.get("id"), None, error_from_wire(message["error"]))
    return Response(message.get("id"), message["result"], None)


class OpenOptions(TypedDict, total=False):
    """Parameters of ``terminal_open`` besides the token (see the protocol docs for each)."""

    type: str
    name: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    profile: Literal["agent"]
    sandbox: str
    env_profile: Literal["agent", "human"]
    cols: int
    rows: int
    timeout_ms: int
    idle_ms: int
    record: bool


class SendOptions(TypedDict, total=False):
    """Bounds of one ``terminal_send``: ``timeout_ms`` (default 30000), ``idle_ms`` (3000), ``max_bytes``; and
    ``keys`` pressed after the input, by name (``["Down", "Enter"]``, ``["C-c"]``), encoded as the program's
    terminal modes want them (daemon protocol 3). Named waits (protocol 4): ``until`` (a regular expression the
    output since the send must show: wait_reason ``matched``), ``until_stable_ms`` (the screen unchanged that
    long: ``stable``); ``compact`` (output economy) and ``join_wrapped`` (logical lines) for the viewport.
    ``until_done`` (protocol 5): wait for the command's end however quiet it is, bounded by ``timeout_ms``."""

    timeout_ms: int
    idle_ms: int
    max_bytes: int
    keys: list[str]
    until: str
    until_stable_ms: int
    compact: bool
    join_wrapped: bool
    until_done: bool


def send_params(
    token: str, session_id: str, text: str, wait: bool, request_key: str | None, options: SendOptions
) -> dict[str, Any]:
    return {
        "token": token,
        "session_id": session_id,
        "input": text,
        "wait": wait,
        "request_key": request_key or new_request_key(),
        **options,
    }


def signal_param(signal: str | int) -> str | int:
    # signal.Signals is an IntEnum: send its number, not its repr.
    return signal if isinstance(signal, str) else int(signal)
