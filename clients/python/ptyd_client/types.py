"""Result types of every ptyd RPC as the daemon sends them: JSON objects, typed as ``TypedDict``.

Generated from the daemon's OpenRPC document by ``python -m ptyd.rpc.codegen_py``: do not edit, regenerate.
A test fails when this file and the daemon's wire types (``ptyd/protocol.py``) disagree.
"""

from typing import Final, Literal, TypeAlias, TypedDict


class AgentRegisterResult(TypedDict, total=False):
    agent_id: str
    token: str
    """A daemon-minted secret of 256 bits; keep it private."""
    proven: bool
    """The key proved the name (false without a key, or with a wrong one)."""


class AgentReleaseResult(TypedDict):
    closed_sessions: int


class AgentInfo(TypedDict):
    agent_id: str
    name: str | None
    """The display name given to agent_register."""
    sessions: int
    """How many sessions the agent owns now."""
    idle_ms: int
    """Since the agent's last call; at agent_idle_timeout_ms the daemon releases it."""


class AgentListResult(TypedDict):
    agents: list[AgentInfo]


class Running(TypedDict):
    """The top-level program is alive."""

    kind: Literal["running"]


class Exited(TypedDict):
    """The top-level program has exited; ``signal`` names the signal that killed it, if one did."""

    kind: Literal["exited"]
    exit_code: int | None
    signal: str | None


SessionStatus: TypeAlias = Running | Exited


WaitReason: TypeAlias = Literal["inferred_idle", "matched", "session_exit", "stable", "stdin_read", "timeout"]
"""Why one send returned: the foreground group blocked reading the terminal (``stdin_read``), no output for
``idle_ms`` (``inferred_idle``), ``timeout_ms`` elapsed (``timeout``), or the session's top-level program
exited (``session_exit``). Only ``session_exit`` says that anything exited. A send that named a wait can
also return ``matched`` (its ``until`` pattern matched a line: see ``match``) or ``stable`` (the screen
stayed unchanged for ``until_stable_ms``); only such a send returns them, so a client that never names a
wait never sees them.
"""


class Foreground(TypedDict):
    """The terminal's foreground process group, as read from the tty when the result was made."""

    pid: int
    """A process of the group (its leader when alive)."""
    pgid: int
    name: str
    """The process's command name (/proc comm)."""


EnvProfile: TypeAlias = Literal["agent", "human"]
"""The environment a session's program starts with: ``agent`` adds variables that keep tools from paging,
prompting or opening editors; ``human`` adds none (a person's own shell). Not the sandbox profile.
"""


class TerminalOpenResult(TypedDict, total=False):
    session_id: str
    name: str | None
    type: str
    pid: int | None
    motd: str
    """Bounded rendered screen once the program was ready."""
    status: SessionStatus
    cols: int
    rows: int
    wait_reason: WaitReason
    alt_screen: bool
    foreground: Foreground | None
    sandbox: str
    """The sandbox profile the session runs under ('none': no sandbox)."""
    env_profile: EnvProfile | None
    """The environment preset the program was started with."""
    sandbox_note: str | None
    """Set when this agent's session runs unsandboxed only because no sandbox can be made here (its profile is
    sandbox_default 'auto': 'workspace' where bubblewrap works): why, e.g. bubblewrap is not installed.
    """


class LineRange(TypedDict):
    """Transcript lines ``[start_line, end_line)`` that a viewport covers."""

    start_line: int
    end_line: int


ReadyBasis: TypeAlias = Literal["kernel", "relay_quiet", "shell_integration"]
"""How a ``stdin_read`` settle was judged: ``kernel`` (the innermost foreground group blocked reading its
terminal, asked of the kernel, through local relays such as sudo or script too), ``shell_integration`` (the
shell's own prompt mark, authenticated by the session's secret, e.g. from a shell behind ssh with the
integration installed), or ``relay_quiet`` (an opaque relay such as ssh is in front; the far side drew a
prompt and went quiet: a judgement, not a fact).
"""


