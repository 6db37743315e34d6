"""The wire types of ptyd: the single source of truth for every request and response shape.

The method table (``ptyd.rpc.methods``), ``docs/protocol.md``, the ``rpc.discover`` OpenRPC document and the clients'
types all derive from these Structs. Field names are snake_case on the wire. Vocabulary follows the
TypeScript harness this daemon serves (PtyWaitReason, PtySessionStatus, PtySendResult, ...).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from ptyd.config import Config

DEFAULTS = Config()  # documented defaults come from the one place that sets them
# 2: exit_code, cwd, password_prompt, ready_basis, relay, unread_input; events. 3: send keys.
# 4: engine isolation, sandbox profiles, named waits, recordings (fields and methods added).
# 5: the agent's unread cursor: results carry what happened between calls (commands, earlier_lines, running,
#    lost_lines), until_done, terminal_wait follows a pending command, operation_lost.
# 6: sandboxed by default (sandbox_default "auto"): open's sandbox_note, daemon_info's sandbox_default and
#    sandbox_warning; terminal_screenshot (the screen as a PNG), the error kind extra_missing; daemon_info's
#    engine_workers (crashes, hangs, kills, restarts, recycled, quarantined, paused).
# 7: daemon_info's sandbox_network (a network namespace of its own by default, made ahead).
# 8: results report a line the shell read and did not run (a syntax error, an incomplete command abandoned) among
#    commands, and continuation: the lines of a command the shell waits to complete.
# 9: a cancel presses Ctrl-C where the terminal reads it as a key (a relay, a raw-mode program): its result's key.
PROTOCOL_VERSION = 9


def _d(text: str, *, min_length: int | None = None, max_length: int | None = None) -> Meta:
    """A field's description (it becomes the protocol docs), with length bounds for strings."""
    return Meta(description=text, min_length=min_length, max_length=max_length)


# ----------------------------------------------------------------------------------------------------------------
# Shared vocabulary
# ----------------------------------------------------------------------------------------------------------------

WaitReason = Literal["stdin_read", "inferred_idle", "timeout", "session_exit", "matched", "stable"]
"""Why one send returned: the foreground group blocked reading the terminal (``stdin_read``), no output for
``idle_ms`` (``inferred_idle``), ``timeout_ms`` elapsed (``timeout``), or the session's top-level program exited
(``session_exit``). Only ``session_exit`` says that anything exited. A send that named a wait can also return
``matched`` (its ``until`` pattern matched a line: see ``match``) or ``stable`` (the screen stayed unchanged for
``until_stable_ms``); only such a send returns them, so a client that never names a wait never sees them."""

ReadyBasis = Literal["kernel", "shell_integration", "relay_quiet"]
"""How a ``stdin_read`` settle was judged: ``kernel`` (the innermost foreground group blocked reading its
terminal, asked of the kernel, through local relays such as sudo or script too), ``shell_integration`` (the shell's
own prompt mark, authenticated by the session's secret, e.g. from a shell behind ssh with the integration
installed), or ``relay_quiet`` (an opaque relay such as ssh is in front; the far side drew a prompt and went quiet:
a judgement, not a fact)."""

EnvProfile = Literal["agent", "human"]
"""The environment a session's program starts with: ``agent`` adds variables that keep tools from paging,
prompting or opening editors; ``human`` adds none (a person's own shell). Not the sandbox profile."""

Token = Annotated[str, _d("Agent token from agent_register.", min_length=1, max_length=256)]
SessionId = Annotated[str, _d("Session id from terminal_open.", min_length=1, max_length=128)]
Cols = Annotated[int, Meta(ge=2, le=1000, description="Terminal width in cells.")]
Rows = Annotated[int, Meta(ge=2, le=500, description="Terminal height in cells.")]
TimeoutMs = Annotated[int, Meta(ge=0, le=3_600_000, description="Upper bound of the wait, in milliseconds.")]
IdleMs = Annotated[int, Meta(ge=1, le=3_600_000, description="Silence after which the wait settles as inferred_idle.")]
Name = Annotated[str, Meta(max_length=128)]
MaxBytes = Annotated[int, Meta(ge=256, le=4 * 1024 * 1024, description="UTF-8 byte bound of the returned viewport.")]


