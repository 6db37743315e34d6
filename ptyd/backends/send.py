"""One send operation: its input, bounds, where its output starts in the transcript, and its settled result."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import final

import msgspec

from ptyd import protocol as p
from ptyd.backends.base import SendRequest
from ptyd.backends.cancel import CancelState
from ptyd.backends.session_state import OpState
from ptyd.terminal.emulator import HeadCapture, Terminal
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

    @property
    def done(self) -> bool:
        return self.future.done()

    async def result(self) -> p.SendResult:
        # Shielded: a caller that disconnects must not cancel the operation its result belongs to.
        return await asyncio.shield(self.future)

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
            result=msgspec.json.encode(self.future.result()) if self.done else None,
        )

    @classmethod
    def from_state(cls, state: OpState, loop: asyncio.AbstractEventLoop) -> SendOp:
        request = SendRequest(
            input="", timeout_s=state.timeout_s, idle_s=state.idle_s, max_bytes=state.max_bytes,
            request_key=state.request_key,
        )  # fmt: skip
        op = cls(request, state.anchor, loop)
        op.id = state.id
        op.started, op.deadline = state.started, state.deadline
        op.output_line = state.output_line
        op.capture.lines, op.capture.room = state.capture_lines, state.capture_room
        op.capture.end_line = state.capture_end
        op.exit_code = state.exit_code
        if state.result is not None:
            op.future.set_result(_result_decoder.decode(state.result))
        return op


_result_decoder = msgspec.json.Decoder(p.SendResult)


def viewport(op: SendOp, terminal: Terminal) -> tuple[str, bool, p.LineRange]:
    """The rendered delta of ``op``: its lines up to the cursor line, or the screen of a full-screen program."""
    end = terminal.cursor_line + 1
    start = min(op.anchor, end - 1)
    lines = p.LineRange(start_line=start, end_line=end)
    max_bytes = op.request.max_bytes
    if terminal.alt_screen:
        text, truncated = bound([], None, terminal.visible_rows(), 0, max_bytes)
        return text, truncated, lines
    first = terminal.scrollback.first
    if start >= first:
        text, truncated = bound([], None, terminal.transcript(start, end), start, max_bytes)
        return text, truncated, lines
    # The head of this send's output was dropped from scrollback by a burst; the capture kept its first lines.
    head = op.capture.lines
    text, _ = bound(head, (op.capture.end_line, first), terminal.transcript(first, end), first, max_bytes)
    return text, True, lines


def consume_output(op: SendOp, terminal: Terminal, max_bytes: int) -> tuple[str, bool]:
    """Completed lines since the previous call, each ending in a newline (so consecutive chunks concatenate
    to the transcript), and once the operation settled the cursor line (the prompt) without one."""
    end = terminal.cursor_line + (1 if op.done else 0)
    start = max(op.output_line, terminal.scrollback.first)
    dropped = start > op.output_line
    op.output_line = max(end, op.output_line)
    if end <= start:
        return "", dropped
    text, truncated = bound([], None, terminal.transcript(start, end), start, max_bytes)
    if not op.done:
        text += "\n"
    return text, truncated or dropped