class SendMatch(TypedDict):
    """What an ``until`` pattern matched."""

    text: str
    """The matched text (group 0)."""
    line: int | None
    """Transcript line of the match (for terminal_read); null on the alternate screen."""


class ListeningPort(TypedDict):
    """A TCP port a process of the session listens on (read from /proc when the result was made)."""

    port: int
    address: str
    """The bound address: 0.0.0.0 or :: for every interface, 127.0.0.1, ::1, ..."""
    pid: int
    """The process holding the listening socket."""


class CommandOutcome(TypedDict):
    """A shell command that ended (shell integration: bash, zsh and fish sessions ptyd starts, or a shell it
    was installed into), reported once, in the first result the agent is given after it ended. A line the
    shell read and did not run ends too: a syntax error (status 2 in bash, 1 in zsh, 123 in fish), or a
    command left incomplete at the continuation prompt and abandoned with Ctrl-C (130).
    """

    command: str | None
    """The line a send typed that started it; null when no send typed it (or it cannot be told)."""
    exit_code: int | None
    """Its exit status ($?)."""
    cwd: str | None
    """The shell's working directory after it."""
    duration_ms: int
    """From the shell starting it to its next prompt."""


class RunningCommand(TypedDict):
    """The shell command still running when a result was made (shell integration): a later call reports its
    end.
    """

    command: str | None
    """The line a send typed that started it, when known."""
    running_ms: int
    """How long it has run."""


class SendResult(TypedDict, total=False):
    """The settled result of one send (PtySendResult)."""

    operation_id: str
    viewport: str
    """Rendered terminal delta since the previous result the agent was given (what the session printed between
    calls first, see earlier_lines), ending with the cursor line; the visible screen while the alternate
    screen is active. Bounded by max_bytes, head and tail kept, the cut marked.
    """
    wait_reason: WaitReason
    session_status: SessionStatus
    truncated: bool
    """Output was cut from the viewport or dropped from retained scrollback."""
    alt_screen: bool
    foreground: Foreground | None
    lines: LineRange
    """Transcript lines the viewport covers (for terminal_read)."""
    exit_code: int | None
    """Exit status of the last shell command that finished since the previous result the agent was given:
    during this send, or between calls (shell integration: bash, zsh and fish sessions ptyd starts, or a
    shell it was installed into); null when none finished or it is unknown. Each one: commands.
    """
    cwd: str | None
    """The shell's working directory when the send settled at its prompt; else null."""
    password_prompt: bool
    """The program waits for input with echo off (a password or passphrase prompt): ask a human, never guess.
    """
    ready_basis: ReadyBasis | None
    """For wait_reason stdin_read: how readiness was judged (see ReadyBasis)."""
    relay: str | None
    """The opaque relay in the foreground (ssh, docker, ...) when readiness was judged through one."""
    unread_input: int
    """Bytes of this session's input not yet read by the program when the send settled (0: all taken)."""
    oom_killed: bool
    """During this send a memory limit (the session's, or its agent's sessions' together) made the kernel kill
    one of the session's processes.
    """
    pids_limited: bool
    """During this send a fork in the session was refused at a process limit (the session's, or its agent's
    sessions' together).
    """
    sandbox: str
    """The sandbox profile the session runs under ('none': no sandbox)."""
    match: SendMatch | None
    """For wait_reason matched: what until matched, and on which line."""
    listening: list[ListeningPort]
    """TCP ports the session's processes listen on when the send settled."""
    compacted: int
    """With compact: lines of the viewport folded into a count or a final state (see terminal_read)."""
    commands: list[CommandOutcome]
    """Every shell command that ended since the previous result the agent was given, oldest first."""
    running: RunningCommand | None
    """The shell command still running as this result was made (after timeout or inferred_idle):
    terminal_wait, or an empty send, waits for its end and reports it.
    """
    earlier_lines: int
    """Lines at the head of the viewport that the session printed after the previous result the agent was
    given and before this call: output no earlier result showed.
    """
    continuation: str | None
    """The shell waits at its continuation prompt for the rest of a command (an open quote, bracket or block,
    a trailing backslash): the lines of it read so far, as sent. The next send continues that command; keys
    ['C-c'] abandons it. Null when the shell waits for a new command (or cannot tell: bash, zsh and fish
    report it).
    """
    lost_lines: int
    """Lines of output lost in a daemon crash since the previous result (printed after the last saved state);
    the transcript marks the gap with a line of its own.
    """