class Base(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


UNTIL_MAX = 1024  # characters of an ``until`` pattern: a bound on what one compiled regex can cost


class ListeningPort(Base, frozen=True):
    """A TCP port a process of the session listens on (read from /proc when the result was made)."""

    port: int
    address: Annotated[str, _d("The bound address: 0.0.0.0 or :: for every interface, 127.0.0.1, ::1, ...")]
    pid: Annotated[int, _d("The process holding the listening socket.")]


class SendMatch(Base, frozen=True):
    """What an ``until`` pattern matched."""

    text: Annotated[str, _d("The matched text (group 0).")]
    line: Annotated[int | None, _d("Transcript line of the match (for terminal_read); null on the alternate screen.")]


class CommandOutcome(Base, frozen=True):
    """A shell command that ended (shell integration: bash, zsh and fish sessions ptyd starts, or a shell it was
    installed into), reported once, in the first result the agent is given after it ended. A line the shell read
    and did not run ends too: a syntax error (status 2 in bash, 1 in zsh, 123 in fish), or a command left
    incomplete at the continuation prompt and abandoned with Ctrl-C (130)."""

    command: Annotated[
        str | None, _d("The line a send typed that started it; null when no send typed it (or it cannot be told).")
    ]
    exit_code: Annotated[int | None, _d("Its exit status ($?).")]
    cwd: Annotated[str | None, _d("The shell's working directory after it.")]
    duration_ms: Annotated[int, _d("From the shell starting it to its next prompt.")]


class RunningCommand(Base, frozen=True):
    """The shell command still running when a result was made (shell integration): a later call reports its end."""

    command: Annotated[str | None, _d("The line a send typed that started it, when known.")]
    running_ms: Annotated[int, _d("How long it has run.")]


class Running(Base, frozen=True, tag_field="kind", tag="running"):
    """The top-level program is alive."""


class Exited(Base, frozen=True, tag_field="kind", tag="exited"):
    """The top-level program has exited; ``signal`` names the signal that killed it, if one did."""

    exit_code: int | None
    signal: str | None


SessionStatus = Running | Exited


class Foreground(Base, frozen=True):
    """The terminal's foreground process group, as read from the tty when the result was made."""

    pid: Annotated[int, _d("A process of the group (its leader when alive).")]
    pgid: int
    name: Annotated[str, _d("The process's command name (/proc comm).")]


# ----------------------------------------------------------------------------------------------------------------
# Agents
# ----------------------------------------------------------------------------------------------------------------


class AgentRegisterParams(Base, frozen=True):
    """Register an agent and mint its token. The token authorizes every terminal_* call of that agent."""

    name: Annotated[Name | None, _d("Display name; never used for authorization.")] = None
    key: Annotated[
        Annotated[str, Meta(max_length=256)] | None,
        _d(
            "The registration key the operator issued for this name (`ptyd agent-key NAME`, the config's "
            "agent_keys): it proves the agent is that one, which then gets the name's own sandbox profile and "
            "writable roots where they are looser than the defaults. A name with a key, registered without it, "
            "is an anonymous agent with the defaults (see docs/sandbox.md)."
        ),
    ] = None


class AgentRegisterResult(Base, frozen=True):
    agent_id: str
    token: Annotated[str, _d("A daemon-minted secret of 256 bits; keep it private.")]
    proven: Annotated[bool, _d("The key proved the name (false without a key, or with a wrong one).")] = False


class AgentReleaseParams(Base, frozen=True):
    """Close every session of the agent (awaited, whole process trees) and revoke its token."""

    token: Token
    agent_id: Annotated[
        Name | None,
        _d(
            "With the operator token (ptyctl): the agent to release, from agent_list. An agent's own token may "
            "name only itself; another id is answered like one that does not exist."
        ),
    ] = None


class AgentReleaseResult(Base, frozen=True):
    closed_sessions: int


class AgentListParams(Base, frozen=True):
    """The registered agents: every one for the operator token (ptyctl), the caller alone for an agent's token."""

    token: Token


class AgentInfo(Base, frozen=True):
    agent_id: str
    name: Annotated[str | None, _d("The display name given to agent_register.")]
    sessions: Annotated[int, _d("How many sessions the agent owns now.")]
    idle_ms: Annotated[int, _d("Since the agent's last call; at agent_idle_timeout_ms the daemon releases it.")]


class AgentListResult(Base, frozen=True):
    agents: list[AgentInfo]


# ----------------------------------------------------------------------------------------------------------------
# Sessions
# ----------------------------------------------------------------------------------------------------------------


class TerminalOpenParams(Base, frozen=True):
    """Start a program on a new pseudo-terminal and return once it is ready for input."""

    token: Token
    type: Annotated[str, _d("Backend type: 'shell' (default argv: bash) or 'exec' (argv required).")] = "shell"
    name: Annotated[Name | None, _d("Owner-local display name.")] = None
    argv: Annotated[
        Annotated[list[Annotated[str, Meta(max_length=65_536)]], Meta(min_length=1, max_length=4096)] | None,
        _d("Program and arguments; for 'shell' it replaces the configured shell."),
    ] = None
    cwd: Annotated[
        Annotated[str, Meta(max_length=4096)] | None,
        _d("Working directory (default: the daemon's home directory)."),
    ] = None
    env: Annotated[
        Annotated[dict[str, Annotated[str, Meta(max_length=131_072)]], Meta(max_length=4096)] | None,
        _d("Variables added to the daemon's environment for this program."),
    ] = None
    profile: Annotated[
        Literal["agent"] | None,
        _d("The older spelling of env_profile='agent' (kept for clients of protocol 3)."),
    ] = None
    env_profile: Annotated[
        EnvProfile | None,
        _d(
            "The environment preset: 'agent' adds variables that keep tools from paging, prompting or opening "
            "editors (PAGER=cat, GIT_EDITOR=true, ...; see docs/agent-environment.md), 'human' adds none. Default: "
            "'agent' for an agent's token, on every route; 'human' for the operator token (ptyctl)."
        ),
    ] = None
    cols: Annotated[Cols | None, _d(f"Terminal width (default {DEFAULTS.default_cols}).")] = None
    rows: Annotated[Rows | None, _d(f"Terminal height (default {DEFAULTS.default_rows}).")] = None
    timeout_ms: Annotated[
        TimeoutMs | None, _d(f"Readiness wait bound (default {DEFAULTS.open_timeout_ms}: open_timeout_ms).")
    ] = None
    idle_ms: Annotated[
        IdleMs | None, _d(f"Silence that settles as inferred_idle (default {DEFAULTS.default_idle_ms}).")
    ] = None
    record: Annotated[
        bool | None,
        _d(
            "Record the session from its start (asciicast v2). Sessions of the agents the config's record_agents "
            "names are recorded whatever this says."
        ),
    ] = None
    sandbox: Annotated[
        Annotated[str, Meta(min_length=1, max_length=64)] | None,
        _d(
            "Sandbox profile to run under (docs/sandbox.md); default the agent's own (config sandbox_agents, "
            "sandbox_default). One looser than the agent's own in any property is refused (sandbox_refused)."
        ),
    ] = None


class SessionLimits(Base, frozen=True):
    """A session's resource limits, from its sandbox profile; null: unlimited."""

    memory_mib: int | None = None
    pids_max: int | None = None
    cpu_percent: Annotated[int | None, _d("CPU time as a percentage of one CPU.")] = None


class SessionInfo(Base, frozen=True):
    """What a session is and what it is doing now."""

    session_id: str
    name: str | None
    type: str
    pid: int | None
    status: SessionStatus
    cols: int
    rows: int
    alt_screen: Annotated[bool, _d("True while a full-screen program (vim, less) uses the alternate screen.")]
    foreground: Foreground | None
    busy: Annotated[bool, _d("True while a send is active.")]
    operation_id: Annotated[str | None, _d("The active (or last settled) send operation.")]
    created_at_ms: Annotated[int, _d("Unix time in milliseconds.")]
    total_lines: Annotated[int, _d("Lines in the transcript so far (scrollback plus screen).")]
    owner: Annotated[str, _d("agent_id of the owning agent.")]
    owner_name: Annotated[str | None, _d("The owning agent's display name.")]
    password_prompt: Annotated[
        bool, _d("The foreground program waits for input with echo off (a password prompt): ask a human.")
    ] = False
    engine: Annotated[str, _d('The terminal engine rendering this session: "ghostty" or "pyte".')] = ""
    engine_note: Annotated[
        str | None, _d("Why the session runs on another engine than the configured one (a crash of the native one).")
    ] = None
    sandbox: Annotated[str, _d("The sandbox profile the session runs under ('none': no sandbox).")] = "none"
    limits: Annotated[SessionLimits | None, _d("Its resource limits, when the profile sets any.")] = None
    oom_killed: Annotated[
        bool,
        _d(
            "A memory limit (the session's, or its agent's sessions' together) made the kernel kill a process of "
            "this session."
        ),
    ] = False
    pids_limited: Annotated[
        bool, _d("A fork of this session was refused at a process limit (its own, or its agent's sessions' together).")
    ] = False
    listening: Annotated[
        list[ListeningPort], _d("TCP ports the session's processes listen on (a dev server, a database).")
    ] = []
    recording: Annotated[bool, _d("The session is being recorded (terminal_record, terminal_recordings).")] = False


class TerminalOpenResult(Base, frozen=True):
    session_id: str
    name: str | None
    type: str
    pid: int | None
    motd: Annotated[str, _d("Bounded rendered screen once the program was ready.")]
    status: SessionStatus
    cols: int
    rows: int
    wait_reason: WaitReason
    alt_screen: bool
    foreground: Foreground | None
    sandbox: Annotated[str, _d("The sandbox profile the session runs under ('none': no sandbox).")] = "none"
    env_profile: Annotated[EnvProfile | None, _d("The environment preset the program was started with.")] = None
    sandbox_note: Annotated[
        str | None,
        _d(
            "Set when this agent's session runs unsandboxed only because no sandbox can be made here (its profile "
            "is sandbox_default 'auto': 'workspace' where bubblewrap works): why, e.g. bubblewrap is not installed."
        ),
    ] = None


class TerminalSendParams(Base, frozen=True):
    """Write ``input`` verbatim to the terminal, then any named ``keys``, and wait until the program is ready for more.

    The caller adds ``\\n`` to submit a line; control characters pass through (``\\u0003`` is Ctrl-C).
    An empty input just waits for readiness. With ``wait=false`` the send runs in the background.
    """

    token: Token
    session_id: SessionId
    input: Annotated[str, Meta(max_length=1_048_576, description="Text written verbatim (UTF-8).")]
    keys: Annotated[
        Annotated[list[Annotated[str, Meta(max_length=32)]], Meta(max_length=256)] | None,
        Meta(
            description=(
                "Keys pressed after input, by name, encoded in the modes the program set (application cursor keys "
                "make Up 'ESC O A', as programs in that mode expect): Enter, Tab, BTab, Escape, Space, Backspace, "
                "Delete, Insert, Home, End, PageUp, PageDown, Up, Down, Left, Right, F1-F12, a single character; "
                "with C-, M-, S- modifiers (C-c, M-x, C-Left)."
            ),
        ),
    ] = None
    timeout_ms: Annotated[TimeoutMs | None, _d(f"Wait bound (default {DEFAULTS.default_timeout_ms}).")] = None
    idle_ms: Annotated[
        IdleMs | None, _d(f"Silence that settles as inferred_idle (default {DEFAULTS.default_idle_ms}).")
    ] = None
    max_bytes: Annotated[
        MaxBytes | None,
        _d(
            f"Viewport bound (default {DEFAULTS.agent_max_bytes} for an agent's token, agent_max_bytes: a budget "
            f"sized for a model's context; {DEFAULTS.default_max_bytes} for the operator's)."
        ),
    ] = None
    wait: Annotated[bool, _d("False: return an operation_id at once; see terminal_output/terminal_wait.")] = True
    request_key: Annotated[
        Name | None, _d("Client idempotency key: a repeat with the same key returns the original operation.")
    ] = None
    until: Annotated[
        Annotated[str, Meta(min_length=1, max_length=UNTIL_MAX)] | None,
        _d(
            "Named wait: a regular expression (Python re syntax) searched in each rendered output line since the "
            "send (the line the input was typed on excluded; on the alternate screen, its rows). The send settles "
            "with wait_reason 'matched' and the match once it is found. Readiness still ends the wait when the "
            "input's command returned to a shell prompt (it ran and ended without a match); inferred_idle does "
            "not, unless idle_ms is given. With input '' this is a pure wait (a server's log line, tail -f)."
        ),
    ] = None
    until_stable_ms: Annotated[
        Annotated[int, Meta(ge=1, le=3_600_000)] | None,
        _d(
            "Named wait: settle with wait_reason 'stable' once the rendered screen stayed unchanged this long "
            "(a TUI that finished drawing, output that stopped). With until, whichever comes first."
        ),
    ] = None
    compact: Annotated[
        bool | None,
        _d(
            "Output economy for the viewport and terminal_output (the transcript is never changed): runs of "
            "identical lines become one line and a count, progress lines redrawn as new lines keep their last "
            "state, and a cut keeps the lines that look like errors besides the tail. See docs/output-economy.md. "
            "Default (null): on for an agent's token, on every route (agent_compact); off for the operator's."
        ),
    ] = None
    join_wrapped: Annotated[
        bool, _d("Viewport and terminal_output lines are logical lines: rows the terminal soft-wrapped are joined.")
    ] = False
    until_done: Annotated[
        bool,
        _d(
            "Run this and tell me when it is done: silence does not end the wait (no inferred_idle), only the "
            "program being ready for input again (the shell's prompt after the command, with its exit_code), the "
            "session's exit, a named wait, or timeout_ms. For builds and test runs that are quiet for a while. An "
            "empty input with a shell command still running waits for that command the same way."
        ),
    ] = False


class LineRange(Base, frozen=True):
    """Transcript lines ``[start_line, end_line)`` that a viewport covers."""

    start_line: int
    end_line: int


class SendResult(Base, frozen=True):
    """The settled result of one send (PtySendResult)."""

    operation_id: str
    viewport: Annotated[
        str,
        _d(
            "Rendered terminal delta since the previous result the agent was given (what the session printed "
            "between calls first, see earlier_lines), ending with the cursor line; the visible screen while the "
            "alternate screen is active. Bounded by max_bytes, head and tail kept, the cut marked."
        ),
    ]
    wait_reason: WaitReason
    session_status: SessionStatus
    truncated: Annotated[bool, _d("Output was cut from the viewport or dropped from retained scrollback.")]
    alt_screen: bool
    foreground: Foreground | None
    lines: Annotated[LineRange, _d("Transcript lines the viewport covers (for terminal_read).")]
    exit_code: Annotated[
        int | None,
        _d(
            "Exit status of the last shell command that finished since the previous result the agent was given: "
            "during this send, or between calls (shell integration: bash, zsh and fish sessions ptyd starts, or a "
            "shell it was installed into); null when none finished or it is unknown. Each one: commands."
        ),
    ] = None
    cwd: Annotated[str | None, _d("The shell's working directory when the send settled at its prompt; else null.")] = (
        None
    )
    password_prompt: Annotated[
        bool,
        _d("The program waits for input with echo off (a password or passphrase prompt): ask a human, never guess."),
    ] = False
    ready_basis: Annotated[
        ReadyBasis | None, _d("For wait_reason stdin_read: how readiness was judged (see ReadyBasis).")
    ] = None
    relay: Annotated[
        str | None, _d("The opaque relay in the foreground (ssh, docker, ...) when readiness was judged through one.")
    ] = None
    unread_input: Annotated[
        int, _d("Bytes of this session's input not yet read by the program when the send settled (0: all taken).")
    ] = 0
    oom_killed: Annotated[
        bool,
        _d(
            "During this send a memory limit (the session's, or its agent's sessions' together) made the kernel "
            "kill one of the session's processes."
        ),
    ] = False
    pids_limited: Annotated[
        bool,
        _d(
            "During this send a fork in the session was refused at a process limit (the session's, or its "
            "agent's sessions' together)."
        ),
    ] = False
    sandbox: Annotated[str, _d("The sandbox profile the session runs under ('none': no sandbox).")] = "none"
    match: Annotated[SendMatch | None, _d("For wait_reason matched: what until matched, and on which line.")] = None
    listening: Annotated[
        list[ListeningPort], _d("TCP ports the session's processes listen on when the send settled.")
    ] = []
    compacted: Annotated[
        int, _d("With compact: lines of the viewport folded into a count or a final state (see terminal_read).")
    ] = 0
    commands: Annotated[
        list[CommandOutcome],
        _d("Every shell command that ended since the previous result the agent was given, oldest first."),
    ] = []
    running: Annotated[
        RunningCommand | None,
        _d(
            "The shell command still running as this result was made (after timeout or inferred_idle): "
            "terminal_wait, or an empty send, waits for its end and reports it."
        ),
    ] = None
    earlier_lines: Annotated[
        int,
        _d(
            "Lines at the head of the viewport that the session printed after the previous result the agent was "
            "given and before this call: output no earlier result showed."
        ),
    ] = 0
    continuation: Annotated[
        str | None,
        _d(
            "The shell waits at its continuation prompt for the rest of a command (an open quote, bracket or block, "
            "a trailing backslash): the lines of it read so far, as sent. The next send continues that command; "
            "keys ['C-c'] abandons it. Null when the shell waits for a new command (or cannot tell: bash, zsh and fish "
            "report it)."
        ),
    ] = None
    lost_lines: Annotated[
        int,
        _d(
            "Lines of output lost in a daemon crash since the previous result (printed after the last saved "
            "state); the transcript marks the gap with a line of its own."
        ),
    ] = 0


class SendStarted(Base, frozen=True):
    """A background send was started (``wait=false``)."""

    operation_id: str


class SessionRefParams(Base, frozen=True):
    token: Token
    session_id: SessionId


class TerminalOutputParams(SessionRefParams, frozen=True):
    """Consume the rendered output produced since the previous call (for background sends)."""


class TerminalOutputResult(Base, frozen=True):
    operation_id: str | None
    output: Annotated[
        str,
        _d(
            "Completed lines since the previous call, each ending in a newline; once done, also the cursor line "
            "(the prompt). Consecutive outputs concatenate to the transcript."
        ),
    ]
    done: bool
    result: SendResult | None


class TerminalCancelParams(SessionRefParams, frozen=True):
    """Send SIGINT to the foreground process group of the active send."""


class TerminalCancelResult(Base, frozen=True):
    cancelled: Annotated[bool, _d("False when no send was active (it had settled).")]
    interrupted: Annotated[
        bool,
        _d(
            "A SIGINT went to the verified foreground group (or Ctrl-C was pressed for it: key): the active send's "
            "command, or, with no send active, what the last send left running in front (it ended in timeout or "
            "inferred_idle)."
        ),
    ] = False
    pgid: Annotated[int | None, _d("The process group interrupted.")] = None
    signal: Annotated[str | None, _d("The signal sent (SIGINT); None when a key was pressed instead (key).")] = None
    program: Annotated[str | None, _d("The program in front that was interrupted.")] = None
    key: Annotated[
        str | None,
        _d(
            "The key pressed instead of a signal (C-c), where the terminal reads Ctrl-C as a key: a relay in front "
            "(script, ssh, tmux) forwards it to its program's terminal, a raw-mode program (jshell, vim) takes it. "
            "Since protocol 9."
        ),
    ] = None
    message: Annotated[str, _d("What the cancel did, in a sentence.")] = ""
    hint: Annotated[str | None, _d("When there was nothing to interrupt: what to do instead.")] = None


class TerminalWaitParams(SessionRefParams, frozen=True):
    """Wait for the active send to settle and return its result, or with none active the last one's. When the last
    one was already given and ended in timeout or inferred_idle, or left a shell command running: wait for what it
    left running instead (settling like an empty send with until_done), and return that result."""

    timeout_ms: Annotated[
        TimeoutMs | None,
        _d(
            "Give up after this long and return done=false (for a wait on a running command: with a result of "
            f"wait_reason timeout holding what it printed so far). Default: the active send's own bound; "
            f"default_timeout_ms ({DEFAULTS.default_timeout_ms}) for a wait on a running command."
        ),
    ] = None
    operation_id: Annotated[
        Name | None,
        _d(
            "The operation to wait for (from a background send's answer): an operation this daemon does not know "
            "(one in flight when a previous daemon crashed) answers operation_lost rather than another one's result."
        ),
    ] = None


class TerminalWaitResult(Base, frozen=True):
    operation_id: str | None
    done: Annotated[bool, _d("False: still running when the wait gave up.")]
    result: SendResult | None


class TerminalReadParams(SessionRefParams, frozen=True):
    """Page the retained transcript: scrollback followed by the screen, as rendered text lines."""

    start_line: Annotated[
        Annotated[int, Meta(ge=-(2**53), le=2**53)] | None,
        _d("First line; negative counts from the end (-100: the last 100). Default -max_lines."),
    ] = None
    max_lines: Annotated[
        Annotated[int, Meta(ge=1, le=100_000)] | None,
        _d(f"Default {DEFAULTS.default_read_lines}, at most {DEFAULTS.max_read_lines}."),
    ] = None
    max_bytes: Annotated[
        Annotated[int, Meta(ge=256, le=16 * 1024 * 1024)] | None,
        _d(f"Default {DEFAULTS.default_read_bytes}, at most {DEFAULTS.max_read_bytes}."),
    ] = None
    join_wrapped: Annotated[
        bool,
        _d(
            "Logical lines: a row the terminal soft-wrapped is joined with the rows it continues on, as one line "
            "(numbered by its first row; next_line skips the rest)."
        ),
    ] = False


class TerminalReadResult(Base, frozen=True):
    lines: list[str]
    start_line: int
    next_line: Annotated[int, _d("start_line of the following page.")]
    first_retained_line: Annotated[int, _d("Lines before this one were dropped by the scrollback bound.")]
    total_lines: int
    truncated: Annotated[bool, _d("The page stopped early at max_bytes, or started before the retained lines.")]


class TerminalScreenParams(SessionRefParams, frozen=True):
    """The visible screen as it is now (a full-screen program's while the alternate screen is active), read
    without writing to the session: what a person watching it sees."""


class TerminalScreenResult(Base, frozen=True):
    lines: Annotated[list[str], _d("Every row of the screen, top to bottom, trailing blanks removed.")]
    cursor_x: int
    cursor_y: int
    cursor_visible: bool
    alt_screen: bool
    title: Annotated[str, _d("The window title the program set (OSC 0/2), or empty.")]


class TerminalScreenshotParams(SessionRefParams, frozen=True):
    """The visible screen as a PNG image, drawn from the daemon's own terminal state: colours, bold, underline,
    inverse and the cursor, as a person watching the session sees it. Needs the daemon's extra ``screenshot``
    (Pillow); without it the error is ``extra_missing``."""

    font_size: Annotated[
        Annotated[int, Meta(ge=6, le=64)] | None,
        _d("Pixels per em of the cells' font; null: the daemon's screenshot_font_size."),
    ] = None


class TerminalScreenshotResult(Base, frozen=True):
    png: Annotated[str, _d("The PNG image, base64.")]
    width: Annotated[int, _d("Pixels.")]
    height: Annotated[int, _d("Pixels.")]
    cols: int
    rows: int
    cursor_x: int
    cursor_y: int
    cursor_visible: bool
    alt_screen: bool
    engine: Annotated[str, _d("The terminal engine whose cells were drawn ('ghostty' or 'pyte').")]


class TerminalSignalParams(SessionRefParams, frozen=True):
    """Signal the verified foreground process group of the terminal."""

    signal: Annotated[str | Annotated[int, Meta(ge=1, le=64)], _d("A name such as 'SIGINT' or 'INT', or a number.")]


class TerminalSignalResult(Base, frozen=True):
    delivered: bool
    pgid: int
    signal: str


class TerminalResizeParams(SessionRefParams, frozen=True):
    """Change the terminal size; the foreground program gets SIGWINCH."""

    cols: Cols
    rows: Rows


class TerminalStatusParams(SessionRefParams, frozen=True):
    """Describe one session."""


class TerminalListParams(Base, frozen=True):
    """List the caller's sessions."""

    token: Token


class TerminalListResult(Base, frozen=True):
    sessions: list[SessionInfo]


class TerminalCloseParams(SessionRefParams, frozen=True):
    """Terminate the session's whole process tree, reap it, close the PTY and forget the session.

    Idempotent: closing an id this agent already closed succeeds with ``closed=false``.
    """

    reason: Annotated[Name | None, _d("Free text for the daemon log.")] = None


class TerminalCloseResult(Base, frozen=True):
    closed: Annotated[bool, _d("False when the session was already closed.")]
    killed: Annotated[int, _d("Processes signalled to end them, the top-level program included.")]


class TerminalIntegrateParams(SessionRefParams, frozen=True):
    """Install shell integration into the shell now at the terminal's prompt (for example a bash reached through
    ssh, or a shell ptyd could not set up at open): types one line that adds prompt marks signed with this session's
    secret, then waits like a send. Afterwards sends through an opaque relay settle on the far shell's prompt mark
    (ready_basis ``shell_integration``) and report ``exit_code`` and ``cwd``. bash and zsh take it anywhere, fish
    on this machine (behind local relays too); other shells print a notice and nothing changes."""

    timeout_ms: Annotated[TimeoutMs | None, _d(f"Wait bound (default {DEFAULTS.default_timeout_ms}).")] = None
    max_bytes: Annotated[MaxBytes | None, _d(f"Viewport bound (default {DEFAULTS.default_max_bytes}).")] = None


EventKind = Literal["send_settled", "input_wait", "session_exit", "session_closed", "output", "screen"]


class TerminalSubscribeParams(Base, frozen=True):
    """Receive ``terminal_event`` notifications on this connection for one of the agent's sessions, or for all of
    them (null session_id: current and future ones). Events end with the connection or terminal_unsubscribe."""

    token: Token
    session_id: Annotated[SessionId | None, _d("One session, or null for every session of the agent.")] = None
    output: Annotated[
        bool, _d("Also send 'output' events: completed rendered lines as they appear (does not consume them).")
    ] = False
    screen: Annotated[
        bool,
        _d(
            "Also send 'screen' events: the visible screen changed (at most every few tens of ms; read it with "
            "terminal_screen). Full-screen programs change it without printing lines."
        ),
    ] = False


class TerminalSubscribeResult(Base, frozen=True):
    subscription_id: str


class TerminalUnsubscribeParams(Base, frozen=True):
    """Stop a subscription made on this connection."""

    token: Token
    subscription_id: Annotated[str, Meta(min_length=1, max_length=128)]


class TerminalUnsubscribeResult(Base, frozen=True):
    unsubscribed: Annotated[bool, _d("False when the subscription was unknown or already ended.")]


class TerminalEvent(Base, frozen=True):
    """Params of the ``terminal_event`` notification (a JSON-RPC request without id, sent by the daemon).

    ``screen``: the visible screen changed (for subscriptions with ``screen``; no payload).
    ``send_settled``: a send (foreground or background) settled; ``result`` holds its SendResult.
    ``input_wait``: outside any send, the program started waiting for input; ``password_prompt`` says whether
    with echo off. ``session_exit``: the top-level program exited; ``status`` holds how. ``session_closed``: the
    session was closed and forgotten. ``output``: completed transcript lines (each ending in a newline) covering
    ``lines``; sent at most every few tens of milliseconds, each bounded in size (``truncated`` when lines were
    left out)."""

    subscription_id: str
    session_id: str
    seq: Annotated[int, _d("Per-subscription sequence number, from 1.")]
    kind: EventKind
    operation_id: str | None = None
    result: SendResult | None = None
    password_prompt: bool | None = None
    status: SessionStatus | None = None
    output: str | None = None
    lines: LineRange | None = None
    truncated: bool = False


# ----------------------------------------------------------------------------------------------------------------
# Recordings
# ----------------------------------------------------------------------------------------------------------------


class TerminalRecordParams(SessionRefParams, frozen=True):
    """Start (``record=true``) or stop recording a live session in asciicast v2: output as it arrives, resizes,
    and input (input typed while a password prompt waits is written as ``[secret]``). Files go to the recordings
    directory, 0600, in parts bounded in size (recording_max_file_bytes, recording_files_kept)."""

    record: Annotated[
        bool, _d("True: start (a no-op if recording); false: stop, returning once the file is complete.")
    ] = True


class TerminalRecordResult(Base, frozen=True):
    session_id: str
    recording: Annotated[bool, _d("Whether the session is recorded now.")]
    path: Annotated[str | None, _d("The part being written, when recording.")]


class TerminalRecordingsParams(Base, frozen=True):
    """List the recordings on disk: of the sessions the caller has or closed (every session's for the operator),
    oldest first."""

    token: Token


class RecordingInfo(Base, frozen=True):
    """One part of a session's recording: a whole asciicast v2 file."""

    session_id: str
    part: Annotated[int, _d("1 for the first part; a session's parts continue from one recording to the next.")]
    path: str
    bytes: int
    started_at_ms: Annotated[int, _d("Unix time of the part's start, in milliseconds (second precision).")]
    cols: int
    rows: int
    title: str
    active: Annotated[bool, _d("The daemon is writing this part now.")]


class TerminalRecordingsResult(Base, frozen=True):
    directory: Annotated[str, _d("The recordings directory.")]
    recordings: list[RecordingInfo]


NOTIFICATIONS: dict[str, type[Base]] = {"terminal_event": TerminalEvent}
"""Notifications the daemon sends (method name -> params type), documented beside the methods."""


class EngineWorkersInfo(Base, frozen=True):
    """What the engine workers went through since the daemon started, and where they stand."""

    workers: Annotated[int, _d("Workers started and serving now.")]
    pids: Annotated[list[int], _d("Their process ids (the spare that replaces one at once is not among them).")]
    rss_bytes: Annotated[list[int], _d("Their resident memory, each.")]
    crashes: Annotated[int, _d("Workers that died after starting (hangs and kills included); each was replaced.")]
    hangs: Annotated[int, _d("...of which killed by their watchdog (engine_worker_stall_ms).")]
    kills: Annotated[int, _d("...of which killed from outside (SIGKILL, SIGTERM): no session is suspected.")]
    start_failures: Annotated[int, _d("Workers that died before they were ready: retried with a backoff.")]
    restarts: Annotated[int, _d("Workers started to replace another.")]
    recycled: Annotated[int, _d("Workers replaced because their memory passed engine_worker_rss_mb.")]
    quarantined: Annotated[
        int, _d("Sessions moved to the pyte engine for good: their own output, replayed alone, failed the engine.")
    ]
    paused: Annotated[
        str | None,
        _d(
            "Why sessions render in the daemon on pyte right now (workers die while starting), while a worker is "
            "tried again with a backoff; none: they render in workers."
        ),
    ] = None


class SandboxNetworkInfo(Base, frozen=True):
    """The network a sandboxed session whose profile has one gets (sandbox_network, docs/sandbox.md)."""

    mode: Annotated[
        str,
        _d(
            "'pasta': a network namespace of its own, outbound access through pasta, the machine's loopback out "
            'of reach; \'host\': the machine\'s (sandbox_network = "host", or "auto" where pasta cannot).'
        ),
    ]
    spares: Annotated[int, _d("Namespaces made ahead and ready for the next opens.")] = 0
    taken: Annotated[int, _d("Opens that took a namespace since the daemon started...")] = 0
    made_ahead: Annotated[int, _d("...of which found one made ahead (the others waited for pasta).")] = 0


class DaemonInfoParams(Base, frozen=True):
    """Describe the daemon. Counts are totals; no other agent's data is returned."""

    token: Token | None = None


class DaemonInfoResult(Base, frozen=True):
    version: str
    protocol_version: int
    pid: int
    uptime_ms: int
    sessions: int
    agents: int
    backend_types: list[str]
    containment: Annotated[str, _d("'cgroup' or 'subreaper': how close finds every process of a session.")]
    handovers: Annotated[
        int, _d("How many times the sessions were handed to a newly started daemon (SIGUSR2, ptyctl upgrade).")
    ] = 0
    handover_error: Annotated[
        str | None, _d("Why the last handover was refused (the daemon kept serving), if it was.")
    ] = None
    sandbox: Annotated[
        str | None, _d("How sandboxed sessions are made ('bwrap'), or why they cannot be on this system.")
    ] = None
    limits: Annotated[str | None, _d("Which cgroup hierarchy enforces each resource limit (or none).")] = None
    sandbox_default: Annotated[
        str | None,
        _d(
            "The profile an agent the config names no profile for gets now: sandbox_default, with 'auto' resolved "
            "('workspace' where a sandbox can be made, else 'none')."
        ),
    ] = None
    sandbox_warning: Annotated[
        str | None,
        _d(
            "Set when agents' sessions run unsandboxed because sandbox_default is 'auto' and no sandbox can be made "
            "here: why, and what to install."
        ),
    ] = None
    crash_continuity: Annotated[
        str | None,
        _d(
            "Whether the sessions would outlive a crash of this daemon right now: 'systemd' (its fd store holds "
            "their terminals), 'keeper' (a ptyd keeper does), or 'none: ' and why not (fd_keeper = false, the "
            "keeper died and another is being started)."
        ),
    ] = None
    engine_workers: Annotated[
        EngineWorkersInfo | None, _d("The engine workers' record (none when engines run in the daemon).")
    ] = None
    sandbox_network: Annotated[SandboxNetworkInfo | None, _d("Sandboxed sessions' network (protocol 7).")] = None
