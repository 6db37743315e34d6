"""PtyChannel over a real openpty pair, the test playing the program on the slave side: output is read and
rendered, input is written in order and held while the program does not read it, hold/release and close."""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
import time
import tty
from collections.abc import AsyncIterator

import pytest

from ptyd.backends.os import channel as channel_module
from ptyd.backends.os.channel import PtyChannel
from ptyd.backends.os.spawn import Spawned
from ptyd.terminal.engines import open_terminal

from .conftest import run, until


class Pty:
    """A channel over a fresh PTY; ``program`` is the slave side, read and written as a program would."""

    def __init__(self, *, raw: bool = True) -> None:
        master, slave = os.openpty()
        os.set_blocking(master, False)
        if raw:
            tty.setraw(slave, termios.TCSANOW)
        self.program = os.open(os.ttyname(slave), os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        self.replies: list[bytes] = []
        self.outputs = 0
        self.terminal = open_terminal(
            80, 24, scrollback_lines=1000, scrollback_bytes=1 << 20, on_reply=self.replies.append
        )
        self.spawned = Spawned(pid=0, master=master, slave=slave, tty_rdev=os.fstat(slave).st_rdev, gate=-1)
        self.channel = PtyChannel(self.spawned, self.terminal, 1 << 20, self._output)

    def _output(self) -> None:
        self.outputs += 1

    def read_input(self) -> bytes:
        try:
            return os.read(self.program, 1 << 16)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        self.channel.close()
        os.close(self.program)


async def flood_in_bulk(pty: Pty) -> int:
    """Write 16 KiB at a time until the channel's last wake-up read in bulk; returns the bytes written. (The
    kernel hands a PTY's output over in pieces: a wake-up that read only the short rest of one is not bulk.)"""
    written = 0

    def read_all() -> bool:
        return pty.channel.received >= written

    for _ in range(20):
        written += os.write(pty.program, b"x" * 16384)
        await until(read_all, message="the flood")
        if pty.channel.bulk:
            return written
    raise AssertionError("no wake-up read in bulk")


def test_output_is_read_and_rendered() -> None:
    async def main() -> tuple[list[str], int]:
        pty = Pty()
        try:
            os.write(pty.program, b"hello\r\nworld")
            await until(lambda: pty.channel.received >= 12, message="the output")
            await pty.channel.rendered()
            return pty.terminal.transcript(0, 2), pty.outputs
        finally:
            pty.close()

    lines, outputs = run(main)
    assert lines == ["hello", "world"]
    assert outputs >= 1


def test_a_caller_waiting_for_the_rendering_does_not_wait_for_output_to_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Output read in bulk is rendered in batches (``RENDER_DEFER_S`` later), but a caller blocked on the rendering
    (a send's last bytes, read while the worker still rendered the ones before) has it rendered at once: the
    deferral is made an hour here, which the wait would otherwise sit out."""
    monkeypatch.setattr(channel_module, "RENDER_DEFER_S", 3600.0)

    async def main() -> list[str]:
        pty = Pty()
        try:
            await flood_in_bulk(pty)
            os.write(pty.program, b"\r\nTAIL")
            await until(lambda: pty.channel.received > 0 and pty.channel.tail.endswith(b"TAIL"), message="the tail")
            await asyncio.wait_for(pty.channel.rendered(), 10)
            return pty.terminal.visible_rows()
        finally:
            pty.close()

    assert "TAIL" in [row.rstrip() for row in run(main)]


def test_input_arrives_in_order() -> None:
    async def main() -> bytes:
        pty = Pty()
        try:
            for part in (b"one ", b"two ", b"three"):
                pty.channel.write(part)
            got = b""
            while len(got) < 13:
                await until(lambda: pty.channel.input_queued() > 0 or pty.channel.pending == 0)
                got += pty.read_input()
            return got
        finally:
            pty.close()

    assert run(main) == b"one two three"


def test_input_the_program_does_not_read_waits_in_the_channel_and_then_goes_out() -> None:
    size = 256 * 1024

    async def main() -> tuple[int, int, bytes]:
        pty = Pty()
        try:
            pty.channel.write(b"x" * size)
            held = pty.channel.pending
            queued = pty.channel.input_queued()
            got = bytearray()
            while len(got) < size:  # the program reads now: the channel writes the rest as the queue drains
                chunk = pty.read_input()
                got += chunk
                if not chunk:  # the kernel's queue is empty: the channel refills it from what it holds
                    await until(lambda: pty.channel.input_queued() > pty.channel.pending, message="more input")
            return held, queued, bytes(got)
        finally:
            pty.close()

    held, queued, got = run(main)
    assert 0 < held < size  # the kernel took what fit; the daemon holds the rest
    assert queued >= size - held  # input_queued counts both
    assert got == b"x" * size


def test_a_held_channel_neither_reads_nor_writes_until_released() -> None:
    async def main() -> tuple[bytes, int, int, bytes]:
        pty = Pty()
        try:
            held = pty.channel.hold()
            pty.channel.write(b"typed")
            os.write(pty.program, b"printed")
            await asyncio.sleep(0.05)  # loop turns in which a reading channel would have read it (proving absence)
            outbox = pty.channel.hold()  # what a handover carries: the input not yet written
            received_while_held = pty.channel.received
            pty.channel.release()
            await until(lambda: pty.channel.received >= 7, message="the output after release")
            await until(lambda: pty.channel.input_queued() >= 5, message="the input after release")
            return held + outbox, received_while_held, pty.channel.received, pty.read_input()
        finally:
            pty.close()

    carried, during, after, typed = run(main)
    assert carried == b"typed"
    assert during == 0
    assert after == 7
    assert typed == b"typed"


def test_paused_floods_wait_in_the_pty_while_quiet_output_is_read() -> None:
    # A handover's pre-flight: a program writing in bulk waits, a prompt elsewhere is still read (issue 28).
    async def main() -> tuple[int, int, int, int]:
        flood, quiet = Pty(), Pty()
        try:
            written = await flood_in_bulk(flood)
            for pty in (flood, quiet):
                pty.channel.pause_floods()
            more = os.write(flood.program, b"y" * 8192)
            os.write(quiet.program, b"prompt$ ")
            await until(lambda: quiet.channel.received >= 8, message="the quiet session's output")
            await asyncio.sleep(0.05)  # loop turns in which a reading channel would have read it (proving absence)
            during = flood.channel.received
            flood.channel.release()
            await until(lambda: flood.channel.received >= written + more, message="the flood after release")
            return written, during, flood.channel.received, more
        finally:
            flood.close()
            quiet.close()

    written, during, after, more = run(main)
    assert during == written
    assert after == written + more


def test_a_flood_waits_in_its_pty_while_a_send_elsewhere_is_in_flight() -> None:
    # Issue 29's send lane: the flood's bytes stay in the kernel while another session's send is in flight and
    # that session is active; none is lost or doubled, and the flood is read again once the send settles.
    async def main() -> tuple[int, int, int, int, int]:
        flood, sender = Pty(), Pty()
        try:
            written = await flood_in_bulk(flood)
            sender.channel.send_began()
            sender.channel.write(b"true\n")  # the send's input: its session is active now
            more = os.write(flood.program, b"y" * 8192)
            os.write(sender.program, b"prompt$ ")
            await until(lambda: sender.channel.received >= 8, message="the sender's output")
            during = flood.channel.received
            sender.channel.send_ended()
            await until(lambda: flood.channel.received >= written + more, message="the flood after the send")
            await flood.channel.rendered()
            return written, during, flood.channel.received, more, flood.channel.rendered_bytes
        finally:
            flood.close()
            sender.close()

    written, during, after, more, rendered = run(main)
    assert during == written  # the read that found the send in flight took nothing
    assert after == rendered == written + more


def test_a_floods_reader_and_renderer_held_together_both_resume() -> None:
    # Held for a send elsewhere, a channel's reader and renderer each look again: one resume shared by both
    # kept only the last one's, and the other stopped for good (50 floods in one daemon, engine in it: 4 of 50
    # cancels never settled, the flood's raw output never rendered).
    async def main() -> list[str]:
        flood, sender = Pty(), Pty()
        resumed: list[str] = []
        try:
            written = os.write(flood.program, b"x" * 16384)
            await until(lambda: flood.channel.received >= written, message="the flood")
            sender.channel.send_began()
            sender.channel.write(b"true\n")  # the send's input: its session is urgent now
            now = time.monotonic()
            assert flood.channel._yields(now, "read", lambda: resumed.append("read"))
            assert flood.channel._yields(now, "render", lambda: resumed.append("render"))
            sender.channel.send_ended()
            await until(lambda: {"read", "render"} <= set(resumed), message="both to look again")
            return sorted(set(resumed))
        finally:
            flood.close()
            sender.close()

    assert run(main) == ["read", "render"]


def test_a_send_whose_program_floods_does_not_hold_back_other_floods() -> None:
    # `seq inf` sent without waiting is a send in flight: its bulk output does not make it urgent, so it cannot
    # keep a real send's session waiting, nor another flood (two floods with sends read each other's turns).
    async def main() -> tuple[int, int]:
        first, second = Pty(), Pty()
        try:
            for pty in (first, second):
                pty.channel.send_began()
                pty.channel.write(b"seq inf\n")
            total = 0
            for _ in range(64):  # 256 KiB each, written as fast as the channels take it
                for pty in (first, second):
                    while True:
                        try:
                            total += os.write(pty.program, b"z" * 4096)
                            break
                        except BlockingIOError:
                            await asyncio.sleep(0.001)
            await until(lambda: first.channel.received + second.channel.received >= total, message="both floods")
            return first.channel.received + second.channel.received, total
        finally:
            first.close()
            second.close()

    got, total = run(main)
    assert got == total


def test_a_pty_with_no_writer_left_stops_the_reader_and_is_no_output() -> None:
    # Every slave fd closed (the daemon keeps one, so only a bug or a foreign close gets here): the master's read
    # fails with EIO. The reader stops (level-triggered, it would fire forever) and the empty read is no output:
    # no output callback, no new last-output time, nothing counted.
    async def main() -> tuple[int, int, float, bool]:
        pty = Pty()
        try:
            os.write(pty.program, b"last words\r\n")
            await until(lambda: pty.channel.received >= 12, message="the output")
            outputs, last = pty.outputs, pty.channel.last_output
            os.close(pty.program)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, pty.spawned.slave)  # the slave side's last fd now points elsewhere
            os.close(devnull)
            await until(lambda: not pty.channel._reading, message="the reader to stop")
            return pty.outputs - outputs, pty.channel.received, pty.channel.last_output - last, pty.channel.closed
        finally:
            pty.program = os.open(os.devnull, os.O_RDWR)  # for close(), which closes it again
            pty.close()

    more_outputs, received, moved, closed = run(main)
    assert more_outputs == 0
    assert received == 12
    assert moved == 0
    assert not closed


def test_close_stops_everything_and_closes_both_fds() -> None:
    async def main() -> Spawned:
        pty = Pty()
        pty.channel.write(b"x" * (1 << 20))  # a writer registered with the loop
        pty.close()
        pty.channel.write(b"ignored")
        return pty.spawned

    spawned = run(main)
    for fd in (spawned.master, spawned.slave):
        try:
            os.fstat(fd)
        except OSError:
            continue
        raise AssertionError(f"fd {fd} is still open")


FLOOD_BYTES = 1 << 20


@contextlib.asynccontextmanager
async def writing_floods(count: int) -> AsyncIterator[list[Pty]]:
    """``count`` channels, each with a program of its own writing ``FLOOD_BYTES`` whenever its PTY has room, as
    floods do."""
    floods = [Pty() for _ in range(count)]
    programs = []
    try:
        for pty in floods:
            out = os.open(os.ttyname(pty.spawned.slave), os.O_WRONLY | os.O_NOCTTY)
            programs.append(
                await asyncio.create_subprocess_exec("head", "-c", str(FLOOD_BYTES), "/dev/zero", stdout=out)
            )
            os.close(out)
        yield floods
    finally:
        for program in programs:
            with contextlib.suppress(ProcessLookupError):
                program.kill()  # a test that failed midway left it blocked on a full PTY
            await program.wait()
        for pty in floods:
            pty.close()


def test_floods_waiting_for_their_turn_wait_out_of_the_poll() -> None:
    # Floods among floods read in the pacer's turns. One that had its turn, or was held for a send elsewhere,
    # waits for the next one in the pacer's queue, out of the loop's poll: left in it, its full PTY woke it at once
    # only to be refused (50 floods: 5,700 such wake-ups a second, each with two epoll_ctl, a quarter of the
    # daemon's loop), and the renders and acks of its output put it back in the poll while it waited.
    async def main() -> tuple[list[int], int, set[int]]:
        both = 0  # looks that found a flood waiting for its turn and in the poll at once
        queued: set[int] = set()  # the floods found waiting in the queue
        async with writing_floods(4) as floods:
            while not all(pty.channel.received >= FLOOD_BYTES for pty in floods):
                for i, pty in enumerate(floods):  # looked at in every turn of the loop
                    if pty.channel._awaiting:
                        queued.add(i)
                        both += pty.channel._reading
                await asyncio.sleep(0)
            return [pty.channel.received for pty in floods], both, queued

    received, both, queued = run(main)
    assert received == [FLOOD_BYTES] * 4
    assert both == 0
    assert queued == {0, 1, 2, 3}


def test_floods_queued_for_a_turn_get_none_while_a_send_elsewhere_is_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Floods taking turns wait in the pacer's queue; while a send elsewhere is urgent the queue gives no turns, so
    # the floods stay in their PTYs without each being woken only to be held (50 floods: one wake-up per flood per
    # send, in the send's own span). They read on once the send settles, losing and doubling nothing.
    woken: list[PtyChannel] = []  # the channels whose reader ran while the send was in flight
    on_readable = PtyChannel._on_readable

    def counted(self: PtyChannel, paced: bool = True, turn: bool = False) -> None:
        if sending:
            woken.append(self)
        on_readable(self, paced, turn)

    monkeypatch.setattr(PtyChannel, "_on_readable", counted)
    sending = False

    async def main() -> tuple[list[int], int]:
        nonlocal sending
        sender = Pty()
        try:
            async with writing_floods(3) as floods:
                # Each flood waiting for its turn in the queue, none in the poll, as the send begins.
                await until(lambda: all(pty.channel._awaiting for pty in floods), message="the floods in the queue")
                sender.channel.send_began()
                sender.channel.write(b"true\n")  # its session is urgent from here
                sending = True
                during = [pty.channel.received for pty in floods]
                os.write(sender.program, b"prompt$ ")
                await until(lambda: sender.channel.received >= 8, message="the sender's output")
                await asyncio.sleep(0.05)  # the send stays in flight a while: any flood given a turn would be woken
                held = [pty.channel.received - before for pty, before in zip(floods, during, strict=True)]
                sending = False
                sender.channel.send_ended()
                await until(lambda: all(p.channel.received >= FLOOD_BYTES for p in floods), message="the floods after")
                return held, sum(1 for channel in woken if channel in {pty.channel for pty in floods})
        finally:
            sender.close()

    held, floods_woken = run(main)
    assert held == [0, 0, 0]
    assert floods_woken == 0


def test_floods_queued_read_anyway_while_sends_go_back_to_back() -> None:
    # A send elsewhere that stays urgent (input and prompt every 20 ms for 0.8 s, an agent's sends back to back)
    # holds the queued floods FLOOD_HOLD_S at most in a row: then each gets a turn before they wait again.
    async def main() -> list[int]:
        sender = Pty()
        try:
            async with writing_floods(3) as floods:
                await until(lambda: all(pty.channel._awaiting for pty in floods), message="the floods in the queue")
                sender.channel.send_began()
                before = [pty.channel.received for pty in floods]
                for _ in range(40):  # the sender's session urgent throughout
                    sender.channel.write(b"x")
                    os.write(sender.program, b"$ ")
                    await asyncio.sleep(0.02)
                advanced = [pty.channel.received - start for pty, start in zip(floods, before, strict=True)]
                sender.channel.send_ended()
                await until(lambda: all(p.channel.received >= FLOOD_BYTES for p in floods), message="the floods after")
                return advanced
        finally:
            sender.close()

    advanced = run(main)
    assert all(advanced), advanced
