"""The asyncio client: concurrent calls multiplexed on one connection, responses matched by request id.

A long ``terminal_send`` and any number of reads can be in flight together; the daemon runs requests on one
connection concurrently and answers each with its id.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Unpack, cast, overload

from ptyd_client import core, remote
from ptyd_client.core import OpenOptions, SendOptions
from ptyd_client.errors import ConnectionLost, DaemonUnavailable, Unauthorized
from ptyd_client.events import AsyncEventStream
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
    def __init__(self, sent: bool) -> None:
        self.sent = sent


class _Connection:
    """One socket, a reader task that routes each response to the future of its request."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: remote.Stream | None = None
    ) -> None:
        self.stream = stream  # the ssh link, when the daemon is on another machine
        self._reader = reader
        self._writer = writer
        self._requests = core.Requests()
        self._pending: dict[int, asyncio.Future[core.Response]] = {}
        self.closed = False
        self._task = asyncio.get_running_loop().create_task(self._read_responses(), name="ptyd-client reader")

    @classmethod
    async def open(cls, target: Path | remote.SshHost, connect_timeout: float | None) -> _Connection:
        if isinstance(target, remote.SshHost):
            stream = remote.dial(target, connect_timeout)
            stream.sock.setblocking(False)
            reader, writer = await asyncio.open_unix_connection(sock=stream.sock)
            return cls(reader, writer, stream)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, str(target)), connect_timeout)
        except OSError as exc:
            sock.close()
            raise core.connect_failure(target, exc) from None
        except BaseException:
            sock.close()
            raise
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        return cls(reader, writer)

    async def failure(self) -> DaemonUnavailable | None:
        """Why the ssh link ended, when ssh or the remote ``ptyd dial-stdio`` failed."""
        return None if self.stream is None else await asyncio.to_thread(self.stream.failure)

    async def _read_responses(self) -> None:
        lines = core.LineBuffer()
        try:
            while data := await self._reader.read(1 << 20):
                for line in lines.feed(data):
                    self._route(core.decode_response(line))
        except (ConnectionError, OSError):
            pass
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(_Dropped(sent=True))

    def _route(self, response: core.Response | None) -> None:
        if response is None:
            return
        future = self._pending.get(response.id) if isinstance(response.id, int) else None
        if future is None and response.id is None and response.error is not None and len(self._pending) == 1:
            # An error without an id (a frame the daemon could not read) belongs to the one request in flight.
            future = next(iter(self._pending.values()))
        if future is not None and not future.done():
            future.set_result(response)

    async def call(self, method: str, params: dict[str, Any]) -> core.Response:
        if self.closed:
            raise _Dropped(sent=False)
        request_id, frame = self._requests.encode(method, params)
        future: asyncio.Future[core.Response] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            try:
                self._writer.write(frame)
                await self._writer.drain()
            except (ConnectionError, OSError):
                raise _Dropped(sent=False) from None
            return await future
        finally:
            # Also on cancellation: a late response finds no future and is dropped.
            del self._pending[request_id]

    async def close(self) -> None:
        self.closed = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()
        if self.stream is not None:
            await asyncio.to_thread(self.stream.close)  # reaps ssh