class SendStarted(TypedDict):
    """A background send was started (``wait=false``)."""

    operation_id: str


class TerminalOutputResult(TypedDict):
    operation_id: str | None
    output: str
    """Completed lines since the previous call, each ending in a newline; once done, also the cursor line (the
    prompt). Consecutive outputs concatenate to the transcript.
    """
    done: bool
    result: SendResult | None


class TerminalWaitResult(TypedDict):
    operation_id: str | None
    done: bool
    """False: still running when the wait gave up."""
    result: SendResult | None


class TerminalCancelResult(TypedDict, total=False):
    cancelled: bool
    """False when no send was active (it had settled)."""
    interrupted: bool
    """A SIGINT went to the verified foreground group (or Ctrl-C was pressed for it: key): the active send's
    command, or, with no send active, what the last send left running in front (it ended in timeout or
    inferred_idle).
    """
    pgid: int | None
    """The process group interrupted."""
    signal: str | None
    """The signal sent (SIGINT); None when a key was pressed instead (key)."""
    program: str | None
    """The program in front that was interrupted."""
    key: str | None
    """The key pressed instead of a signal (C-c), where the terminal reads Ctrl-C as a key: a relay in front
    (script, ssh, tmux) forwards it to its program's terminal, a raw-mode program (jshell, vim) takes it.
    Since protocol 9.
    """
    message: str
    """What the cancel did, in a sentence."""
    hint: str | None
    """When there was nothing to interrupt: what to do instead."""


class TerminalReadResult(TypedDict):
    lines: list[str]
    start_line: int
    next_line: int
    """start_line of the following page."""
    first_retained_line: int
    """Lines before this one were dropped by the scrollback bound."""
    total_lines: int
    truncated: bool
    """The page stopped early at max_bytes, or started before the retained lines."""


class TerminalScreenResult(TypedDict):
    lines: list[str]
    """Every row of the screen, top to bottom, trailing blanks removed."""
    cursor_x: int
    cursor_y: int
    cursor_visible: bool
    alt_screen: bool
    title: str
    """The window title the program set (OSC 0/2), or empty."""


class TerminalScreenshotResult(TypedDict):
    png: str
    """The PNG image, base64."""
    width: int
    """Pixels."""
    height: int
    """Pixels."""
    cols: int
    rows: int
    cursor_x: int
    cursor_y: int
    cursor_visible: bool
    alt_screen: bool
    engine: str
    """The terminal engine whose cells were drawn ('ghostty' or 'pyte')."""


class TerminalSignalResult(TypedDict):
    delivered: bool
    pgid: int
    signal: str


class SessionLimits(TypedDict, total=False):
    """A session's resource limits, from its sandbox profile; null: unlimited."""

    memory_mib: int | None
    pids_max: int | None
    cpu_percent: int | None
    """CPU time as a percentage of one CPU."""


class SessionInfo(TypedDict, total=False):
    """What a session is and what it is doing now."""

    session_id: str
    name: str | None
    type: str
    pid: int | None
    status: SessionStatus
    cols: int
    rows: int
    alt_screen: bool
    """True while a full-screen program (vim, less) uses the alternate screen."""
    foreground: Foreground | None
    busy: bool
    """True while a send is active."""
    operation_id: str | None
    """The active (or last settled) send operation."""
    created_at_ms: int
    """Unix time in milliseconds."""
    total_lines: int
    """Lines in the transcript so far (scrollback plus screen)."""
    owner: str
    """agent_id of the owning agent."""
    owner_name: str | None
    """The owning agent's display name."""
    password_prompt: bool
    """The foreground program waits for input with echo off (a password prompt): ask a human."""
    engine: str
    """The terminal engine rendering this session: "ghostty" or "pyte"."""
    engine_note: str | None
    """Why the session runs on another engine than the configured one (a crash of the native one)."""
    sandbox: str
    """The sandbox profile the session runs under ('none': no sandbox)."""
    limits: SessionLimits | None
    """Its resource limits, when the profile sets any."""
    oom_killed: bool
    """A memory limit (the session's, or its agent's sessions' together) made the kernel kill a process of
    this session.
    """
    pids_limited: bool
    """A fork of this session was refused at a process limit (its own, or its agent's sessions' together)."""
    listening: list[ListeningPort]
    """TCP ports the session's processes listen on (a dev server, a database)."""
    recording: bool
    """The session is being recorded (terminal_record, terminal_recordings)."""


