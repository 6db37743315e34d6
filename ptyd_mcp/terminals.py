"""What each tool does against the daemon: the daemon's method with the agent's token, and the text a model reads.

Arguments go to the daemon as given (plus the token): the daemon validates them and names a bad field, so this
server holds no second copy of the rules. Sends always run in the background here and are awaited in steps, so a
long one can report MCP progress and an MCP cancellation can interrupt it (``terminal_cancel``) in the daemon.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from ptyd_client import AsyncClient, Unauthorized, core
from ptyd_mcp import text
from ptyd_mcp.config import CANCEL_GRACE_S, DEFAULT_MAX_BYTES, READ_DEFAULTS, SEND_DEFAULTS, WAIT_STEP_MS
from ptyd_mcp.identity import Identity

Progress = Callable[[float, str | None], Awaitable[None]]
"""Reports progress: seconds elapsed and a message (the newest output line)."""

# What this server sets itself: an argument of that name from the model is dropped, never passed on.
OWN_PARAMS = frozenset({"token", "wait", "request_key"})

RENEWED = (
    "Note: ptyd no longer knew this agent's token (the daemon restarted, or the agent was released), so this server "
    "registered anew as {agent!r}: sessions opened before are gone; terminal_list shows what exists now."
)


@dataclass(frozen=True)
class Outcome:
    """A tool's answer: text for the model and the daemon's result object."""

    text: str
    structured: dict[str, Any]
    image_png: str | None = None  # base64: a picture for the model beside the text (terminal_screenshot)


class Terminals:
    """The tools' behaviour, one method per tool, over one daemon connection."""

    def __init__(
        self, client: AsyncClient, agent: str, *, max_bytes: int = DEFAULT_MAX_BYTES, key: str | None = None
    ) -> None:
        self.client = client
        self.max_bytes = max_bytes
        self.identity = Identity(client, agent, key)
        self._notices: list[str] = []

    def take_notices(self) -> list[str]:
        """Things the model must hear once (a re-registration), to put before the next result."""
        notices, self._notices = self._notices, []
        return notices

    async def rpc(self, method: str, **params: Any) -> dict[str, Any]:
        """Call ``method`` with the agent's token; a token the daemon no longer knows is renewed once."""
        await self.identity.ensure()
        token = self.client.token
        try:
            result: dict[str, Any] = await self.client.call(method, **params, token=token)
        except Unauthorized:
            if await self.identity.renew(token):
                self._notices.append(RENEWED.format(agent=self.identity.agent))
            result = await self.client.call(method, **params, token=self.client.token)
        return result

    async def dispatch(self, name: str, args: dict[str, Any], progress: Progress | None) -> Outcome:
        args = {k: v for k, v in args.items() if k not in OWN_PARAMS}
        if name == "terminal_open":
            return await self.open(args)
        if name in ("terminal_send", "terminal_send_background"):
            args = {**SEND_DEFAULTS, "max_bytes": self.max_bytes, **args}
        if name == "terminal_read":
            args = {**READ_DEFAULTS, **args}
        if name == "terminal_send":
            return await self.send(args, progress)
        if name == "terminal_send_background":
            started = await self.rpc("terminal_send", **args, wait=False, request_key=core.new_request_key())
            return Outcome(f"Started {started['operation_id']}; the program runs on.", started)
        if name == "terminal_wait":
            return await self.wait(args, progress)
        if name == "terminal_screenshot":
            return await self.screenshot(args)
        simple = _SIMPLE.get(name)
        if simple is None:
            raise LookupError(name)
        method, describe = simple
        result = await self.rpc(method, **args)
        return Outcome(describe(result, args.get("session_id", "")), result)

    async def screenshot(self, args: dict[str, Any]) -> Outcome:
        result = await self.rpc("terminal_screenshot", **args)
        png = str(result.pop("png"))  # once, as the image: not again as base64 text in the structured result
        sid = args.get("session_id", "")
        cursor = (
            f"cursor at row {result['cursor_y']}, column {result['cursor_x']}"
            if result["cursor_visible"]
            else ("cursor hidden")
        )
        full = "; a full-screen program is showing" if result["alt_screen"] else ""
        caption = f"[screenshot of {sid}: {result['cols']}x{result['rows']} cells, {cursor}{full}]"
        return Outcome(caption, result, image_png=png)

    async def open(self, args: dict[str, Any]) -> Outcome:
        if args.pop("profile", None) == "none":  # the tool's older spelling
            args.setdefault("env_profile", "human")
        args.setdefault("env_profile", "agent")  # the daemon's default for an agent too; said here for the model
        opened = await self.rpc("terminal_open", **args)
        sid = opened["session_id"]
        header = f"Session {sid} is open ({opened['type']}, pid {opened['pid']}, {opened['cols']}x{opened['rows']})."
        return Outcome(f"{header}\n{opened['motd']}\n{text.why(opened, sid)}", opened)

    async def send(self, args: dict[str, Any], progress: Progress | None) -> Outcome:
        sid = str(args.get("session_id", ""))
        try:
            started = await self.rpc("terminal_send", **args, wait=False, request_key=core.new_request_key())
            waited = await self._settle(sid, None, progress, started["operation_id"])
        except anyio.get_cancelled_exc_class():
            # The host cancelled the call: interrupt the send in the daemon too (if it started, it is the session's
            # active send: no other can start while it runs), even though this task is cancelled.
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_GRACE_S):
                await self.rpc("terminal_cancel", session_id=sid)
            raise
        result = waited["result"]
        if result is None or waited["operation_id"] != started["operation_id"]:
            raise RuntimeError(f"terminal_wait answered {waited['operation_id']} for {started['operation_id']}")
        return Outcome(text.send(result, sid), result)

    async def wait(self, args: dict[str, Any], progress: Progress | None) -> Outcome:
        sid = str(args.get("session_id", ""))
        timeout_ms = args.get("timeout_ms")
        waited = await self._wait_once(sid, timeout_ms, progress)
        if waited["done"] and waited["result"] is not None:
            return Outcome(text.send(waited["result"], sid), waited)
        if waited["done"]:
            return Outcome("No send has run in this session yet.", waited)
        if waited.get("result") is not None:  # a wait on a running command that gave up: what it showed so far
            return Outcome(text.send(waited["result"], sid), waited)
        return Outcome(
            f"[still running: {waited['operation_id']} had not settled after {timeout_ms} ms. terminal_output shows "
            "its output so far; terminal_wait again, or terminal_cancel to interrupt it]",
            waited,
        )

    async def _settle(self, sid: str, timeout_ms: Any, progress: Progress | None, operation_id: str) -> dict[str, Any]:
        """terminal_wait for ``operation_id`` in steps until it settles (or ``timeout_ms`` passes), reporting
        progress between (named: a step never answers another operation, nor starts a wait of its own)."""
        begun = time.monotonic()
        deadline = begun + timeout_ms / 1000 if isinstance(timeout_ms, int) else None
        while True:
            step = WAIT_STEP_MS
            if deadline is not None:
                step = max(0, min(step, round((deadline - time.monotonic()) * 1000)))
            waited = await self.rpc("terminal_wait", session_id=sid, timeout_ms=step, operation_id=operation_id)
            if waited["done"] or (deadline is not None and time.monotonic() >= deadline):
                return waited
            await self._progress(sid, begun, progress)

    async def _wait_once(self, sid: str, timeout_ms: Any, progress: Progress | None) -> dict[str, Any]:
        """The model's terminal_wait: one daemon wait for its whole time (after a timeout it follows the command
        left running, and a wait in steps would start a new follow at each), progress reported beside it."""
        begun = time.monotonic()
        waited: dict[str, Any] = {}
        failed: list[Exception] = []  # raised as itself below, not wrapped in the task group's ExceptionGroup

        async def wait() -> None:
            try:
                waited.update(await self.rpc("terminal_wait", session_id=sid, timeout_ms=timeout_ms))
            except Exception as exc:
                failed.append(exc)
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            while progress is not None:
                await anyio.sleep(WAIT_STEP_MS / 1000)
                await self._progress(sid, begun, progress)
        if failed:
            raise failed[0]
        return waited

    async def _progress(self, sid: str, begun: float, progress: Progress | None) -> None:
        if progress is not None:
            output = (await self.rpc("terminal_output", session_id=sid))["output"]
            lines = [line for line in output.splitlines() if line.strip()]
            await progress(time.monotonic() - begun, lines[-1] if lines else None)


