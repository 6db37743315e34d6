"""The codex tool set: Codex's unified exec (``exec_command``, ``write_stdin``) served by ptyd sessions.

Each ``exec_command`` is one ptyd session of type ``exec`` running ``SHELL -lc CMD`` (``-c`` without ``login``), as
Codex runs it: the session's exit status is the command's, "Process exited with code N"; while it runs the model
holds a numeric session id and ``write_stdin`` types into the command itself. The waits are ptyd's sends, bounded
by ``yield_time_ms`` and returning early when the command ends or blocks reading the terminal (ptyd asks the
kernel), never on mere silence. The output is the session's transcript from a cursor kept per session here, so
each call returns what the command printed since the previous call, and the call after a command ended between
polls still returns its last output and its exit code. An ended command's session is closed once reported, as
Codex forgets it.
"""

from __future__ import annotations

import math
import secrets
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ptyd_client import SessionBusy, SessionExited, SessionNotFound
from ptyd_mcp.config import (
    CODEX_BYTES_PER_TOKEN,
    CODEX_EXEC_YIELD_MS,
    CODEX_MAX_OUTPUT_TOKENS,
    CODEX_MAX_POLL_YIELD_MS,
    CODEX_MAX_YIELD_MS,
    CODEX_MIN_YIELD_MS,
    CODEX_OUTPUT_MAX_BYTES,
    CODEX_POLL_YIELD_MS,
    CODEX_READ_PAGE_LINES,
    CODEX_SESSION_IDS,
    CODEX_SHELL,
    CODEX_WRITE_YIELD_MS,
)

Rpc = Callable[..., Awaitable[dict[str, Any]]]
NAME_PREFIX = "exec-"  # a command's session is named exec-N after its Codex session id N


class UnknownSession(LookupError):
    """write_stdin named a session id this server does not hold (never given, or its process was reported ended)."""


@dataclass
class _Process:
    session_id: str  # ptyd's
    line: int = 0  # the first transcript line not returned whole yet
    partial: str = ""  # the text of that line already returned (a prompt printed without a newline)
    lock: anyio.Lock | None = None


@dataclass(frozen=True)
class Chunk:
    """One call's answer, in Codex's words."""

    wall_time_s: float
    exit_code: int | None
    session_id: int | None
    output: str
    original_token_count: int
    chunk_id: str

    def text(self) -> str:
        lines = [f"Chunk ID: {self.chunk_id}", f"Wall time: {self.wall_time_s:.4f} seconds"]
        if self.exit_code is not None:
            lines.append(f"Process exited with code {self.exit_code}")
        if self.session_id is not None:
            lines.append(f"Process running with session ID {self.session_id}")
        lines += [f"Original token count: {self.original_token_count}", "Output:", self.output]
        return "\n".join(lines)

    def structured(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "wall_time_seconds": round(self.wall_time_s, 4),
            "exit_code": self.exit_code,
            "session_id": self.session_id,
            "original_token_count": self.original_token_count,
            "output": self.output,
        }


def clamp_yield(value: Any, default: int, most: int) -> int:
    ms = default if not isinstance(value, int | float) or isinstance(value, bool) else int(value)
    return max(CODEX_MIN_YIELD_MS, min(ms, most))


def _tokens(value: Any) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value)
    return CODEX_MAX_OUTPUT_TOKENS


def truncate(output: str, max_tokens: int) -> tuple[str, int]:
    """Codex's cut: over the budget, the head and the tail of equal size around a count of the tokens left out.
    Also the original token count (bytes / 4, rounded up)."""
    raw = output.encode()
    original = math.ceil(len(raw) / CODEX_BYTES_PER_TOKEN)
    budget = max_tokens * CODEX_BYTES_PER_TOKEN
    if len(raw) <= budget:
        return output, original
    half = budget // 2
    head = raw[:half].decode(errors="ignore")
    tail = raw[len(raw) - half :].decode(errors="ignore")
    removed = math.ceil((len(raw) - 2 * half) / CODEX_BYTES_PER_TOKEN)
    return f"{head}…{removed} tokens truncated…{tail}", original


def exit_code(status: dict[str, Any]) -> int:
    """A shell's numbering: the exit status, or 128 + the signal that killed the process."""
    if status.get("exit_code") is not None:
        return int(status["exit_code"])
    name = status.get("signal")
    try:
        return 128 + signal.Signals[str(name)].value
    except KeyError:
        return -1


