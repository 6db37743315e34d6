"""The tools a model sees: names, descriptions written for a model, and schemas derived from the wire types."""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types as types

from ptyd import protocol as p
from ptyd_mcp.config import READ_DEFAULTS, SEND_DEFAULTS
from ptyd_mcp.schemas import JsonSchema, input_schema, output_schema

SESSION_ID = "The session id from terminal_open (or terminal_list)."

WAIT_REASONS = """\
Why it returned (wait_reason): stdin_read = the program is blocked reading the terminal, asked of the kernel: the \
command finished and the shell prompts again, or a program asks for input; inferred_idle = no output for idle_ms \
but nothing is provably waiting for input: it may still be working quietly, so look at the output and send '' to \
wait longer; timeout = timeout_ms passed and the program still runs, its output keeps being recorded: send '' to \
keep waiting, or Ctrl-C; session_exit = the session's program itself ended: terminal_read its output, then \
terminal_close."""

SEND_INPUT = """\
Text typed into the terminal verbatim. End a command with a newline to submit it ("ls -la\\n"); without one the \
text is typed but not entered. Control keys are characters: Ctrl-C "\\u0003", Ctrl-D "\\u0004", Ctrl-Z \
"\\u001a", Esc "\\u001b", Tab "\\t", Enter "\\r"; for arrows and other special keys use keys (with input ""). \
An empty string types nothing and just waits for readiness again."""

SEND_KEYS = """\
Keys pressed after input, by name: ["Down", "Down", "Enter"], ["F10"], ["C-c"], ["Escape", ":", "w", "q", \
"Enter"]. Use this for arrows, Home/End, PageUp/PageDown, function keys and modified keys (C-x Ctrl, M-x Alt, \
S-Tab): they are sent the way the program asked for (full-screen programs such as vim, less, htop and mc take \
arrows only in the form keys sends, not as "\\u001b[A" typed in input). Names: Enter, Tab, BTab, Escape, Space, \
Backspace, Delete, Insert, Home, End, PageUp, PageDown, Up, Down, Left, Right, F1-F12, or one character."""

SEND_WAITS = {
    "until": "Wait until the output shows this (a Python regular expression, searched in each output line since "
    "this send; the typed command line itself is not searched), for programs that print and never ask for input: "
    "start the server, then wait until it listens: input 'npm run dev\\n', until 'Serving HTTP|listening on|ready "
    "in'; or input '' with until 'ERROR|done' to wait on a running tail -f, watcher or log. Returns matched with "
    "the match; also returns early if the command ends back at the shell prompt without printing it. Silence does "
    "not end this wait (unless idle_ms is given); timeout_ms still does.",
    "until_stable_ms": "Wait until the screen has not changed for this long (e.g. 1000): for a TUI or REPL that "
    "keeps redrawing or answers after a delay. Returns stable.",
    "compact": "Fold repeated lines and progress lines into a count, and keep errors when cutting (default true). "
    "False shows every line as the terminal drew it.",
    "join_wrapped": "Join lines the terminal wrapped at its width into one (default true).",
    "until_done": "Run this and return when it is done, in one call: silence never ends the wait, only the shell "
    "prompting again after the command (with its exit code), a program asking for input, the session's exit, or "
    "timeout_ms. Use it for test runs, builds and installs that can be quiet for a while (input 'pytest -x\\n', "
    "until_done true, timeout_ms 600000), so a pause is never taken for the end.",
}

_D = p.DEFAULTS  # the daemon's defaults, stated once (ptyd/config.py)
SEND_BOUNDS = {
    "timeout_ms": f"Give up waiting after this long (default {_D.default_timeout_ms}); the program keeps running. "
    "Raise it for long builds or tests.",
    "idle_ms": "Settle as inferred_idle after this much silence while nothing waits for input "
    f"(default {_D.default_idle_ms}).",
    "max_bytes": "Upper bound of the returned viewport in UTF-8 bytes (default 8192, set by the server's "
    "--max-bytes); the tail and the lines that look like errors are kept, terminal_read has the rest.",
}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input: JsonSchema
    output: JsonSchema
    annotations: types.ToolAnnotations

    def tool(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input,
            output_schema=self.output,
            annotations=self.annotations,
        )