def _read(result: Mapping[str, Any], sid: str) -> str:
    lines = result["lines"]
    body = "\n".join(lines)
    last = result["next_line"] - 1  # joined wrapped rows: one line of the page may cover several
    footer = f"[lines {result['start_line']}-{last} of {result['total_lines']}"
    if result["first_retained_line"] > 0:
        footer += f"; lines before {result['first_retained_line']} were dropped from scrollback"
    if result["next_line"] < result["total_lines"]:
        footer += f"; next page: start_line {result['next_line']}"
    return f"{body}\n{footer}]" if body else footer + "]"


def _screen(result: Mapping[str, Any], sid: str) -> str:
    rows = list(result["lines"])
    while rows and not rows[-1]:
        rows.pop()
    footer = f"[screen of {sid}: cursor at row {result['cursor_y']}, column {result['cursor_x']}"
    if result["alt_screen"]:
        footer += "; a full-screen program is showing"
    if result["title"]:
        footer += f"; title {result['title']!r}"
    return "\n".join([*rows, footer + "]"])


def _output(result: Mapping[str, Any], sid: str) -> str:
    output = str(result["output"])
    if result["done"] and result["result"] is not None:
        return output + text.why(result["result"], sid)
    if result["done"]:
        return "[no send is running in this session]"
    return output + "[still running: terminal_output again later for more, or terminal_wait]"