class CodexExec:
    """exec_command and write_stdin over the daemon behind ``rpc`` (the agent's token added by it)."""

    def __init__(self, rpc: Rpc) -> None:
        self.rpc = rpc
        self._processes: dict[int, _Process] = {}
        self._found = False  # the sessions an earlier server of this agent left were looked up

    async def _find_earlier(self) -> None:
        """Adopt the commands an earlier ptyd-mcp of this agent started (sessions named exec-N outlive it): their
        ids stay valid, and their retained output is returned again from its start, as nothing says what that
        server returned."""
        if self._found:
            return
        for info in (await self.rpc("terminal_list"))["sessions"]:
            name = info.get("name") or ""
            if name.startswith(NAME_PREFIX) and name[len(NAME_PREFIX) :].isdigit():
                number = int(name[len(NAME_PREFIX) :])
                self._processes.setdefault(number, _Process(info["session_id"], lock=anyio.Lock()))
        self._found = True

    def _new_id(self) -> int:
        low, high = CODEX_SESSION_IDS
        while True:
            number = low + secrets.randbelow(high - low)
            if number not in self._processes:
                return number

    async def exec_command(self, args: dict[str, Any]) -> Chunk:
        begun = time.monotonic()
        cmd = args.get("cmd")
        if not isinstance(cmd, str):
            raise ValueError("cmd is required: the shell command to run, as a string")
        shell = args.get("shell") if isinstance(args.get("shell"), str) and args.get("shell") else CODEX_SHELL
        login = args.get("login") is not False
        wait_ms = clamp_yield(args.get("yield_time_ms"), CODEX_EXEC_YIELD_MS, CODEX_MAX_YIELD_MS)
        await self._find_earlier()
        number = self._new_id()
        options: dict[str, Any] = {"type": "exec", "argv": [shell, "-lc" if login else "-c", cmd]}
        if isinstance(args.get("workdir"), str) and args["workdir"]:
            options["cwd"] = args["workdir"]
        # idle_ms = the wait: silence alone never ends it (Codex waits for the end or the yield time).
        opened = await self.rpc(
            "terminal_open", **options, name=f"{NAME_PREFIX}{number}", timeout_ms=wait_ms, idle_ms=wait_ms
        )
        process = _Process(opened["session_id"], lock=anyio.Lock())
        self._processes[number] = process
        return await self._report(number, process, opened["status"], begun, _tokens(args.get("max_output_tokens")))

    async def write_stdin(self, args: dict[str, Any]) -> Chunk:
        begun = time.monotonic()
        number = args.get("session_id")
        if isinstance(number, float) and number.is_integer():  # a JSON number, as Codex's schema types it
            number = int(number)
        if not isinstance(number, int) or isinstance(number, bool):
            raise UnknownSession(number)
        await self._find_earlier()
        process = self._processes.get(number)
        if process is None or process.lock is None:
            raise UnknownSession(number)
        chars = args.get("chars")
        if not isinstance(chars, str):
            chars = ""
        if chars:
            wait_ms = clamp_yield(args.get("yield_time_ms"), CODEX_WRITE_YIELD_MS, CODEX_MAX_YIELD_MS)
        else:
            wait_ms = clamp_yield(args.get("yield_time_ms"), CODEX_POLL_YIELD_MS, CODEX_MAX_POLL_YIELD_MS)
        async with process.lock:
            try:
                status = await self._send(process, chars, wait_ms)
            except SessionExited:  # it ended between two calls: its output and status are still there
                status = (await self.rpc("terminal_status", session_id=process.session_id))["status"]
            except SessionNotFound:  # closed outside this server (ptyctl close, the agent released)
                self._processes.pop(number, None)
                raise UnknownSession(number) from None
            return await self._report(number, process, status, begun, _tokens(args.get("max_output_tokens")))

    async def _send(self, process: _Process, chars: str, wait_ms: int) -> dict[str, Any]:
        """Type ``chars`` and wait as Codex does; the session's status after."""
        params: dict[str, Any] = {
            "session_id": process.session_id,
            "input": chars,
            "timeout_ms": wait_ms,
            "idle_ms": wait_ms,
            "max_bytes": 256,  # the output comes from the transcript (_collect), not from the viewport
            "compact": False,
        }
        try:
            sent = await self.rpc("terminal_send", **params)
        except SessionBusy:
            # The wait of a call the host cancelled still runs in the daemon (it ends at its own yield time, and
            # the command runs on, as Codex's would): let it settle, then type.
            await self.rpc("terminal_wait", session_id=process.session_id, timeout_ms=CODEX_MAX_POLL_YIELD_MS)
            sent = await self.rpc("terminal_send", **params)
        status: dict[str, Any] = sent["session_status"]
        return status

    async def _report(
        self, number: int, process: _Process, status: dict[str, Any], begun: float, max_tokens: int
    ) -> Chunk:
        ended = status.get("kind") == "exited"
        output = await self._collect(process, ended=ended)
        if ended:
            self._processes.pop(number, None)
            await self.rpc("terminal_close", session_id=process.session_id)
        text, original = truncate(output, max_tokens)
        return Chunk(
            wall_time_s=time.monotonic() - begun,
            exit_code=exit_code(status) if ended else None,
            session_id=None if ended else number,
            output=text,
            original_token_count=original,
            chunk_id=secrets.token_hex(3),
        )

    async def _collect(self, process: _Process, *, ended: bool) -> str:
        """The transcript from the process's cursor, moving it: whole lines, and the line the cursor is on (a
        prompt) as it is now, then only its continuation next time."""
        lines: list[str] = []
        dropped = 0  # lines the scrollback let go before they were returned
        start = process.line
        while True:
            page = await self.rpc(
                "terminal_read",
                session_id=process.session_id,
                start_line=start,
                max_lines=CODEX_READ_PAGE_LINES,
                join_wrapped=True,
            )
            dropped += max(0, page["first_retained_line"] - start)
            lines += page["lines"]
            start = page["next_line"]
            if not page["lines"] or start >= page["total_lines"]:
                break
            if sum(len(line) + 1 for line in lines) > CODEX_OUTPUT_MAX_BYTES:  # a flood: its tail is what counts
                tail = await self.rpc(
                    "terminal_read",
                    session_id=process.session_id,
                    start_line=-CODEX_READ_PAGE_LINES,
                    max_lines=CODEX_READ_PAGE_LINES,
                    join_wrapped=True,
                )
                lines += [f"[{max(0, tail['start_line'] - start)} lines left out]", *tail["lines"]]
                start = tail["next_line"]
                break
        cursor_line = lines[-1] if lines else process.partial  # as the transcript has it now, whole
        if lines and process.partial and lines[0].startswith(process.partial):
            # The transcript trims a line's trailing blanks: "name? " was returned as "name?".
            lines[0] = lines[0][len(process.partial) :].lstrip(" ")
        if dropped:
            lines.insert(0, f"[{dropped} lines dropped from the terminal's scrollback]")
        if ended:
            process.line, process.partial = start, ""
        else:
            process.line, process.partial = max(process.line, start - 1), cursor_line
        return "\n".join(lines)