class TerminalListResult(TypedDict):
    sessions: list[SessionInfo]


class TerminalCloseResult(TypedDict):
    closed: bool
    """False when the session was already closed."""
    killed: int
    """Processes signalled to end them, the top-level program included."""


class TerminalSubscribeResult(TypedDict):
    subscription_id: str


class TerminalUnsubscribeResult(TypedDict):
    unsubscribed: bool
    """False when the subscription was unknown or already ended."""


class TerminalRecordResult(TypedDict):
    session_id: str
    recording: bool
    """Whether the session is recorded now."""
    path: str | None
    """The part being written, when recording."""


class RecordingInfo(TypedDict):
    """One part of a session's recording: a whole asciicast v2 file."""

    session_id: str
    part: int
    """1 for the first part; a session's parts continue from one recording to the next."""
    path: str
    bytes: int
    started_at_ms: int
    """Unix time of the part's start, in milliseconds (second precision)."""
    cols: int
    rows: int
    title: str
    active: bool
    """The daemon is writing this part now."""


class TerminalRecordingsResult(TypedDict):
    directory: str
    """The recordings directory."""
    recordings: list[RecordingInfo]


class EngineWorkersInfo(TypedDict, total=False):
    """What the engine workers went through since the daemon started, and where they stand."""

    workers: int
    """Workers started and serving now."""
    pids: list[int]
    """Their process ids (the spare that replaces one at once is not among them)."""
    rss_bytes: list[int]
    """Their resident memory, each."""
    crashes: int
    """Workers that died after starting (hangs and kills included); each was replaced."""
    hangs: int
    """...of which killed by their watchdog (engine_worker_stall_ms)."""
    kills: int
    """...of which killed from outside (SIGKILL, SIGTERM): no session is suspected."""
    start_failures: int
    """Workers that died before they were ready: retried with a backoff."""
    restarts: int
    """Workers started to replace another."""
    recycled: int
    """Workers replaced because their memory passed engine_worker_rss_mb."""
    quarantined: int
    """Sessions moved to the pyte engine for good: their own output, replayed alone, failed the engine."""
    paused: str | None
    """Why sessions render in the daemon on pyte right now (workers die while starting), while a worker is
    tried again with a backoff; none: they render in workers.
    """


class SandboxNetworkInfo(TypedDict, total=False):
    """The network a sandboxed session whose profile has one gets (sandbox_network, docs/sandbox.md)."""

    mode: str
    """'pasta': a network namespace of its own, outbound access through pasta, the machine's loopback out of
    reach; 'host': the machine's (sandbox_network = "host", or "auto" where pasta cannot).
    """
    spares: int
    """Namespaces made ahead and ready for the next opens."""
    taken: int
    """Opens that took a namespace since the daemon started..."""
    made_ahead: int
    """...of which found one made ahead (the others waited for pasta)."""


