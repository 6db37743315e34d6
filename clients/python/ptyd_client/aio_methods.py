"""The RPC methods of :class:`~ptyd_client.AsyncClient` and its session handle, written once.

The blocking twins (:class:`~ptyd_client.Client`'s methods, :class:`~ptyd_client.Session`) in ``methods.py`` are
generated from this file by ``make docs`` (``python -m ptyd.rpc.codegen_sync``: ``async``/``await`` taken out,
``Async`` names replaced), so the two clients have the same methods, signatures and docstrings; a test fails
when ``methods.py`` is stale. Each client supplies ``call`` (its transport) and ``token``/``target``.
"""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Unpack, cast, overload

from ptyd_client import core, remote
from ptyd_client.core import OpenOptions, SendOptions
from ptyd_client.errors import Unauthorized
from ptyd_client.events import AsyncEventStream
from ptyd_client.types import (
    AgentListResult,
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
    TerminalScreenshotResult,
    TerminalSignalResult,
    TerminalUnsubscribeResult,
    TerminalWaitResult,
)


class AsyncMethods:
    """Every RPC of the daemon as a typed method, over the client's ``call``."""

    token: str | None
    target: Path | remote.SshHost

    async def call(self, method: str, **params: Any) -> Any:
        """Call ``method`` with ``params`` as given and return its result; for methods newer than this client."""
        raise NotImplementedError

    def _auth(self) -> str:
        if self.token is None:
            raise Unauthorized(Unauthorized.CODE, "no token: pass token=, set $PTYD_TOKEN, or call agent_register()")
        return self.token

    async def _session_call(self, method: str, session_id: str, **params: Any) -> Any:
        return await self.call(method, **core.drop_none({"token": self._auth(), "session_id": session_id, **params}))

    # --- agents ----------------------------------------------------------------------------------------

    async def agent_register(self, name: str | None = None, key: str | None = None) -> AgentRegisterResult:
        """Register an agent and keep its new token in :attr:`token` for the following calls; ``key``: the
        registration key the operator issued for ``name`` (``ptyd agent-key NAME``), which proves it."""
        params = core.drop_none({"name": name, "key": key})
        result = cast(AgentRegisterResult, await self.call("agent_register", **params))
        self.token = result["token"]
        return result

    async def agent_release(self, agent_id: str | None = None) -> AgentReleaseResult:
        """Close every session of this agent (whole process trees, awaited) and revoke its token; with the
        operator token, of the agent ``agent_id`` names (see :meth:`agent_list`)."""
        params = core.drop_none({"token": self._auth(), "agent_id": agent_id})
        result = cast(AgentReleaseResult, await self.call("agent_release", **params))
        if agent_id is None:
            self.token = None
        return result

    async def agent_list(self) -> AgentListResult:
        """The registered agents: every one with the operator token, else this agent alone."""
        return cast(AgentListResult, await self.call("agent_list", token=self._auth()))

    # --- sessions --------------------------------------------------------------------------------------

    async def terminal_open(self, **options: Unpack[OpenOptions]) -> TerminalOpenResult:
        """Start a program on a new pseudo-terminal (default: a shell) and return once it is ready for input."""
        return cast(TerminalOpenResult, await self.call("terminal_open", token=self._auth(), **options))

    async def open(self, **options: Unpack[OpenOptions]) -> AsyncSession:
        """:meth:`terminal_open`, returning the session's handle: an :class:`AsyncSession` (``async with``
        closes it)."""
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
        """Write ``input`` verbatim (add ``"\\n"`` to submit a line) and wait until the program is ready for
        more: the result's ``wait_reason`` says why it returned, ``viewport`` what the terminal showed.

        With ``wait=False`` it returns at once with the ``operation_id``; collect it with
        :meth:`terminal_output` / :meth:`terminal_wait`. A ``request_key`` is generated when not given, so a
        send retried after a dropped connection returns the original operation instead of writing twice.
        """
        params = core.send_params(self._auth(), session_id, input, wait, request_key, options)
        return cast(SendResult | SendStarted, await self.call("terminal_send", **params))

    async def terminal_output(self, session_id: str) -> TerminalOutputResult:
        """Consume the output of the current background send produced since the previous call."""
        return cast(TerminalOutputResult, await self._session_call("terminal_output", session_id))

    async def terminal_wait(
        self, session_id: str, timeout_ms: int | None = None, *, operation_id: str | None = None
    ) -> TerminalWaitResult:
        """Wait for the active send to settle (``done=False`` after ``timeout_ms``), or the last settled one; after a
        ``timeout`` or ``inferred_idle`` already returned, for the command it left running (daemon protocol 5).
        ``operation_id``: that operation's result (``OperationLost`` if a daemon crash took it)."""
        return cast(
            TerminalWaitResult,
            await self._session_call("terminal_wait", session_id, timeout_ms=timeout_ms, operation_id=operation_id),
        )

    async def terminal_cancel(self, session_id: str) -> TerminalCancelResult:
        """Interrupt the active send: SIGINT to its foreground process group, typeahead dropped."""
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
        *,
        join_wrapped: bool = False,
    ) -> TerminalReadResult:
        """Page the transcript (scrollback then screen) from ``start_line``; negative counts from the end.
        ``join_wrapped``: rows the terminal soft-wrapped come back joined, as logical lines (protocol 4)."""
        return cast(
            TerminalReadResult,
            await self._session_call(
                "terminal_read",
                session_id,
                start_line=start_line,
                max_lines=max_lines,
                max_bytes=max_bytes,
                join_wrapped=join_wrapped or None,  # left out unless asked: a protocol 3 daemon refuses it
            ),
        )

    async def terminal_signal(self, session_id: str, signal: str | int) -> TerminalSignalResult:
        """Signal the terminal's foreground process group (``"SIGINT"``, ``"TERM"``, ``signal.SIGQUIT``...)."""
        return cast(
            TerminalSignalResult,
            await self._session_call("terminal_signal", session_id, signal=core.signal_param(signal)),
        )

    async def terminal_resize(self, session_id: str, cols: int, rows: int) -> SessionInfo:
        """Change the terminal size (the foreground program gets SIGWINCH)."""
        return cast(SessionInfo, await self._session_call("terminal_resize", session_id, cols=cols, rows=rows))

    async def terminal_screen(self, session_id: str) -> TerminalScreenResult:
        """The visible screen now (a full-screen program's too), read without writing to the session."""
        return cast(TerminalScreenResult, await self._session_call("terminal_screen", session_id))

    async def terminal_screenshot(self, session_id: str, font_size: int | None = None) -> TerminalScreenshotResult:
        """The visible screen as a PNG (base64 in ``png``) with its colours, attributes and cursor (daemon protocol
        6; ``ExtraMissing`` when the daemon lacks its extra ``screenshot``)."""
        return cast(
            TerminalScreenshotResult,
            await self._session_call("terminal_screenshot", session_id, font_size=font_size),
        )

    async def terminal_status(self, session_id: str) -> SessionInfo:
        """Describe one session: status, size, foreground process, whether a send is active."""
        return cast(SessionInfo, await self._session_call("terminal_status", session_id))

    async def terminal_list(self) -> TerminalListResult:
        """This agent's sessions (every agent's, with the operator token)."""
        return cast(TerminalListResult, await self.call("terminal_list", token=self._auth()))

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

    async def terminal_close(self, session_id: str, reason: str | None = None) -> TerminalCloseResult:
        """End the session's whole process tree and forget it; closing it again returns ``closed=False``."""
        return cast(TerminalCloseResult, await self._session_call("terminal_close", session_id, reason=reason))

    async def daemon_info(self) -> DaemonInfoResult:
        """The daemon's version, pid, uptime and totals (no token needed)."""
        return cast(DaemonInfoResult, await self.call("daemon_info"))

    async def discover(self) -> dict[str, Any]:
        """The daemon's OpenRPC document (``rpc.discover``)."""
        return cast(dict[str, Any], await self.call("rpc.discover"))


