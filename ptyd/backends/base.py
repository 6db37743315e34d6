"""The seam between PtyService and the backends (PtyBackend / PtyBackendSession in the harness's vocabulary).

A backend owns how one registered session type starts and detects readiness. The service publishes the
returned session only after setup succeeded, then owns ids, authorization and cleanup; the session owns its
terminal state, scrollback, its one active send and the quiescence of its captured process tree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ptyd import protocol as p
from ptyd.backends.recording.recorder import NO_RECORDING, NoRecording
from ptyd.backends.session_state import SessionState
from ptyd.config import SandboxProfile


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    session_id: str
    name: str | None
    argv: list[str] | None
    cwd: str | None
    env: dict[str, str]
    cols: int
    rows: int
    timeout_s: float
    idle_s: float
    sandbox: str = "none"  # the profile's name
    profile: SandboxProfile | None = None  # None: no sandbox, no limits
    agent: str = ""  # the owning agent's name (its id when it has none): its sessions share the aggregate limits
    agent_profile: SandboxProfile | None = None  # the agent's own profile, whose agent_* limits those are
    others: tuple[str, ...] = ()  # other agents' workspaces, hidden from a sandboxed session
    roots: tuple[str, ...] = ()  # where the operator lets this agent's sandboxed sessions write (sandbox_roots)
    scratch: str = ""  # this agent's scratch directory: where they write when the cwd is not under a root
    scratch_base: str = ""  # every agent's scratch directory is under it
    # The workspaces this agent used, once it has used as many as it may (sandbox_workspaces_per_agent): a new one
    # is refused. None: it may use another.
    used: frozenset[str] | None = None
    recording: NoRecording = NO_RECORDING  # recorded from its first byte (terminal_open's record)


@dataclass(frozen=True, slots=True)
class SendRequest:
    input: str
    timeout_s: float
    idle_s: float
    max_bytes: int
    request_key: str | None
    keys: str = ""  # named keys' bytes, pressed once the program took ``input`` (see session/keys_after.py)
    until: re.Pattern[str] | None = None  # named wait: settle when a rendered line matches
    until_stable_s: float | None = None  # named wait: settle once the screen was unchanged this long
    compact: bool = False  # output economy in the viewport and terminal_output
    join_wrapped: bool = False  # logical lines in the viewport and terminal_output
    until_done: bool = False  # silence does not end the wait: only readiness, an exit, a named wait or the timeout
    follow_command: bool = False  # ...nor while a shell command runs (an empty send waits for the pending command)
    by_owner: bool = True  # from the session's owner: only its results move the agent's unread cursor
    installs_integration: bool = False  # terminal_integrate's line: it installs the marks, no command of the agent's


class SendOperation(Protocol):
    """One send (PtySendOperation): exactly one may be active per session."""

    id: str

    @property
    def done(self) -> bool: ...
    async def result(self) -> p.SendResult: ...


class PtyBackendSession(Protocol):
    motd: str
    type: str
    name: str | None
    workspace: str  # where a sandboxed session may write ("" unsandboxed): other agents' sandboxes must not see it

    @property
    def pid(self) -> int | None: ...
    @property
    def cgroup(self) -> str | None: ...

    open_wait_reason: p.WaitReason
    sandbox_note: str | None  # why an agent's session runs unsandboxed though its default asks for a sandbox

    def status(self) -> p.SessionStatus: ...
    def info(self, owner: str, owner_name: str | None) -> p.SessionInfo: ...
    async def screen(self) -> p.TerminalScreenResult: ...
    async def screenshot(self, fonts: tuple[tuple[str, ...], tuple[str, ...]], size: int) -> p.TerminalScreenshotResult:
        """The screen as a PNG (terminal_screenshot), in ``size``-pixel cells of the first of ``fonts[0]`` found,
        characters it lacks in the first of ``fonts[1]`` that has them."""
        ...

    def start_send(self, request: SendRequest) -> SendOperation: ...
    async def output(self) -> p.TerminalOutputResult: ...
    async def wait(
        self, timeout_s: float | None, follow: SendRequest, operation_id: str | None = None
    ) -> p.TerminalWaitResult:
        """The active send's result, or ``operation_id``'s; with none active and the last one given to the agent,
        a wait-only send (``follow``) for what the session does next."""
        ...

    def cancel(self) -> p.TerminalCancelResult: ...
    def integration_input(self) -> str: ...
    def key_input(self, keys: list[str]) -> str: ...
    def set_listener(
        self, listener: Callable[[p.TerminalEvent], None] | None, output: bool, screen: bool = False
    ) -> None:
        """Where the session's events go (None: nowhere), and whether output and screen events are wanted."""
        ...

    recording: NoRecording

    def set_recording(self, recording: NoRecording) -> None:
        """Start (a Recording) or stop (NO_RECORDING) recording; the previous recording is closed."""
        ...

    async def read(
        self, start_line: int | None, max_lines: int, max_bytes: int, *, join_wrapped: bool = False
    ) -> p.TerminalReadResult: ...
    def signal(self, signum: int) -> p.TerminalSignalResult: ...
    def resize(self, cols: int, rows: int) -> None: ...
    async def close(self, reason: str) -> int: ...

    # Continuity: what a handover or a crash needs of a session (continuity/).
    @property
    def master_fd(self) -> int: ...
    def save_mark(self) -> tuple[object, ...]:
        """Changes whenever what ``to_state("saved")`` writes does: the saved state is taken again only then."""
        ...

    def to_state(self, owner: str, depth: Literal["handover", "saved", "listing"] = "handover") -> SessionState: ...
    def pause_floods(self) -> None:
        """A handover's pre-flight runs: stop reading output the program writes in bulk (``release`` resumes)."""
        ...

    async def quiesce(self) -> None:
        """A handover is next: hold the session, and wait until what ``to_state("handover")`` writes is exact."""
        ...

    def release(self) -> None:
        """A handover that held the session failed: carry on."""
        ...

    def kill_now(self) -> None:
        """The daemon stops for good and nothing keeps the PTYs: end the process tree at once."""
        ...


class PtyBackend(Protocol):
    """Replaceable provider for one session type, selected by ``terminal_open``'s ``type``."""

    type: str

    async def spawn(self, spec: SpawnSpec) -> PtyBackendSession:
        """Create an unpublished, ready session, or raise after cleaning up what was partly created."""
        ...

    def adopt(self, state: SessionState, master: int, slave: int, *, child: bool) -> PtyBackendSession:
        """The live session ``state`` describes, on its PTY (after a handover or a crash). ``child``: the program
        is this process's child (an exec kept the pid)."""
        ...