class DaemonInfoResult(TypedDict, total=False):
    version: str
    protocol_version: int
    pid: int
    uptime_ms: int
    sessions: int
    agents: int
    backend_types: list[str]
    containment: str
    """'cgroup' or 'subreaper': how close finds every process of a session."""
    handovers: int
    """How many times the sessions were handed to a newly started daemon (SIGUSR2, ptyctl upgrade)."""
    handover_error: str | None
    """Why the last handover was refused (the daemon kept serving), if it was."""
    sandbox: str | None
    """How sandboxed sessions are made ('bwrap'), or why they cannot be on this system."""
    limits: str | None
    """Which cgroup hierarchy enforces each resource limit (or none)."""
    sandbox_default: str | None
    """The profile an agent the config names no profile for gets now: sandbox_default, with 'auto' resolved
    ('workspace' where a sandbox can be made, else 'none').
    """
    sandbox_warning: str | None
    """Set when agents' sessions run unsandboxed because sandbox_default is 'auto' and no sandbox can be made
    here: why, and what to install.
    """
    crash_continuity: str | None
    """Whether the sessions would outlive a crash of this daemon right now: 'systemd' (its fd store holds
    their terminals), 'keeper' (a ptyd keeper does), or 'none: ' and why not (fd_keeper = false, the keeper
    died and another is being started).
    """
    engine_workers: EngineWorkersInfo | None
    """The engine workers' record (none when engines run in the daemon)."""
    sandbox_network: SandboxNetworkInfo | None
    """Sandboxed sessions' network (protocol 7)."""


EventKind: TypeAlias = Literal["input_wait", "output", "screen", "send_settled", "session_closed", "session_exit"]


class TerminalEvent(TypedDict, total=False):
    """Params of the ``terminal_event`` notification (a JSON-RPC request without id, sent by the daemon).

    ``screen``: the visible screen changed (for subscriptions with ``screen``; no payload). ``send_settled``:
    a send (foreground or background) settled; ``result`` holds its SendResult. ``input_wait``: outside any
    send, the program started waiting for input; ``password_prompt`` says whether with echo off.
    ``session_exit``: the top-level program exited; ``status`` holds how. ``session_closed``: the session was
    closed and forgotten. ``output``: completed transcript lines (each ending in a newline) covering
    ``lines``; sent at most every few tens of milliseconds, each bounded in size (``truncated`` when lines
    were left out).
    """

    subscription_id: str
    session_id: str
    seq: int
    """Per-subscription sequence number, from 1."""
    kind: EventKind
    operation_id: str | None
    result: SendResult | None
    password_prompt: bool | None
    status: SessionStatus | None
    output: str | None
    lines: LineRange | None
    truncated: bool


METHODS: Final = (
    "agent_register",
    "agent_release",
    "agent_list",
    "terminal_open",
    "terminal_send",
    "terminal_output",
    "terminal_wait",
    "terminal_cancel",
    "terminal_read",
    "terminal_screen",
    "terminal_screenshot",
    "terminal_signal",
    "terminal_resize",
    "terminal_status",
    "terminal_list",
    "terminal_close",
    "terminal_integrate",
    "terminal_subscribe",
    "terminal_unsubscribe",
    "terminal_record",
    "terminal_recordings",
    "daemon_info",
)
"""Every RPC method the daemon serves besides ``rpc.discover``."""

RETRY_SAFE: Final = frozenset(
    {
        "agent_list",
        "terminal_wait",
        "terminal_read",
        "terminal_screen",
        "terminal_screenshot",
        "terminal_resize",
        "terminal_status",
        "terminal_list",
        "terminal_close",
        "terminal_record",
        "terminal_recordings",
        "daemon_info",
        "rpc.discover",
    }
)
"""Methods safe to send again after the connection dropped mid-call (OpenRPC ``x-retry-safe``)."""

ERROR_CODES: Final[dict[str, int]] = {
    "parse_error": -32700,
    "invalid_request": -32600,
    "empty_batch": -32600,
    "batch_too_large": -32600,
    "frame_too_large": -32600,
    "method_not_found": -32601,
    "invalid_params": -32602,
    "internal": -32603,
    "unauthorized": -32001,
    "session_not_found": -32002,
    "session_busy": -32003,
    "session_exited": -32004,
    "backend_not_found": -32005,
    "spawn_failed": -32006,
    "limit_exceeded": -32007,
    "sandbox_refused": -32018,
    "sandbox_unavailable": -32019,
    "operation_lost": -32030,
    "workspace_refused": -32027,
    "extra_missing": -32031,
}
"""``error.data.kind`` of every error the daemon reports (JSON-RPC's own first) and its code."""