def _hints(*, read_only: bool = False, destructive: bool = False, idempotent: bool = False) -> types.ToolAnnotations:
    # Every tool acts on processes on this machine only: not open-world.
    return types.ToolAnnotations(
        read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


_session = {"session_id": SESSION_ID}
SEND_PARAMS = input_schema(
    p.TerminalSendParams,
    drop=("wait", "request_key"),  # this server runs every send in the background, with its own request_key
    describe={**_session, "input": SEND_INPUT, "keys": SEND_KEYS, **SEND_WAITS, **SEND_BOUNDS},
    defaults=SEND_DEFAULTS,  # this server's, not the daemon's (ptyd_mcp.terminals applies them)
)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "terminal_open",
        "Start a shell (bash by default) or another program on a new persistent terminal; returns once it is ready "
        "for input, with its first screen. Open one session per ongoing task (a build, a dev server, a REPL, an ssh "
        "login) and keep sending to it: working directory, environment and running programs carry over between "
        "sends. Close it with terminal_close when done.",
        input_schema(
            p.TerminalOpenParams,
            drop=("profile",),  # the older spelling of env_profile
            describe={
                "type": "'shell' (default): bash, or argv as the shell. 'exec': run argv directly.",
                "name": "A short label for the session, shown in terminal_list and to a person watching.",
                "argv": 'Program and arguments, e.g. ["python3"] or ["ssh", "host"]. Default: bash.',
                "env": "Extra environment variables for the program.",
                "timeout_ms": f"How long to wait for the program to be ready (default {_D.open_timeout_ms}).",
                "env_profile": "'agent' (default) sets PAGER=cat, GIT_EDITOR=true and similar, so tools do not "
                "stop in a pager or an editor you cannot see. 'human' leaves the environment as it is.",
            },
        ),
        output_schema(p.TerminalOpenResult),
        _hints(),
    ),
    ToolSpec(
        "terminal_send",
        "Type input into a session and wait until the program is ready for more input; returns what the terminal "
        "showed for it (the viewport, rendered as text) and one line on why it returned. " + WAIT_REASONS + " With "
        "until or until_stable_ms it waits for what you name instead (matched, stable): start a server, then wait "
        "until it listens (until='Serving HTTP|listening on'); the result lists the TCP ports the session's "
        "programs listen on. A "
        "line starting PASSWORD PROMPT means the program asks for a secret: ask the human, do not type one. "
        "For work that takes minutes, set until_done (and raise timeout_ms) or use terminal_send_background. Each "
        "result starts where your previous result in this session ended: output and [ended: ...] lines for "
        "commands that finished while you were away come first, and [running: ...] names a command that has not "
        "finished yet (send '' to wait for it).",
        SEND_PARAMS,
        output_schema(p.SendResult),
        _hints(destructive=True),
    ),
    ToolSpec(
        "terminal_integrate",
        "Call once at a bash or zsh prompt that ptyd did not start itself, typically right after `ssh host` (or "
        "`docker exec -it ... bash`) logged in: it types one setup line into that shell, and from then on sends "
        "through the relay return exactly when the far shell prompts again (not when it merely looks quiet) and "
        "report exit_code and cwd. A fish on this machine takes it too; other shells print a notice and nothing "
        "changes.",
        input_schema(p.TerminalIntegrateParams, describe={**_session, **SEND_BOUNDS}),
        output_schema(p.SendResult),
        _hints(),
    ),
    ToolSpec(
        "terminal_send_background",
        "Type input like terminal_send but return at once with an operation_id while the program runs. Then: "
        "terminal_output for new output lines, terminal_wait for the result, terminal_cancel to interrupt. The "
        "session takes no other send until this one settles.",
        SEND_PARAMS,
        output_schema(p.SendStarted),
        _hints(destructive=True),
    ),
    ToolSpec(
        "terminal_output",
        "The output lines of the session's current (background) send produced since the previous call, each line "
        "returned once; once the send settled, also its result. Returns at once.",
        input_schema(p.TerminalOutputParams, describe=_session),
        output_schema(p.TerminalOutputResult),
        _hints(),
    ),
    ToolSpec(
        "terminal_wait",
        "Wait until the session's current send settles and return its result as terminal_send does (or the last "
        "settled one); done=false if it still runs after timeout_ms. Cancelling this wait leaves the send running.",
        input_schema(
            p.TerminalWaitParams,
            describe={**_session, "timeout_ms": "Stop waiting after this long (default: until the send settles)."},
        ),
        output_schema(p.TerminalWaitResult),
        _hints(read_only=True, idempotent=True),
    ),
    ToolSpec(
        "terminal_cancel",
        "Interrupt the session's running send as Ctrl-C would (SIGINT to the program in the foreground, or the key "
        "itself where the terminal reads it as one: through ssh or script, in jshell) and let it settle; with no "
        "send running, interrupt what the last send left running (it ended in timeout or inferred_idle: a server, "
        "yes, a long build). interrupted says whether it went out (signal or key: which); hint says what to do "
        "when there was nothing to interrupt.",
        input_schema(p.TerminalCancelParams, describe=_session),
        output_schema(p.TerminalCancelResult),
        _hints(destructive=True),
    ),
    ToolSpec(
        "terminal_read",
        "Read the session's retained transcript (scrollback, then the screen) as text lines: output that scrolled "
        "past a viewport or was cut from it. Does not type anything.",
        input_schema(
            p.TerminalReadParams,
            describe={
                **_session,
                "start_line": "First line to return; negative counts from the end (-50: the last 50 lines). "
                "Default: the last max_lines lines.",
                "max_lines": "Most lines to return (default 200).",
                "join_wrapped": "Join lines the terminal wrapped at its width into one (default true).",
            },
            defaults=READ_DEFAULTS,
        ),
        output_schema(p.TerminalReadResult),
        _hints(read_only=True, idempotent=True),
    ),
    ToolSpec(
        "terminal_screen",
        "The session's screen as it is now, without typing anything: to look at a full-screen program (vim, less, "
        "top), a progress bar, or a program that is still running.",
        input_schema(p.TerminalScreenParams, describe=_session),
        output_schema(p.TerminalScreenResult),
        _hints(read_only=True, idempotent=True),
    ),
    ToolSpec(
        "terminal_screenshot",
        "A picture (PNG) of the session's screen as a person sees it: colours, bold, inverse and the cursor. Use it "
        "when colour carries the meaning terminal_screen's text loses: a highlighted menu item or selection, a red "
        "error or failing test, a diff, a TUI's layout; and as evidence of what a program showed.",
        input_schema(
            p.TerminalScreenshotParams,
            describe={**_session, "font_size": "Pixels per em of the font (default 14); 10 halves the picture."},
        ),
        output_schema(p.TerminalScreenshotResult, drop=("png",)),  # the PNG is the image content block
        _hints(read_only=True, idempotent=True),
    ),
    ToolSpec(
        "terminal_signal",
        "Send a signal to the program in the foreground of the session's terminal (not to the shell behind it): "
        "SIGINT is Ctrl-C, SIGTSTP Ctrl-Z, SIGQUIT Ctrl-\\, SIGTERM asks it to end, SIGKILL forces it. Returns at "
        "once; follow with terminal_send input '' to see the result.",
        input_schema(p.TerminalSignalParams, describe=_session),
        output_schema(p.TerminalSignalResult),
        _hints(destructive=True),
    ),
    ToolSpec(
        "terminal_resize",
        "Change the session's terminal size in character cells; the program is told (SIGWINCH).",
        input_schema(p.TerminalResizeParams, describe=_session),
        output_schema(p.SessionInfo),
        _hints(idempotent=True),
    ),
    ToolSpec(
        "terminal_close",
        "End a session: its program and every process it started are terminated. Idempotent. Close sessions you "
        "no longer need; otherwise they outlive this server.",
        input_schema(p.TerminalCloseParams, describe=_session),
        output_schema(p.TerminalCloseResult),
        _hints(destructive=True, idempotent=True),
    ),
    ToolSpec(
        "terminal_list",
        "List your sessions (this agent's) with their status, foreground program, size and whether a send runs. "
        "Use it after a restart or whenever unsure of an id.",
        input_schema(p.TerminalListParams),
        output_schema(p.TerminalListResult),
        _hints(read_only=True, idempotent=True),
    ),
)

BY_NAME = {spec.name: spec for spec in TOOLS}
