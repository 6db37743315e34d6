"""The blocking client: one connection, one call at a time (calls from several threads are serialized)."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Unpack, cast, overload

from ptyd_client import core, remote
from ptyd_client.core import OpenOptions, SendOptions
from ptyd_client.errors import ConnectionLost, Unauthorized
from ptyd_client.events import EventStream
from ptyd_client.types import (
    AgentRegisterResult,
    AgentReleaseResult,
    DaemonInfoResult,
    SendResult,
    SendStarted,
    SessionInfo,
    TerminalCancelResult,
    TerminalCloseResult,
    TerminalListResult,
    TerminalOpenResult,
    TerminalOutputResult,
    TerminalReadResult,
    TerminalRecordingsResult,
    TerminalRecordResult,
    TerminalScreenResult,
    TerminalSignalResult,
    TerminalUnsubscribeResult,
    TerminalWaitResult,
)


class _Dropped(Exception):
    """The connection ended; ``sent`` says whether the daemon may have received the request."""

    def __init__(self, sent: bool) -> None:
        self.sent = sent


class _Connection:
    def __init__(self, stream: remote.Stream) -> None:
        self.stream = stream
        self.sock = stream.sock
        self._lines = core.LineBuffer()
        self._frames: list[bytes] = []
        self._requests = core.Requests()

    def alive(self) -> bool:
        """False when the daemon closed the connection since the last call (a pending EOF)."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return True
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def call(self, method: str, params: dict[str, Any], timeout: float | None) -> core.Response:
        request_id, frame = self._requests.encode(method, params)
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError):
            # sendall failed, so the final newline was not sent: the daemon runs only complete lines.
            raise _Dropped(sent=False) from None
        while True:
            while self._frames:
                response = core.decode_response(self._frames.pop(0))
                if response is None:
                    continue
                # A response to an earlier call that timed out is stale; an error without an id (a frame the
                # daemon could not read) can only be about this call, the one in flight.
                if response.id == request_id or (response.id is None and response.error is not None):
                    return response
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                raise _Dropped(sent=True) from None
            if not data:
                raise _Dropped(sent=True)
            self._frames += self._lines.feed(data)

    def close(self) -> None:
        self.stream.close()