class AsyncSession:
    """A handle on one session of an :class:`AsyncClient`; ``async with`` closes the session on exit."""

    def __init__(self, client: AsyncMethods, session_id: str, opened: TerminalOpenResult | None = None) -> None:
        self.client = client
        self.id = session_id
        self.opened = opened  # the terminal_open result, when this handle opened the session

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
            # Do not hide the exception in flight behind a failed close (the daemon may be what failed).
            with contextlib.suppress(Exception):
                await self.close()

    @overload
    async def send(self, input: str, *, wait: Literal[True] = True, **options: Unpack[SendOptions]) -> SendResult: ...
    @overload
    async def send(self, input: str, *, wait: Literal[False], **options: Unpack[SendOptions]) -> str: ...
    async def send(self, input: str, *, wait: bool = True, **options: Unpack[SendOptions]) -> SendResult | str:
        """:meth:`AsyncClient.terminal_send`; with ``wait=False`` it returns the operation id (see :meth:`wait`)."""
        if wait:
            return await self.client.terminal_send(self.id, input, **options)
        return (await self.client.terminal_send(self.id, input, wait=False, **options))["operation_id"]

    async def output(self) -> TerminalOutputResult:
        """Output of the background send since the previous call (``done`` and ``result`` once it settled)."""
        return await self.client.terminal_output(self.id)

    async def wait(self, timeout_ms: int | None = None, *, operation_id: str | None = None) -> TerminalWaitResult:
        """Wait for the background send (``operation_id``: that one) to settle, or for what it left running."""
        return await self.client.terminal_wait(self.id, timeout_ms, operation_id=operation_id)

    async def cancel(self) -> TerminalCancelResult:
        """Interrupt the active send (SIGINT to its foreground group)."""
        return await self.client.terminal_cancel(self.id)

    async def read(
        self,
        start_line: int | None = None,
        max_lines: int | None = None,
        max_bytes: int | None = None,
        *,
        join_wrapped: bool = False,
    ) -> TerminalReadResult:
        """Page the transcript; ``read(-50)`` is the last 50 lines."""
        return await self.client.terminal_read(self.id, start_line, max_lines, max_bytes, join_wrapped=join_wrapped)

    async def signal(self, signal: str | int) -> TerminalSignalResult:
        """Signal the foreground process group."""
        return await self.client.terminal_signal(self.id, signal)

    async def resize(self, cols: int, rows: int) -> SessionInfo:
        """Change the terminal size."""
        return await self.client.terminal_resize(self.id, cols, rows)

    async def screen(self) -> TerminalScreenResult:
        """The visible screen now (a full-screen program's too), read without writing to the session."""
        return await self.client.terminal_screen(self.id)

    async def screenshot(self, font_size: int | None = None) -> bytes:
        """The visible screen as PNG bytes, with its colours, attributes and cursor (daemon protocol 6)."""
        result = await self.client.terminal_screenshot(self.id, font_size)
        return base64.b64decode(result["png"])

    async def status(self) -> SessionInfo:
        """Describe the session."""
        return await self.client.terminal_status(self.id)

    async def close(self, reason: str | None = None) -> TerminalCloseResult:
        """Close the session (idempotent)."""
        return await self.client.terminal_close(self.id, reason)
