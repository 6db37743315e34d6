"""A local session as data: what the state document carries of it across a handover or a crash.

Written and read by the session itself (``LocalSession.to_state`` / ``LocalSession.from_state``), so a new field
of the session is added here and there, nowhere else; the document (``continuity.document``) only holds them.
"""

from __future__ import annotations

import msgspec

from ptyd import protocol as p
from ptyd.config import SandboxProfile
from ptyd.terminal.replay import TerminalState

SAVED_LINES = 2000  # transcript lines kept in the state file under systemd (it lives in memory, in tmpfs)


class OpState(msgspec.Struct, kw_only=True):
    """One send: in flight (its drive restarts in the next daemon) or settled (its result is kept)."""

    id: str
    timeout_s: float
    idle_s: float
    max_bytes: int
    request_key: str | None
    started: float  # CLOCK_MONOTONIC, the same clock in every process of the machine
    deadline: float
    anchor: int
    output_line: int
    capture_lines: list[str]
    capture_room: int
    capture_end: int
    exit_code: int | None = None
    taken: bool = True  # the program was seen to take the input
    result: bytes | None = None  # the settled SendResult, as JSON
    keys: str = ""  # named keys still to press once the program took the input (their bytes, latin-1)
    until: str | None = None  # a named wait's pattern (protocol 4)
    until_stable_s: float | None = None
    typed: bool = True  # the named wait's send wrote input (its typed line is not searched)
    compact: bool = False
    join_wrapped: bool = False
    view_start: int | None = None  # protocol 5: where its result's output starts (None: at the anchor)
    given: bool = True  # its result was handed to the agent (a state from before protocol 5: as if it was)
    until_done: bool = False
    follow_command: bool = False


class RunningState(msgspec.Struct, array_like=True):
    """A command a shell of the session runs: the session's own shell (depth 0) or one terminal_integrate set up."""

    depth: int
    command: str | None
    started: float  # CLOCK_MONOTONIC


class TypedState(msgspec.Struct, array_like=True):
    """A line a send typed that no shell has read yet."""

    text: str
    typed_at: float  # CLOCK_MONOTONIC
    can_start: bool  # not empty, not a comment: it starts a command at a prompt


class SessionState(msgspec.Struct, kw_only=True):
    session_id: str
    type: str
    name: str | None
    pid: int
    starttime: int | None
    cgroup: str | None
    owner: str  # agent id
    child: bool = True  # the program is the daemon's own child (not after an adoption following a crash)
    tty_rdev: int = 0
    master_fd: int = -1  # -1 in the state file: the fds come from systemd's store by name
    slave_fd: int = -1
    shell_key: str = ""
    nested: int = 0  # shells terminal_integrate set up, each signing with ``<shell_key>.<n>``
    created_at_ms: int = 0
    motd: str = ""
    open_wait_reason: str = "timeout"
    command_running: bool = False
    prompt_cwd: str | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    exited: bool = False
    outbox: bytes = b""  # input written by the caller, not yet taken by the PTY
    terminal: TerminalState | None = None
    active: OpState | None = None
    last: OpState | None = None
    keyed: list[OpState] = msgspec.field(default_factory=list)  # settled ops remembered by request_key
    sandbox: str = "none"  # the profile it was opened with, as it was then (a reload does not change it)
    profile: SandboxProfile | None = None
    limit_paths: list[str] = msgspec.field(default_factory=list)  # its limit cgroups (v1 directories, a v2 leaf)
    workspace: str = ""
    companions: list[int] = msgspec.field(default_factory=list)  # its sandbox's helpers in its cgroup (pasta)
    # The agent's view (protocol 5): its unread line, the command ends not yet reported, lines lost in a crash.
    view_line: int | None = None
    view_commands: list[p.CommandOutcome] = msgspec.field(default_factory=list)
    lost_lines: int = 0
    # ...whether its shells send marks, the command each runs (a state from before these: the bool alone), the
    # lines typed and not yet read by a shell, and those it read of a command it waits to complete.
    view_marked: bool = False
    view_running: list[RunningState] = msgspec.field(default_factory=list)
    view_typed: list[TypedState] = msgspec.field(default_factory=list)
    view_partial: list[str | None] = msgspec.field(default_factory=list)
    lost_keys: dict[str, str] = msgspec.field(default_factory=dict)  # request keys a crash lost -> their op ids
    rendered_bytes: int = 0  # output bytes read and rendered when the state was taken (0: unknown)
    total_lines: int = 0  # transcript lines then