class Client:
    """A blocking ptyd client.

    ``socket_path`` defaults to where the daemon listens (``$PTYD_SOCKET``, ``$XDG_RUNTIME_DIR/ptyd/ptyd.sock``,
    ``/tmp/ptyd-$UID/ptyd.sock``); ``host`` (or ``$PTYD_HOST`` when neither is given), ``ssh://[user@]host[:port]``,
    reaches the ptyd of another machine through ssh (see :mod:`ptyd_client.remote`). ``token`` defaults to
    ``$PTYD_TOKEN``; :meth:`agent_register` mints and keeps one.
    ``timeout`` bounds the wait for each answer (None: as long as the daemon takes; its own waits are bounded
    by each call's ``timeout_ms``). The connection is made on first use and remade once, transparently, when
    the daemon dropped it.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        token: str | None = None,
        *,
        host: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = 5.0,
    ) -> None:
        self.target = remote.resolve_target(socket_path, host)
        # The local socket, or the ssh:// host, as errors name it.
        self.socket_path: Path | str = self.target if isinstance(self.target, Path) else str(self.target)
        self.token = core.resolve_token(token)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._connection: _Connection | None = None
        self._lock = threading.Lock()

    # --- connection ------------------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect now (otherwise the first call connects); raises :class:`DaemonUnavailable`."""
        with self._lock:
            self._connected()

    def close(self) -> None:
        """Close the connection. Sessions live on in the daemon; reconnect with the same token."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connected(self) -> _Connection:
        if self._connection is not None and not self._connection.alive():
            self._connection.close()
            self._connection = None
        if self._connection is None:
            self._connection = _Connection(remote.dial(self.target, self.connect_timeout))
        return self._connection

    def call(self, method: str, **params: Any) -> Any:
        """Call ``method`` with ``params`` as given and return its result; for methods newer than this client."""
        with self._lock:
            retried = False
            while True:
                connection = self._connected()
                try:
                    return connection.call(method, params, self.timeout).unwrap()
                except _Dropped as dropped:
                    failure = connection.stream.failure()  # ssh, or the remote dial-stdio, could not connect
                    connection.close()
                    self._connection = None
                    if failure is not None:
                        raise failure from None
                    if retried or (dropped.sent and method not in core.RETRY_SAFE):
                        reason = f"the connection dropped during {method}; its outcome is unknown"
                        raise ConnectionLost(self.socket_path, reason) from None
                    retried = True

    def _auth(self) -> str:
        if self.token is None:
            raise Unauthorized(-32001, "no token: pass token=, set $PTYD_TOKEN, or call agent_register()")
        return self.token

    def _session_call(self, method: str, session_id: str, **params: Any) -> Any:
        return self.call(method, **core.drop_none({"token": self._auth(), "session_id": session_id, **params}))

    # --- agents ----------------------------------------------------------------------------------------

    def agent_register(self, name: str | None = None) -> AgentRegisterResult:
        """Register an agent and keep its new token in :attr:`token` for the following calls."""
        result = cast(AgentRegisterResult, self.call("agent_register", **core.drop_none({"name": name})))
        self.token = result["token"]
        return result

    def agent_release(self) -> AgentReleaseResult:
        """Close every session of this agent (whole process trees, awaited) and revoke its token."""
        result = cast(AgentReleaseResult, self.call("agent_release", token=self._auth()))
        self.token = None
        return result

    # --- sessions --------------------------------------------------------------------------------------

    def terminal_open(self, **options: Unpack[OpenOptions]) -> TerminalOpenResult:
        """Start a program on a new pseudo-terminal (default: a shell) and return once it is ready for input."""
        return cast(TerminalOpenResult, self.call("terminal_open", token=self._auth(), **options))

    def open(self, **options: Unpack[OpenOptions]) -> Session:
        """:meth:`terminal_open`, returning a :class:`Session` handle (a context manager that closes it)."""
        opened = self.terminal_open(**options)
        return Session(self, opened["session_id"], opened)

    def session(self, session_id: str) -> Session:
        """A handle on an existing session."""
        return Session(self, session_id)

    @overload
    def terminal_send(
        self,
        session_id: str,
        input: str,
        *,
        wait: Literal[True] = True,
        request_key: str | None = None,
        **options: Unpack[SendOptions],
    ) -> SendResult: ...
    @overload
    def terminal_send(
        self,
        session_id: str,
        input: str,
        *,
        wait: Literal[False],
        request_key: str | None = None,
        **options: Unpack[SendOptions],
    ) -> SendStarted: ...
    def terminal_send(
        self,
        session_id: str,
        input: str,
        *,
        wait: bool = True,
        request_key: str | None = None,
        **options: Unpack[SendOptions],
    ) -> SendResult | SendStarted:
        """Write ``input`` verbatim (add ``"\\n"`` to submit a line) and wait until the program is ready for
        more: the result's ``wait_reason`` says why it returned, ``viewport`` what the terminal showed.

        With ``wait=False`` it returns at once with the ``operation_id``; collect it with
        :meth:`terminal_output` / :meth:`terminal_wait`. A ``request_key`` is generated when not given, so a
        send retried after a dropped connection returns the original operation instead of writing twice.
        """
        params = core.send_params(self._auth(), session_id, input, wait, request_key, options)
        return cast(SendResult | SendStarted, self.call("terminal_send", **params))

    def terminal_output(self, session_id: str) -> TerminalOutputResult:
        """Consume the output of the current background send produced since the previous call."""
        return cast(TerminalOutputResult, self._session_call("terminal_output", session_id))

    def terminal_wait(self, session_id: str, timeout_ms: int | None = None) -> TerminalWaitResult:
        """Wait for the active send to settle (``done=False`` after ``timeout_ms``); or the last settled one."""
        return cast(TerminalWaitResult, self._session_call("terminal_wait", session_id, timeout_ms=timeout_ms))

    def terminal_cancel(self, session_id: str) -> TerminalCancelResult:
        """Interrupt the active send: SIGINT to its foreground process group, typeahead dropped."""
        return cast(TerminalCancelResult, self._session_call("terminal_cancel", session_id))

    def terminal_integrate(self, session_id: str, timeout_ms: int | None = None) -> SendResult:
        """Install shell integration into the bash now at the prompt (e.g. after ``ssh``): exit codes, cwd and
        prompt-based readiness through the relay. Settles like a send."""
        return cast(SendResult, self._session_call("terminal_integrate", session_id, timeout_ms=timeout_ms))

    def terminal_subscribe(self, session_id: str | None = None, output: bool = False) -> EventStream:
        """Subscribe to events of one session, or of all this agent's sessions (``None``), on a connection of
        their own: iterate the returned stream; closing it ends the subscription. ``output=True`` adds output
        events (completed lines as they appear)."""
        return EventStream(self.target, self._auth(), session_id, output)

    def terminal_unsubscribe(self, subscription_id: str) -> TerminalUnsubscribeResult:
        """End a subscription (closing its stream does the same)."""
        return cast(
            TerminalUnsubscribeResult,
            self.call("terminal_unsubscribe", token=self._auth(), subscription_id=subscription_id),
        )

    def terminal_read(
        self,
        session_id: str,
        start_line: int | None = None,
        max_lines: int | None = None,
        max_bytes: int | None = None,
    ) -> TerminalReadResult:
        """Page the transcript (scrollback then screen) from ``start_line``; negative counts from the end."""
        return cast(
            TerminalReadResult,
            self._session_call(
                "terminal_read", session_id, start_line=start_line, max_lines=max_lines, max_bytes=max_bytes
            ),
        )

    def terminal_signal(self, session_id: str, signal: str | int) -> TerminalSignalResult:
        """Signal the terminal's foreground process group (``"SIGINT"``, ``"TERM"``, ``signal.SIGQUIT``...)."""
        return cast(
            TerminalSignalResult, self._session_call("terminal_signal", session_id, signal=core.signal_param(signal))
        )

    def terminal_resize(self, session_id: str, cols: int, rows: int) -> SessionInfo:
        """Change the terminal size (the foreground program gets SIGWINCH)."""
        return cast(SessionInfo, self._session_call("terminal_resize", session_id, cols=cols, rows=rows))

    def terminal_screen(self, session_id: str) -> TerminalScreenResult:
        """The visible screen now (a full-screen program's too), read without writing to the session."""
        return cast(TerminalScreenResult, self._session_call("terminal_screen", session_id))

    def terminal_status(self, session_id: str) -> SessionInfo:
        """Describe one session: status, size, foreground process, whether a send is active."""
        return cast(SessionInfo, self._session_call("terminal_status", session_id))

    def terminal_record(self, session_id: str, record: bool = True) -> TerminalRecordResult:
        """Start (or with ``record=False`` stop) recording a live session in asciicast v2."""
        return cast(TerminalRecordResult, self._session_call("terminal_record", session_id, record=record))

    def terminal_recordings(self, session_id: str | None = None) -> TerminalRecordingsResult:
        """The recordings on disk (parts of this agent's sessions; every session's with the operator token), or
        only ``session_id``'s parts."""
        found = cast(TerminalRecordingsResult, self.call("terminal_recordings", token=self._auth()))
        if session_id is not None:
            found["recordings"] = [r for r in found["recordings"] if r["session_id"] == session_id]
        return found

    def terminal_list(self) -> TerminalListResult:
        """This agent's sessions (every agent's, with the operator token)."""
        return cast(TerminalListResult, self.call("terminal_list", token=self._auth()))

    def terminal_close(self, session_id: str, reason: str | None = None) -> TerminalCloseResult:
        """End the session's whole process tree and forget it; closing it again returns ``closed=False``."""
        return cast(TerminalCloseResult, self._session_call("terminal_close", session_id, reason=reason))

    def daemon_info(self) -> DaemonInfoResult:
        """The daemon's version, pid, uptime and totals (no token needed)."""
        return cast(DaemonInfoResult, self.call("daemon_info"))

    def discover(self) -> dict[str, Any]:
        """The daemon's OpenRPC document (``rpc.discover``)."""
        return cast(dict[str, Any], self.call("rpc.discover"))