class AsyncClient:
    """The asyncio twin of :class:`~ptyd_client.Client` (same methods, awaited); use ``async with``.

    Calls may run concurrently (``asyncio.gather``, tasks): they share one connection.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        token: str | None = None,
        *,
        host: str | None = None,
        connect_timeout: float = 5.0,
    ) -> None:
        self.target = remote.resolve_target(socket_path, host)
        # The local socket, or the ssh:// host, as errors name it.
        self.socket_path: Path | str = self.target if isinstance(self.target, Path) else str(self.target)
        self.token = core.resolve_token(token)
        self.connect_timeout = connect_timeout
        self._connection: _Connection | None = None
        self._connecting = asyncio.Lock()

    async def connect(self) -> None:
        """Connect now (otherwise the first call connects); raises :class:`DaemonUnavailable`."""
        await self._connected()

    async def close(self) -> None:
        """Close the connection; calls in flight raise :class:`ConnectionLost`. Sessions live on."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _connected(self) -> _Connection:
        async with self._connecting:  # concurrent calls that find the connection gone reconnect once
            if self._connection is not None and self._connection.closed:
                await self._connection.close()
                self._connection = None
            if self._connection is None:
                self._connection = await _Connection.open(self.target, self.connect_timeout)
            return self._connection

    async def call(self, method: str, **params: Any) -> Any:
        """Call ``method`` with ``params`` as given and return its result."""
        retried = False
        while True:
            connection = await self._connected()
            try:
                response = await connection.call(method, params)
            except _Dropped as dropped:
                # The reader may not have seen the end yet (a loop that was blocked): never reuse this one.
                connection.closed = True
                failure = await connection.failure()
                if failure is not None:
                    raise failure from None
                if retried or (dropped.sent and method not in core.RETRY_SAFE):
                    reason = f"the connection dropped during {method}; its outcome is unknown"
                    raise ConnectionLost(self.socket_path, reason) from None
                retried = True
                continue
            return response.unwrap()

    def _auth(self) -> str:
        if self.token is None:
            raise Unauthorized(-32001, "no token: pass token=, set $PTYD_TOKEN, or call agent_register()")
        return self.token

    async def _session_call(self, method: str, session_id: str, **params: Any) -> Any:
        return await self.call(method, **core.drop_none({"token": self._auth(), "session_id": session_id, **params}))

    # --- agents ----------------------------------------------------------------------------------------

    async def agent_register(self, name: str | None = None) -> AgentRegisterResult:
        """Register an agent and keep its new token in :attr:`token`."""
        result = cast(AgentRegisterResult, await self.call("agent_register", **core.drop_none({"name": name})))
        self.token = result["token"]
        return result

    async def agent_release(self) -> AgentReleaseResult:
        """Close every session of this agent and revoke its token."""
        result = cast(AgentReleaseResult, await self.call("agent_release", token=self._auth()))
        self.token = None
        return result

    # --- sessions --------------------------------------------------------------------------------------

    async def terminal_open(self, **options: Unpack[OpenOptions]) -> TerminalOpenResult:
        """Start a program on a new pseudo-terminal and return once it is ready for input."""
        return cast(TerminalOpenResult, await self.call("terminal_open", token=self._auth(), **options))

    async def open(self, **options: Unpack[OpenOptions]) -> AsyncSession:
        """:meth:`terminal_open`, returning an :class:`AsyncSession` (``async with`` closes it)."""
        opened = await self.terminal_open(**options)
        return AsyncSession(self, opened["session_id"], opened)

    def session(self, session_id: str) -> AsyncSession:
        """A handle on an existing session."""
        return AsyncSession(self, session_id)

    @overload
    async def terminal_send(
        self,
        session_id: str,
        input: str,
        *,
        wait: Literal[True] = True,
        request_key: str | None = None,
        **options: Unpack[SendOptions],
    ) -> SendResult: ...
    @overload
    async def terminal_send(
        self,
        session_id: str,
        input: str,
        *,
        wait: Literal[False],
        request_key: str | None = None,
        **options: Unpack[SendOptions],
    ) -> SendStarted: ...
    async def terminal_send(
        self,
        session_id: str,
        input: str,
        *,
        wait: bool = True,
        request_key: str | None = None,
        **options: Unpack[SendOptions],
    ) -> SendResult | SendStarted:
        """Write ``input`` verbatim and wait until the program is ready for more (see ``Client.terminal_send``)."""
        params = core.send_params(self._auth(), session_id, input, wait, request_key, options)
        return cast(SendResult | SendStarted, await self.call("terminal_send", **params))

    async def terminal_output(self, session_id: str) -> TerminalOutputResult:
        """Consume the output of the current background send produced since the previous call."""
        return cast(TerminalOutputResult, await self._session_call("terminal_output", session_id))

    async def terminal_wait(self, session_id: str, timeout_ms: int | None = None) -> TerminalWaitResult:
        """Wait for the active send to settle (``done=False`` after ``timeout_ms``)."""
        return cast(TerminalWaitResult, await self._session_call("terminal_wait", session_id, timeout_ms=timeout_ms))

    async def terminal_cancel(self, session_id: str) -> TerminalCancelResult:
        """Interrupt the active send: SIGINT to its foreground process group."""
        return cast(TerminalCancelResult, await self._session_call("terminal_cancel", session_id))

    async def terminal_integrate(self, session_id: str, timeout_ms: int | None = None) -> SendResult:
        """Install shell integration into the bash now at the prompt (e.g. after ``ssh``): exit codes, cwd and
        prompt-based readiness through the relay. Settles like a send."""
        return cast(SendResult, await self._session_call("terminal_integrate", session_id, timeout_ms=timeout_ms))

    async def terminal_subscribe(
        self, session_id: str | None = None, output: bool = False, screen: bool = False
    ) -> AsyncEventStream:
        """Subscribe to events of one session, or of all this agent's sessions (``None``), on a connection of
        their own: iterate the returned stream; closing it ends the subscription. ``output=True`` adds output
        events (completed lines as they appear), ``screen=True`` screen events (the screen changed)."""
        return await AsyncEventStream.open(self.target, self._auth(), session_id, output, screen)

    async def terminal_unsubscribe(self, subscription_id: str) -> TerminalUnsubscribeResult:
        """End a subscription (closing its stream does the same)."""
        return cast(
            TerminalUnsubscribeResult,
            await self.call("terminal_unsubscribe", token=self._auth(), subscription_id=subscription_id),
        )

    async def terminal_read(
        self,
        session_id: str,
        start_line: int | None = None,
        max_lines: int | None = None,
        max_bytes: int | None = None,
    ) -> TerminalReadResult:
        """Page the transcript (scrollback then screen) from ``start_line``; negative counts from the end."""
        return cast(
            TerminalReadResult,
            await self._session_call(
                "terminal_read", session_id, start_line=start_line, max_lines=max_lines, max_bytes=max_bytes
            ),
        )

    async def terminal_signal(self, session_id: str, signal: str | int) -> TerminalSignalResult:
        """Signal the terminal's foreground process group."""
        params = {"signal": core.signal_param(signal)}
        return cast(TerminalSignalResult, await self._session_call("terminal_signal", session_id, **params))

    async def terminal_resize(self, session_id: str, cols: int, rows: int) -> SessionInfo:
        """Change the terminal size (the foreground program gets SIGWINCH)."""
        return cast(SessionInfo, await self._session_call("terminal_resize", session_id, cols=cols, rows=rows))

    async def terminal_screen(self, session_id: str) -> TerminalScreenResult:
        """The visible screen now (a full-screen program's too), read without writing to the session."""
        return cast(TerminalScreenResult, await self._session_call("terminal_screen", session_id))

    async def terminal_status(self, session_id: str) -> SessionInfo:
        """Describe one session."""
        return cast(SessionInfo, await self._session_call("terminal_status", session_id))

    async def terminal_record(self, session_id: str, record: bool = True) -> TerminalRecordResult:
        """Start (or with ``record=False`` stop) recording a live session in asciicast v2."""
        return cast(TerminalRecordResult, await self._session_call("terminal_record", session_id, record=record))

    async def terminal_recordings(self, session_id: str | None = None) -> TerminalRecordingsResult:
        """The recordings on disk (parts of this agent's sessions; every session's with the operator token), or
        only ``session_id``'s parts."""
        found = cast(TerminalRecordingsResult, await self.call("terminal_recordings", token=self._auth()))
        if session_id is not None:
            found["recordings"] = [r for r in found["recordings"] if r["session_id"] == session_id]
        return found

    async def terminal_list(self) -> TerminalListResult:
        """This agent's sessions (every agent's, with the operator token)."""
        return cast(TerminalListResult, await self.call("terminal_list", token=self._auth()))

    async def terminal_close(self, session_id: str, reason: str | None = None) -> TerminalCloseResult:
        """End the session's whole process tree and forget it (idempotent)."""
        return cast(TerminalCloseResult, await self._session_call("terminal_close", session_id, reason=reason))

    async def daemon_info(self) -> DaemonInfoResult:
        """The daemon's version, pid, uptime and totals."""
        return cast(DaemonInfoResult, await self.call("daemon_info"))

    async def discover(self) -> dict[str, Any]:
        """The daemon's OpenRPC document (``rpc.discover``)."""
        return cast(dict[str, Any], await self.call("rpc.discover"))


