"""The answer gate in process: answers to terminal queries go to the program that asked once it waits, and never
to the shell that drew its prompt after that program's queries (the prompt mark says where in the output)."""

from __future__ import annotations

import asyncio

from ptyd.backends.readiness.blocked_read import Wait
from ptyd.backends.session.answers import AnswerGate

from .conftest import run

SHELL, DUMP = 100, 200


class Front:
    """The terminal's foreground group and who waits on it, as the gate asks them."""

    def __init__(self, front: int) -> None:
        self.front = front
        self.waiting: set[int] = set()

    def input_wait(self, pgid: int) -> Wait:
        return Wait.DIRECT if pgid in self.waiting else Wait.NONE


class Output:
    """What the channel says of the output: where the shell's last prompt mark was, and what reading the rest
    brings in (``unread_prompt_at``: a mark still in the PTY)."""

    def __init__(self) -> None:
        self.orphaned = 0
        self.unread_prompt_at: int | None = None

    def read_all(self) -> None:
        if self.unread_prompt_at is not None:
            self.orphaned, self.unread_prompt_at = self.unread_prompt_at, None


def gate(front: Front, output: Output, written: list[bytes]) -> AnswerGate:
    return AnswerGate(
        front,  # type: ignore[arg-type]
        lambda: front.front,
        written.append,
        "test",
        1.0,
        read_all=output.read_all,
        orphaned=lambda: output.orphaned,
    )


async def settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_an_answer_goes_to_its_asker_once_it_waits() -> None:
    async def main() -> list[bytes]:
        front, output, written = Front(DUMP), Output(), []
        answers = gate(front, output, written)
        answers.offer(b"\x1b[1;1R", DUMP, 500)
        await settled()
        assert written == []  # not waiting yet
        front.waiting.add(DUMP)
        await asyncio.sleep(0.01)
        return written

    assert run(main) == [b"\x1b[1;1R"]


def test_an_answer_to_a_query_before_the_shells_prompt_mark_is_dropped() -> None:
    # The dump's queries were read only after the shell took the terminal back: the shell looks like the asker.
    async def main() -> tuple[list[bytes], int]:
        front, output, written = Front(SHELL), Output(), []
        answers = gate(front, output, written)
        output.orphaned = 900  # the prompt mark was read already
        answers.offer(b"\x1b[?62;22c", SHELL, 500)
        front.waiting.add(SHELL)
        await asyncio.sleep(0.01)
        return written, answers.dropped

    assert run(main) == ([], 1)


def test_a_prompt_mark_still_unread_when_the_shell_waits_is_read_first() -> None:
    async def main() -> tuple[list[bytes], int]:
        front, output, written = Front(SHELL), Output(), []
        answers = gate(front, output, written)
        answers.offer(b"\x1b[?62;22c", SHELL, 500)
        output.unread_prompt_at = 900  # the shell waits: it drew its prompt, still in the PTY
        front.waiting.add(SHELL)
        await asyncio.sleep(0.01)
        return written, answers.dropped

    assert run(main) == ([], 1)


def test_the_shells_own_query_after_its_prompt_mark_is_answered() -> None:
    async def main() -> list[bytes]:
        front, output, written = Front(SHELL), Output(), []
        answers = gate(front, output, written)
        output.orphaned = 900
        answers.offer(b"\x1b[?62;22c", SHELL, 950)
        front.waiting.add(SHELL)
        await asyncio.sleep(0.01)
        return written

    assert run(main) == [b"\x1b[?62;22c"]
