"""Shell integration: prompt marks that tell what each command did, signed so that no program can forge them.

An interactive bash that ptyd starts loads ``bash_integration.sh`` as its rc file (zsh and fish: see their
launchers); that file first loads what
bash would have loaded (``/etc/bash.bashrc`` and ``~/.bashrc``, the ``--rcfile`` given, or the login files), then
installs a hook: ``PS0`` prints a *command* mark before each command runs, and the first ``PROMPT_COMMAND`` entry
prints a *prompt* mark with ``$?`` and ``$PWD`` before each prompt. Neither the user's rc files nor ``PS1`` are
touched. Every mark carries the session's secret, which lives only in a non-exported shell variable, and the
daemon strips valid marks from the output before the terminal sees them, so they never reach a viewport or the
transcript.

The secret reaches the shell on a pipe at fd 6 (``KEY_FD``), whose other end the daemon closed: not in the
environment, because ``unset`` does not erase the environment a process was started with, and any program of the
session could read it from ``/proc/PID/environ`` and forge marks (a failing command reported as ``exit_code: 0``).
bash's and zsh's startup code reads it and closes the fd before anything else runs; fish cannot close a
descriptor, and reads it after the user's configuration (its ``--init-command``): the pipe, drained, holds nothing
for the commands that inherit it. What the fd does not stop: a
process that may ptrace the shell (the same user, ``kernel.yama.ptrace_scope`` 0; a command the shell runs is its
child, not its ancestor, so scope 1 keeps it out) reads the variable from the shell's memory; so can anything
that reads ``/proc/PID/mem`` with the same rights (docs/shell-integration.md).

Wire form: ``ESC ] 6973 ; <secret> ; C BEL`` and ``ESC ] 6973 ; <secret> ; D ; <status> ; <cwd> BEL``. Also
``ESC ] 6973 ; <secret> ; P BEL`` for each line read that leaves the command open (a quote, bracket or block; bash
and zsh print it with ``PS2``, fish from its Enter key), so that a command's lines are told from the next
command's (``agent_view``); and fish's command mark carries its command line, URL-escaped: ``C ; <line>``. A shell
that ``terminal_integrate`` installed the hooks into signs with ``<secret>.<n>`` (``nested_key``): its marks are
told from those of the shell that runs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import final
from urllib.parse import unquote

MARK = b"\x1b]6973;"
MAX_MARK = 8192  # longer is not one of ours: passed through as output
RC_FILE = Path(__file__).with_name("bash_integration.sh")
ZDOTDIR = Path(__file__).with_name("zsh")  # holds the .zshenv that zsh reads first
FISH_FILE = Path(__file__).with_name("fish_integration.fish")
KEY_FD = 6  # bash's and zsh's: the secret on this descriptor (above the spawn chain's gates, 3-5)
KEY_FD_VAR = "PTYD_SHELL_KEY_FD"  # set when it is there
# The lines that take the secret, in bash and zsh (and every POSIX shell): from fd 6 when it is there, and close it.
_TAKE_KEY = (
    'if [ "${PTYD_SHELL_KEY_FD-}" = 6 ]; then IFS= read -r __ptyd_key <&6; exec 6<&-; '
    "else __ptyd_key=${PTYD_SHELL_KEY-}; fi"
)
HOOK_VAR = "PTYD_SHELL_HOOK"
RC_VAR = "PTYD_SHELL_RC"  # what bash would have loaded: "default", "login" or a file
PC_VAR = "PTYD_SHELL_PC"  # the caller's own PROMPT_COMMAND, restored by the bootstrap

# The hook, in one line so that it can also be typed into a shell behind a relay (terminal_integrate). It
# keeps $? for the PROMPT_COMMAND entries after it, and prefers PROMPT_COMMAND as an array (bash 5.1+). PS0 and PS2
# hold the secret: never exported (a user's rc file may have), or every command could read it and forge marks.
HOOK = (
    '__ptyd_prompt() { local s=$?; builtin printf \'\\033]6973;%s;D;%s;%s\\007\' "$__ptyd_key" "$s" "$PWD"; '
    "return $s; }; "
    "PS0=\"${PS0-}\"$'\\033]6973;'\"$__ptyd_key\"$';C\\007'; "
    "PS2='\\[\\e]6973;'\"$__ptyd_key\"';P\\a\\]'\"${PS2-> }\"; export -n PS0 PS2; "
    "if ((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))); then "
    'PROMPT_COMMAND=(__ptyd_prompt "${PROMPT_COMMAND[@]}"); '
    'else PROMPT_COMMAND="__ptyd_prompt${PROMPT_COMMAND:+; $PROMPT_COMMAND}"; fi'
)

BOOTSTRAP = (
    "export -n PROMPT_COMMAND; __ptyd_pc=$PTYD_SHELL_PC; PROMPT_COMMAND=$__ptyd_pc; "
    f'[ -n "$PROMPT_COMMAND" ] || unset PROMPT_COMMAND; {_TAKE_KEY}; eval "$PTYD_SHELL_HOOK"; '
    'unset PTYD_SHELL_KEY PTYD_SHELL_KEY_FD PTYD_SHELL_HOOK PTYD_SHELL_PC; __ptyd_prompt; eval "$__ptyd_pc"; '
    "unset __ptyd_pc"
)  # bash runs the PROMPT_COMMAND it installs from the next prompt on: this one runs both entries itself

# Options of an interactive bash that ptyd can start with its rc file (anything else is left untouched).
_FLAGS = {"-i", "-l", "--login", "--norc", "--noprofile"}
_WITH_VALUE = {"--rcfile", "--init-file"}


@dataclass(frozen=True, slots=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    key: str | None = None  # the secret to hand the shell on KEY_FD (None: it is in env)


def bash_launch(argv: list[str], key: str, env: dict[str, str]) -> Launch | None:
    """``argv`` and variables to add that load the integration, or None when ``argv`` is not a plain interactive
    bash (``bash -c``, a script, options ptyd does not know): those run exactly as given, without marks.

    A bash that reads rc files gets ``bash_integration.sh`` as its ``--rcfile``, which reads them. A login shell
    reads no rc file, so it starts as an interactive non-login bash whose rc file reads the login files
    (``shopt login_shell`` is then off: the one difference). A bash with ``--norc`` keeps its argv (Debian's bash
    would read /etc/bash.bashrc with any ``--rcfile``): a ``PROMPT_COMMAND`` in its environment installs the
    hook at the first prompt and takes itself, and the secret, back out of the environment."""
    if not argv or os.path.basename(argv[0]).lstrip("-") != "bash":
        return None
    rc = "default"
    login = argv[0].startswith("-")
    noprofile = False
    args = iter(argv[1:])
    for arg in args:
        if arg in _WITH_VALUE:
            rc = next(args, "")
            if not rc:
                return None
        elif arg not in _FLAGS:
            return None
        elif arg == "--norc":
            rc = "none"
        elif arg == "--noprofile":
            noprofile = True
        elif arg in ("-l", "--login"):
            login = True
    if login:
        rc = "none" if noprofile else "login"
    added = {KEY_FD_VAR: str(KEY_FD), HOOK_VAR: HOOK}
    if rc == "none":
        added[PC_VAR] = env.get("PROMPT_COMMAND", "")
        added["PROMPT_COMMAND"] = BOOTSTRAP
        return Launch(list(argv), added, key)
    added[RC_VAR] = rc
    return Launch([argv[0].lstrip("-"), "--rcfile", str(RC_FILE), "-i"], added, key)


_ZSH_FLAGS = {"-i", "-l", "--login"}


def zsh_launch(argv: list[str], key: str, env: dict[str, str]) -> Launch | None:
    """Variables that load the integration into an interactive zsh (argv unchanged), or None for anything else
    (``zsh -c``, a script, ``-f``). zsh reads ``$ZDOTDIR/.zshenv`` first; ptyd's hands ZDOTDIR back to the user's
    and loads their files before it adds its hooks."""
    if not argv or os.path.basename(argv[0]).lstrip("-") != "zsh" or any(a not in _ZSH_FLAGS for a in argv[1:]):
        return None
    added = {KEY_FD_VAR: str(KEY_FD), "ZDOTDIR": str(ZDOTDIR)}
    user = env.get("ZDOTDIR", os.environ.get("ZDOTDIR"))
    if user is not None:
        added["PTYD_USER_ZDOTDIR"] = user
    return Launch(list(argv), added, key)


_FISH_FLAGS = {"-i", "--interactive", "-l", "--login"}


def fish_launch(argv: list[str], key: str) -> Launch | None:
    """An interactive fish with ``fish_integration.fish`` as an ``--init-command``, which fish runs after the
    user's configuration; None for anything else (``fish -c``, a script, ``--no-config``). It reads the secret from
    the fd bash and zsh get (before its first prompt; the user's configuration, which runs first, could read it
    too: it is the user's own)."""
    if not argv or os.path.basename(argv[0]).lstrip("-") != "fish" or any(a not in _FISH_FLAGS for a in argv[1:]):
        return None
    return Launch([*argv, "--init-command", f"source {_fish_quoted(str(FISH_FILE))}"], {KEY_FD_VAR: str(KEY_FD)}, key)


def _fish_quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def shell_launch(argv: list[str], key: str, env: dict[str, str]) -> Launch | None:
    """How to start ``argv`` with the integration, for the shells that have one (bash, zsh, fish)."""
    return bash_launch(argv, key, env) or zsh_launch(argv, key, env) or fish_launch(argv, key)


# zsh's, as in zsh/.zshenv: the continuation prompt's mark goes into PS2 at each prompt, after any rc file set it.
ZSH_HOOK = (
    '__ptyd_precmd() { local s=$?; builtin printf \'\\033]6973;%s;D;%s;%s\\007\' "$__ptyd_key" "$s" "$PWD"; '
    "[[ $PS2 == *$'\\e]6973;'* ]] || { PS2=$'%{\\e]6973;'\"$__ptyd_key\"$';P\\a%}'\"$PS2\"; typeset -g +x PS2; }; "
    "return $s; }; __ptyd_preexec() { builtin printf '\\033]6973;%s;C\\007' \"$__ptyd_key\"; }; "
    "precmd_functions=(__ptyd_precmd $precmd_functions); preexec_functions+=(__ptyd_preexec)"
)


# fish's, as in fish_integration.fish (which says why Enter is bound), in one line.
FISH_HOOK = (
    "function __ptyd_prompt --on-event fish_prompt; set -l s $status; "
    "builtin printf '\\e]6973;%s;D;%s;%s\\a' $__ptyd_key $s $PWD; end; "
    'function __ptyd_preexec --on-event fish_preexec; set -l line (string sub -l 2000 -- "$argv[1]" | string collect); '
    "builtin printf '\\e]6973;%s;C;%s\\a' $__ptyd_key (string escape --style=url -- \"$line\"); end; "
    "function __ptyd_cancel --on-event fish_cancel; builtin printf '\\e]6973;%s;D;130;%s\\a' $__ptyd_key $PWD; end; "
    "function __ptyd_enter; commandline --is-valid; switch $status; "
    "case 2; builtin printf '\\e]6973;%s;P\\a' $__ptyd_key; "
    "case 1; set -l fish (status fish-path); builtin echo; commandline | string collect | $fish --no-execute; "
    "builtin printf '\\e]6973;%s;D;123;%s\\a' $__ptyd_key $PWD; commandline -r ''; commandline -f repaint; "
    "return; end; commandline -f execute; end; "
    "for key in \\r \\n; bind $key | string match -q -- '*execute' && bind $key __ptyd_enter; "
    "bind -M insert $key 2>/dev/null | string match -q -- '*execute' && bind -M insert $key __ptyd_enter; end"
)


def nested_key(key: str, depth: int) -> str:
    """The secret of the marks of a shell inside the session's own one (behind ssh, a container's): its commands
    are told from the one that runs it (the ssh command runs on while they start and end)."""
    return f"{key}.{depth}"


def _quoted(code: str) -> str:
    return "'" + code.replace("'", "'\\''") + "'"


def _erasing(make_line: Callable[[str], str], prompt_width: int, cols: int) -> str:
    """The line ``make_line(erase)`` whose ``erase`` clears the rows the prompt and the line itself take (the
    row count's own digits can change the length it is computed from)."""
    line = ""
    rows = 1
    for _ in range(3):
        line = make_line(f"builtin printf '\\033[{rows}F\\033[J'")
        rows = (prompt_width + len(line)) // max(cols, 1) + 1
    return line + "\n"


def fish_snippet(key: str, prompt_width: int, cols: int) -> str:
    """One line that installs the hooks into the fish at the prompt, then erases its own echo (the leading space
    keeps it out of fish's history, as out of bash's)."""
    return _erasing(lambda erase: f" set -g __ptyd_key {key}; {FISH_HOOK}; {erase}", prompt_width, cols)


def remote_snippet(key: str, prompt_width: int, cols: int) -> str:
    """One line that installs the hook into the bash or zsh at the prompt, then erases its own echo: the rows the
    prompt and the line take are known here (the prompt's width is the cursor's column). Each shell's code is in
    an ``eval`` string, so any POSIX shell parses the line (and says the integration needs bash or zsh)."""

    def line(erase: str) -> str:
        bash = _quoted(f"__ptyd_key={key}; {HOOK}; {erase}")
        zsh = _quoted(f"__ptyd_key={key}; {ZSH_HOOK}; {erase}")
        return (
            f' if [ -n "${{BASH_VERSION-}}" ]; then eval {bash}; elif [ -n "${{ZSH_VERSION-}}" ]; then eval {zsh}; '
            "else echo 'ptyd: shell integration needs bash or zsh'; fi"
        )

    return _erasing(line, prompt_width, cols)


@dataclass(frozen=True, slots=True)
class Mark:
    kind: str  # "C": a command starts; "D": the prompt is about to be drawn; "P": a continuation prompt is
    status: int | None = None
    cwd: str | None = None
    command: str | None = None  # "C": the command line, where the shell says it (fish)
    depth: int = 0  # 0: the session's own shell; n: the nth shell terminal_integrate installed the hooks into
    at: int = 0  # where it ends in the output stream as read, marks included (bytes fed to the filter before it)


@final
class MarkFilter:
    """Removes the session's signed marks from the output stream and reports them, in stream order. Marks with
    another secret are removed too but not reported: a program that prints one changes nothing."""

    def __init__(self, key: str, on_mark: Callable[[Mark], None]) -> None:
        self._key = key.encode()
        self._nested = self._key + b"."  # ...then the depth: a shell inside the session's own (``nested_key``)
        self._on_mark = on_mark
        self._held = b""  # a possible mark cut by a read boundary
        self._fed = 0  # bytes fed so far
        self._base = 0  # where the data being parsed starts in the stream

    def feed(self, data: bytes) -> bytes:
        self._base = self._fed - len(self._held)
        self._fed += len(data)
        if self._held:
            data, self._held = self._held + data, b""
        start = data.find(MARK)
        if start < 0:
            return self._hold_tail(data)
        out = bytearray()
        pos = 0
        while start >= 0:
            out += data[pos:start]
            end = _terminator(data, start + len(MARK))
            if end < 0:
                if len(data) - start < MAX_MARK:
                    self._held = data[start:]
                    return bytes(out)
                out += data[start : start + len(MARK)]  # not a mark: pass it through
                pos = start + len(MARK)
            else:
                pos = end + (1 if data[end] == 7 else 2)
                self._parse(data[start + len(MARK) : end], self._base + pos)
            start = data.find(MARK, pos)
        out += self._hold_tail(data[pos:])
        return bytes(out)

    def _hold_tail(self, data: bytes) -> bytes:
        """Keep back a trailing prefix of MARK (``ESC ] 69``): the next read may complete it."""
        esc = data.rfind(b"\x1b", max(0, len(data) - len(MARK) + 1))
        if esc >= 0 and MARK.startswith(data[esc:]):
            self._held = data[esc:]
            return data[:esc]
        return data

    def _parse(self, body: bytes, at: int) -> None:
        key, _, rest = body.partition(b";")
        if key == self._key:
            depth = 0
        elif key.startswith(self._nested) and key[len(self._nested) :].isdigit():
            depth = int(key[len(self._nested) :])  # a shell terminal_integrate installed the hooks into
        else:
            return
        kind, _, fields = rest.partition(b";")
        if kind == b"C":  # fish's carries its command line, URL-escaped (its editor joins the lines sent)
            command = unquote(fields.decode(errors="replace")) if fields else None
            self._on_mark(Mark("C", command=command, depth=depth, at=at))
        elif kind == b"P":
            self._on_mark(Mark("P", depth=depth, at=at))
        elif kind == b"D":
            status, _, cwd = fields.partition(b";")
            try:
                code = int(status)
            except ValueError:
                return
            self._on_mark(Mark("D", code, cwd.decode(errors="replace") or None, depth=depth, at=at))


def _terminator(data: bytes, start: int) -> int:
    """Index of the BEL or ``ESC \\`` ending a mark body that starts at ``start``, or -1."""
    bel = data.find(b"\x07", start, start + MAX_MARK)
    st = data.find(b"\x1b\\", start, start + MAX_MARK)
    if bel < 0:
        return st
    return bel if st < 0 else min(bel, st)
