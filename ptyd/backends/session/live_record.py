"""A session's live record: what a daemon crash must not take with it, kept where the daemon's death cannot reach.

The state file is written every few seconds; between two writes a send may start (with a request_key the client
will retry with) and output may scroll by. A small file per session in the runtime directory (tmpfs), mapped into
the daemon's memory, takes both as plain stores: no system call on the send or the output path, and the kernel
keeps the pages when the daemon is SIGKILLed. A daemon adopting the session after a crash reads it: a send that
was in flight is driven to its result, a retried key is never typed twice (``operation_lost`` when its result is
gone), and the lines the crash lost are counted and marked.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import final

import msgspec

from ptyd.backends.session_state import OpState

MAGIC = 0x7074_7964_6C72_0001  # "ptydlr" and the layout's version
HEADER = struct.Struct("<QQQQ")  # magic, bytes read from the PTY, transcript lines, sends recorded
HEADER_SIZE = 64
SLOTS = 64  # the latest sends: as many as request_keys_remembered's default
SLOT_SIZE = 1024
SLOT = struct.Struct("<HB")  # the encoded send's length, settled
SIZE = HEADER_SIZE + SLOTS * SLOT_SIZE
DIRECTORY = "records"

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(OpState)


@dataclass(frozen=True, slots=True)
class RecordedSend:
    op: OpState | None  # None: too large to keep whole (only its id and key are known)
    op_id: str
    request_key: str | None
    settled: bool
    slot: int = 0


@dataclass(frozen=True, slots=True)
class RecordRead:
    """What a crashed daemon's record held."""

    received: int
    total_lines: int
    sends: list[RecordedSend]  # oldest first
    count: int = 0  # sends ever recorded: the ring's position


@final
class LiveRecord:
    def __init__(self, path: Path) -> None:
        self.path: Path | None = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            # Every page allocated now: a store into a sparse page of a full tmpfs is a SIGBUS, not an error.
            os.posix_fallocate(fd, 0, SIZE)
            self._map: mmap.mmap | None = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        self._sends = 0
        self._slots: dict[str, int] = {}  # op id -> its slot
        self.progress(0, 0)

    @classmethod
    def disabled(cls) -> LiveRecord:
        """A record that keeps nothing (a daemon without a runtime directory for records: in-process tests)."""
        record = cls.__new__(cls)
        record.path, record._map, record._sends, record._slots = None, None, 0, {}
        return record

    @classmethod
    def reopen(cls, path: Path) -> tuple[LiveRecord, RecordRead | None]:
        """The record a previous daemon kept (what it held), carried on by this one."""
        before = read(path)
        record = cls(path)
        if before is not None:  # the ring goes on where it was, and its sends can still be settled
            record._sends = before.count
            record._slots = {send.op_id: send.slot for send in before.sends}
            record.progress(before.received, before.total_lines)
        return record, before

    def progress(self, received: int, total_lines: int) -> None:
        """Bytes read from the PTY and lines in the transcript so far (a crash loses what is after the save)."""
        if self._map is not None:
            HEADER.pack_into(self._map, 0, MAGIC, received, total_lines, self._sends)

    def started(self, op: OpState) -> None:
        """A send is about to write its input: recorded before the write, so a crash after it knows the key."""
        if self._map is None:
            return
        data = _encoder.encode(msgspec.structs.replace(op, capture_lines=[], result=None))
        if len(data) > SLOT_SIZE - SLOT.size:
            data = _encoder.encode({"id": op.id, "request_key": op.request_key})
        slot = self._sends % SLOTS
        offset = HEADER_SIZE + slot * SLOT_SIZE
        SLOT.pack_into(self._map, offset, len(data), 0)
        self._map[offset + SLOT.size : offset + SLOT.size + len(data)] = data
        self._sends += 1
        struct.pack_into("<Q", self._map, 24, self._sends)
        self._slots[op.id] = slot
        while len(self._slots) > SLOTS:
            del self._slots[next(iter(self._slots))]

    def settled(self, op_id: str) -> None:
        slot = self._slots.get(op_id)
        if self._map is not None and slot is not None:
            self._map[HEADER_SIZE + slot * SLOT_SIZE + 2] = 1

    def close(self, *, remove: bool = True) -> None:
        """The session is closed (``remove``), or handed to a new daemon, which maps it again."""
        if self._map is not None:
            self._map.close()
            self._map = None
        if remove and self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()


def read(path: Path) -> RecordRead | None:
    """The record at ``path``, as the daemon that kept it left it; None if there is none (or it is not one)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) != SIZE:
        return None
    magic, received, total_lines, count = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        return None
    sends: list[RecordedSend] = []
    for n in range(max(0, count - SLOTS), count):
        offset = HEADER_SIZE + (n % SLOTS) * SLOT_SIZE
        length, settled = SLOT.unpack_from(data, offset)
        raw = data[offset + SLOT.size : offset + SLOT.size + length]
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            sends.append(_recorded(raw, bool(settled), n % SLOTS))
    return RecordRead(received, total_lines, sends, count)


def _recorded(raw: bytes, settled: bool, slot: int) -> RecordedSend:
    try:
        op: OpState | None = _decoder.decode(raw)
    except msgspec.ValidationError:  # kept by id and key only
        op = None
    ident = msgspec.json.decode(raw, type=dict[str, object])
    op_id, key = ident.get("id"), ident.get("request_key")
    if not isinstance(op_id, str) or not (key is None or isinstance(key, str)):
        raise msgspec.ValidationError("not a recorded send")
    return RecordedSend(op, op_id, key, settled, slot)


def records_directory(runtime: Path) -> Path:
    """The records' directory in the daemon's runtime directory (0700, as the directory it is in)."""
    path = runtime / DIRECTORY
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def sweep(directory: Path, keep: set[str]) -> None:
    """Remove the records of sessions that are gone (closed by a crash, or not adopted)."""
    with contextlib.suppress(OSError):
        for entry in directory.iterdir():
            if entry.name not in keep:
                with contextlib.suppress(OSError):
                    entry.unlink()


def lost_marker(lines: int, lost_bytes: int) -> bytes:
    """The line that marks a crash's gap in the transcript (fed to the terminal where the lost output was)."""
    text = f"[ptyd: {lines} lines ({lost_bytes} bytes) of output were lost in a daemon crash here]"
    return b"\r\n" + text.encode() + b"\r\n"
