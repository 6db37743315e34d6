"""One send operation: its input, bounds, where its output starts in the transcript, and its settled result."""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Callable
from typing import final

import msgspec

from ptyd import protocol as p
from ptyd.backends.base import SendRequest
from ptyd.backends.session.agent_view import Unread
from ptyd.backends.session.cancel import CancelState
from ptyd.backends.session.until import NamedWait
from ptyd.backends.session_state import OpState
from ptyd.terminal.capture import HeadCapture
from ptyd.terminal.economy import compact_bound
from ptyd.terminal.engine import TerminalEngine
from ptyd.terminal.logical import join
from ptyd.terminal.viewport import HEAD_SHARE, bound


@final
class SendOp:
    def __init__(self, request: SendRequest, anchor: int, loop: asyncio.AbstractEventLoop) -> None:
        self.id = "op-" + secrets.token_hex(8)
        self.request = request
        self.started = time.monotonic()
        self.deadline = self.started + request.timeout_s
        self.anchor = anchor  # transcript line of the cursor when the input was written
        self.capture = HeadCapture(anchor, request.max_bytes // HEAD_SHARE)
        self.output_line = anchor  # terminal_output's consumption cursor
        self.future: asyncio.Future[p.SendResult] = loop.create_future()
        self.exit_code: int | None = None  # of a shell command that finished during this send
        self.cancel = CancelState()
        self.keys = request.keys.encode()  # still to press: after the input was taken
        self.front_at_write: int | None = None  # the group in front when the input was written
        self.named: NamedWait | None = None  # the wait the request named (until, until_stable_ms)
        # Where its result's output starts: the first line the agent was not shown (output between calls), at most
        # the anchor. What the result reported of the agent's view, for its delivery.
        self.view_start = anchor
        self.unread: Unread | None = None
        self.end_text = ""  # its result's cursor line as the result showed it
        self.on_delivered: Callable[[SendOp], None] | None = None
        self.given = False  # its result was handed to the agent

    @property
    def done(self) -> bool:
        return self.future.done()

    @property
    def settled(self) -> bool:
        """Done with a result, which a next daemon can hand over: not an error (an internal one, an incident)."""
        return self.future.done() and not self.future.cancelled() and self.future.exception() is None

    async def result(self) -> p.SendResult:
        """The settled result, for a caller that hands it to the agent (which moves the agent's unread cursor)."""
        # Shielded: a caller that disconnects must not cancel the operation its result belongs to.
        result = await asyncio.shield(self.future)
        self.delivered()
        return result

    def delivered(self) -> None:
        """The result reached (is being returned to) the agent: the first time, the agent's cursor moves past it
        (a repeat of its request key returns it again and moves nothing)."""
        if self.done and not self.given:
            self.given = True
            if self.on_delivered is not None and self.request.by_owner:
                self.on_delivered(self)

    def to_state(self, *, taken: bool = True) -> OpState:
        """This send for the next daemon: in flight (``taken``: the program was seen to take its input) or settled."""
        req = self.request
        return OpState(
            id=self.id,
            timeout_s=req.timeout_s,
            idle_s=req.idle_s,
            max_bytes=req.max_bytes,
            request_key=req.request_key,
            started=self.started,
            deadline=self.deadline,
            anchor=self.anchor,
            output_line=self.output_line,
            capture_lines=list(self.capture.lines),
            capture_room=self.capture.room,
            capture_end=self.capture.end_line,
            exit_code=self.exit_code,
            taken=taken,
            result=msgspec.json.encode(self.future.result()) if self.settled else None,
            keys=self.keys.decode("latin-1"),
            until=req.until.pattern if req.until is not None else None,
            until_stable_s=req.until_stable_s,
            typed=self.named.typed if self.named is not None else True,
            compact=req.compact,
            join_wrapped=req.join_wrapped,
            view_start=self.view_start,
            given=self.given,
            until_done=req.until_done,
            follow_command=req.follow_command,
        )

    @classmethod
    def from_state(cls, state: OpState, loop: asyncio.AbstractEventLoop) -> SendOp:
        request = SendRequest(
            input="", timeout_s=state.timeout_s, idle_s=state.idle_s, max_bytes=state.max_bytes,
            request_key=state.request_key, until=re.compile(state.until) if state.until is not None else None,
            until_stable_s=state.until_stable_s, compact=state.compact, join_wrapped=state.join_wrapped,
            until_done=state.until_done, follow_command=state.follow_command,
        )  # fmt: skip
        op = cls(request, state.anchor, loop)
        op.view_start = state.anchor if state.view_start is None else state.view_start
        op.given = state.given
        if request.until is not None or request.until_stable_s is not None:  # the line it started on counts
            op.named = NamedWait(request.until, request.until_stable_s, state.anchor, state.typed, None)
        op.id = state.id
        op.started, op.deadline = state.started, state.deadline
        op.output_line = state.output_line
        op.capture.lines, op.capture.room = state.capture_lines, state.capture_room
        op.capture.end_line = state.capture_end
        op.exit_code = state.exit_code
        op.keys = state.keys.encode("latin-1")
        if state.result is not None:
            op.future.set_result(_result_decoder.decode(state.result))
        return op


_result_decoder = msgspec.json.Decoder(p.SendResult)


def _bound(
    request: SendRequest,
    terminal: TerminalEngine,
    head: list[str],
    gap: tuple[int, int] | None,
    start: int,
    end: int,
    max_bytes: int,
) -> tuple[str, bool, int]:
    """Transcript lines ``[start, end)`` after ``head``, as the request wants them read, within ``max_bytes``."""
    tail = terminal.transcript(start, end)
    numbers: list[int] | None = None
    if request.join_wrapped and (wraps := terminal.wraps(start, end)):
        tail, numbers = join(tail, start, wraps)
        numbers.append(end)
    if request.compact:
        return compact_bound(head, gap, tail, start, max_bytes, numbers)
    return (*bound(head, gap, tail, start, max_bytes, numbers), 0)


def viewport(op: SendOp, terminal: TerminalEngine) -> tuple[str, bool, p.LineRange, int]:
    """The rendered delta of ``op``: its lines up to the cursor line, or the screen of a full-screen program.
    Also how many lines the request's ``compact`` folded."""
    end = terminal.cursor_line + 1
    start = min(op.view_start, end - 1)
    lines = p.LineRange(start_line=start, end_line=end)
    max_bytes = op.request.max_bytes
    if terminal.alt_screen:
        text, truncated = bound([], None, terminal.visible_rows(), 0, max_bytes)
        return text, truncated, lines, 0
    first = terminal.scrollback.first
    if start >= first:
        text, truncated, folded = _bound(op.request, terminal, [], None, start, end, max_bytes)
        return text, truncated, lines, folded
    if min(op.anchor, end - 1) >= first:
        # Only output printed between calls is gone (a burst after the previous result): say where it was.
        text, _, folded = _bound(op.request, terminal, [], (start, first), first, end, max_bytes)
        return text, True, lines, folded
    # The head of this send's output was dropped from scrollback by a burst; the capture kept its first lines.
    head = op.capture.lines
    gap = (op.capture.end_line, first)
    text, _, folded = _bound(op.request, terminal, head, gap, first, end, max_bytes)
    return text, True, lines, folded


def consume_output(op: SendOp, terminal: TerminalEngine, max_bytes: int) -> tuple[str, bool]:
    """Completed lines since the previous call, each ending in a newline (so consecutive chunks concatenate
    to the transcript), and once the operation settled the cursor line (the prompt) without one."""
    end = terminal.cursor_line + (1 if op.done else 0)
    start = max(op.output_line, terminal.scrollback.first)
    if op.request.join_wrapped and not op.done and end > start:
        wraps = terminal.wraps(start, end)
        while end > start and end - 1 in wraps:  # a logical line still being written comes whole, next time
            end -= 1
    dropped = start > op.output_line
    op.output_line = max(end, op.output_line)
    if end <= start:
        return "", dropped
    text, truncated, _ = _bound(op.request, terminal, [], None, start, end, max_bytes)
    if not op.done:
        text += "\n"
    return text, truncated or dropped