class Session:
    """A handle on one session of a :class:`Client`. As a context manager it closes the session on exit."""

    def __init__(self, client: Client, session_id: str, opened: TerminalOpenResult | None = None) -> None:
        self.client = client
        self.id = session_id
        self.opened = opened  # the terminal_open result, when this handle opened the session

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()
        else:
            # Do not hide the exception in flight behind a failed close (the daemon may be what failed).
            with contextlib.suppress(Exception):
                self.close()

    @overload
    def send(self, input: str, *, wait: Literal[True] = True, **options: Unpack[SendOptions]) -> SendResult: ...
    @overload
    def send(self, input: str, *, wait: Literal[False], **options: Unpack[SendOptions]) -> str: ...
    def send(self, input: str, *, wait: bool = True, **options: Unpack[SendOptions]) -> SendResult | str:
        """:meth:`Client.terminal_send`; with ``wait=False`` it returns the operation id (see :meth:`wait`)."""
        if wait:
            return self.client.terminal_send(self.id, input, **options)
        return self.client.terminal_send(self.id, input, wait=False, **options)["operation_id"]

    def output(self) -> TerminalOutputResult:
        """Output of the background send since the previous call (``done`` and ``result`` once it settled)."""
        return self.client.terminal_output(self.id)

    def wait(self, timeout_ms: int | None = None) -> TerminalWaitResult:
        """Wait for the background send to settle."""
        return self.client.terminal_wait(self.id, timeout_ms)

    def cancel(self) -> TerminalCancelResult:
        """Interrupt the active send (SIGINT to its foreground group)."""
        return self.client.terminal_cancel(self.id)

    def read(
        self, start_line: int | None = None, max_lines: int | None = None, max_bytes: int | None = None
    ) -> TerminalReadResult:
        """Page the transcript; ``read(-50)`` is the last 50 lines."""
        return self.client.terminal_read(self.id, start_line, max_lines, max_bytes)

    def signal(self, signal: str | int) -> TerminalSignalResult:
        """Signal the foreground process group."""
        return self.client.terminal_signal(self.id, signal)

    def resize(self, cols: int, rows: int) -> SessionInfo:
        """Change the terminal size."""
        return self.client.terminal_resize(self.id, cols, rows)

    def screen(self) -> TerminalScreenResult:
        """The visible screen now (a full-screen program's too), read without writing to the session."""
        return self.client.terminal_screen(self.id)

    def status(self) -> SessionInfo:
        """Describe the session."""
        return self.client.terminal_status(self.id)

    def close(self, reason: str | None = None) -> TerminalCloseResult:
        """Close the session (idempotent)."""
        return self.client.terminal_close(self.id, reason)