def _session_line(info: Mapping[str, Any]) -> str:
    status = info["status"]
    state = "running" if status["kind"] == "running" else text.exit_phrase(status)
    foreground = info["foreground"]["name"] if info["foreground"] else "-"
    busy = f", send {info['operation_id']} running" if info["busy"] else ""
    prompt = ", PASSWORD PROMPT (ask the human)" if info.get("password_prompt") else ""
    name = f" {info['name']!r}" if info["name"] else ""
    ports = text.listening(info.get("listening"))
    listens = f", {ports}" if ports else ""
    return (
        f"{info['session_id']}{name}: {info['type']}, {state}, foreground {foreground}{busy}{prompt}{listens}, "
        f"{info['cols']}x{info['rows']}, {info['total_lines']} lines"
    )


def _list(result: Mapping[str, Any], sid: str) -> str:
    sessions = result["sessions"]
    if not sessions:
        return "No sessions. terminal_open starts one."
    return "\n".join(_session_line(info) for info in sessions)


_SIMPLE: dict[str, tuple[str, Callable[[Mapping[str, Any], str], str]]] = {
    "terminal_output": ("terminal_output", _output),
    "terminal_integrate": ("terminal_integrate", lambda r, sid: text.send(r, sid)),
    "terminal_cancel": (
        "terminal_cancel",
        lambda r, sid: (
            r.get("message") or "Interrupted the running send (SIGINT); terminal_wait returns its result."
            if r["cancelled"] or r.get("interrupted")
            else f"Nothing to interrupt. {r.get('hint') or 'No send was running.'}"
        ),
    ),
    "terminal_read": ("terminal_read", _read),
    "terminal_screen": ("terminal_screen", _screen),
    "terminal_signal": (
        "terminal_signal",
        lambda r, sid: (
            f"{r['signal']} {'sent to' if r['delivered'] else 'not delivered to'} process group "
            f"{r['pgid']}. terminal_send input '' shows what it did."
        ),
    ),
    "terminal_resize": ("terminal_resize", lambda r, sid: f"Session {sid} is now {r['cols']}x{r['rows']}."),
    "terminal_close": (
        "terminal_close",
        lambda r, sid: f"Closed {sid}; {r['killed']} processes ended." if r["closed"] else f"{sid} was already closed.",
    ),
    "terminal_list": ("terminal_list", _list),
}