class AsyncSession:
    """A handle on one session of an :class:`AsyncClient`; ``async with`` closes the session on exit."""

    def __init__(self, client: AsyncClient, session_id: str, opened: TerminalOpenResult | None = None) -> None:
        self.client = client
        self.id = session_id
        self.opened = opened

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            await self.close()
        else:
            with contextlib.suppress(Exception):
                await self.close()

    @overload
    async def send(self, input: str, *, wait: Literal[True] = True, **options: Unpack[SendOptions]) -> SendResult: ...
    @overload
    async def send(self, input: str, *, wait: Literal[False], **options: Unpack[SendOptions]) -> str: ...
    async def send(self, input: str, *, wait: bool = True, **options: Unpack[SendOptions]) -> SendResult | str:
        """Send ``input``; with ``wait=False`` return the operation id (collect it with :meth:`wait`)."""
        if wait:
            return await self.client.terminal_send(self.id, input, **options)
        return (await self.client.terminal_send(self.id, input, wait=False, **options))["operation_id"]

    async def output(self) -> TerminalOutputResult:
        """Output of the background send since the previous call."""
        return await self.client.terminal_output(self.id)

    async def wait(self, timeout_ms: int | None = None) -> TerminalWaitResult:
        """Wait for the background send to settle."""
        return await self.client.terminal_wait(self.id, timeout_ms)

    async def cancel(self) -> TerminalCancelResult:
        """Interrupt the active send."""
        return await self.client.terminal_cancel(self.id)

    async def read(
        self, start_line: int | None = None, max_lines: int | None = None, max_bytes: int | None = None
    ) -> TerminalReadResult:
        """Page the transcript."""
        return await self.client.terminal_read(self.id, start_line, max_lines, max_bytes)

    async def signal(self, signal: str | int) -> TerminalSignalResult:
        """Signal the foreground process group."""
        return await self.client.terminal_signal(self.id, signal)

    async def resize(self, cols: int, rows: int) -> SessionInfo:
        """Change the terminal size."""
        return await self.client.terminal_resize(self.id, cols, rows)

    async def screen(self) -> TerminalScreenResult:
        """The visible screen now (a full-screen program's too), read without writing to the session."""
        return await self.client.terminal_screen(self.id)

    async def status(self) -> SessionInfo:
        """Describe the session."""
        return await self.client.terminal_status(self.id)

    async def close(self, reason: str | None = None) -> TerminalCloseResult:
        """Close the session (idempotent)."""
        return await self.client.terminal_close(self.id, reason)
