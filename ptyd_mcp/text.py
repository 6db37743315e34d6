"""The text a model reads for each result and error: the terminal's own text, then one line on why and what next.

Results are read defensively (``.get``): fields the daemon added in protocol 2 (``exit_code``, ``cwd``,
``password_prompt``, ``ready_basis``, ``relay``, ``unread_input``) are used when present and ignored when not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ptyd_client import (
    ConnectionLost,
    DaemonUnavailable,
    InternalError,
    InvalidParams,
    LimitExceeded,
    PtydError,
    SessionBusy,
    SessionExited,
    SessionNotFound,
    SpawnFailed,
)

Result = Mapping[str, Any]


def _program(result: Result) -> str:
    foreground = result.get("foreground")
    return f"`{foreground['name']}`" if isinstance(foreground, Mapping) else "the program"


def exit_phrase(status: Any) -> str:
    """How a session's program ended, from its ``SessionStatus``."""
    if not isinstance(status, Mapping) or status.get("kind") != "exited":
        return "exited"
    if status.get("signal"):
        return f"killed by {status['signal']}"
    return f"exited with code {status.get('exit_code')}"


def password_callout(session_id: str) -> str:
    return (
        f"PASSWORD PROMPT: the program in session {session_id} is asking for a password or another secret "
        "(the terminal does not echo it). Do not guess one and do not type one you were not given: ask the "
        f"human to type it themselves (`ptyctl attach {session_id}`, Ctrl-] detaches), then continue with "
        "terminal_send input ''."
    )


def why(result: Result, session_id: str) -> str:
    """One line: why a send returned, with what to do next where that is not obvious."""
    reason = result.get("wait_reason")
    program = _program(result)
    if reason == "stdin_read":
        line = f"[stdin_read: {program} is waiting for input"
        if result.get("exit_code") is not None:
            line += f"; the last command exited with code {result['exit_code']}"
        if result.get("cwd"):
            line += f"; cwd {result['cwd']}"
        if result.get("ready_basis") == "relay_quiet":
            relay = result.get("relay") or "a relay"
            line += (
                f" (judged through {relay}: the far side drew a prompt and went quiet, which ptyd cannot check "
                "exactly; terminal_integrate at a remote bash prompt makes it exact)"
            )
        line += "]"
    elif reason == "inferred_idle":
        line = (
            f"[inferred_idle: no output for a while, but {program} is not waiting for input: it may still be "
            "working. Look at the output; send input '' to wait longer, or Ctrl-C ('\\u0003') to stop it]"
        )
    elif reason == "timeout":
        line = (
            f"[timeout: {program} is still running (its output keeps being recorded). Send input '' to keep "
            "waiting, terminal_screen to look, or Ctrl-C ('\\u0003') to interrupt]"
        )
    elif reason == "session_exit":
        line = (
            f"[session_exit: the session's program ended (it {exit_phrase(result.get('session_status'))}). "
            f"terminal_read shows all output; terminal_close {session_id} when done]"
        )
    elif reason == "matched":
        match = result.get("match") or {}
        where = f" on line {match['line']}" if match.get("line") is not None else " on the screen"
        line = (
            f"[matched: until found {match.get('text', '')!r}{where}; {program} is still running (a server keeps "
            "serving): send input '' with a new until to wait for the next thing, or Ctrl-C ('\\u0003') to stop it]"
        )
    elif reason == "stable":
        line = (
            f"[stable: the screen did not change for until_stable_ms; {program} may still be working: look at the "
            "output, send input '' to wait longer]"
        )
    else:
        line = f"[{reason}]"
    notes = []
    if result.get("alt_screen"):
        notes.append(
            f"{program} is a full-screen program: the text above is its whole screen; press arrows and function "
            'keys with keys (["Down"], ["F10"]), not escape sequences in input'
        )
    ports = listening(result.get("listening"))
    if ports:
        notes.append(ports)
    if result.get("compacted"):
        notes.append(f"{result['compacted']} repeated or progress lines were folded into the markers shown")
    if result.get("truncated"):
        lines = result.get("lines")
        where = f" from start_line {lines['start_line']}" if isinstance(lines, Mapping) else ""
        notes.append(f"output was cut: terminal_read{where} shows the rest")
    if result.get("unread_input"):
        notes.append(f"{result['unread_input']} bytes of the input are not read by the program yet")
    if result.get("earlier_lines"):
        notes.append(f"the first {result['earlier_lines']} lines above were printed between your calls")
    if notes:
        line += " (" + "; ".join(notes) + ")"
    line += between_calls(result)
    if result.get("password_prompt"):
        line += "\n" + password_callout(session_id)
    for callout in sandbox_callouts(result, session_id):
        line += "\n" + callout
    return line


def between_calls(result: Result) -> str:
    """Lines for what the session did that the model was not told yet (protocol 5): every shell command that ended
    since its previous result (one may have ended while it thought), a command the shell waits to complete
    (protocol 8), the one still running, a crash's gap."""
    out = ""
    commands = [c for c in result.get("commands") or () if isinstance(c, Mapping)]
    if len(commands) > 1 or (commands and result.get("wait_reason") != "stdin_read"):
        for command in commands:
            text = command.get("command") or "a command"
            code, took = command.get("exit_code"), command.get("duration_ms")
            how = (
                "ended with the shell that ran it (no prompt after it told how)"
                if code is None
                else f"exited with code {code}"
            )
            out += f"\n[ended: `{text}` {how} after {took} ms]"
    continuation = result.get("continuation")
    if isinstance(continuation, str):
        out += (
            f"\n[continuation: the shell has read `{continuation}` and waits for the rest of that command (an open "
            'quote, bracket or block): send the rest, or keys ["C-c"] to abandon it]'
        )
    running = result.get("running")
    if isinstance(running, Mapping) and result.get("wait_reason") in ("timeout", "inferred_idle"):
        text = running.get("command") or "a command"
        out += (
            f"\n[running: `{text}` for {running.get('running_ms')} ms. terminal_send input '' (or terminal_wait) "
            "waits for it to end and reports its exit code; until_done=true makes that one call next time]"
        )
    if result.get("lost_lines"):
        out += (
            f"\n[{result['lost_lines']} lines of output were lost in a daemon crash (marked in the transcript): "
            "check the state before relying on what ran then]"
        )
    return out


# What programs print when the sandbox stopped them (strerror of EROFS, EACCES/EPERM, ENETUNREACH, resolvers).
_DENIED_WRITE = ("Read-only file system",)
_DENIED = ("Permission denied", "Operation not permitted")
_NO_NETWORK = (
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
)


def sandbox_callouts(result: Result, session_id: str) -> list[str]:
    """Lines telling the model that a failure it sees is the sandbox's or a limit's doing: ask, do not retry."""
    profile = result.get("sandbox") or "none"
    out = []
    if result.get("oom_killed"):
        out.append(
            f"MEMORY LIMIT: a process of session {session_id} was killed by the kernel at the session's memory "
            "limit (that is what 'Killed' or exit code 137 means here). Running it again will fail the same way: "
            "use less memory (smaller batches, fewer workers) or ask the human to raise the limit."
        )
    if result.get("pids_limited"):
        out.append(
            f"PROCESS LIMIT: session {session_id} reached its limit on processes, so a fork failed ('Resource "
            "temporarily unavailable'). Stop what is spawning them (Ctrl-C, or terminal_close), then run fewer "
            "at once."
        )
    if profile == "none":
        return out
    viewport = str(result.get("viewport", ""))
    ask = "Do not retry it or look for a way around it: ask the human if it is needed."
    if any(text in viewport for text in _DENIED_WRITE):
        out.append(
            f"SANDBOX: session {session_id} runs under the sandbox profile '{profile}': outside its workspace "
            f"(the directory it was opened in) and the paths its profile lists, the filesystem is read-only. {ask}"
        )
    elif any(text in viewport for text in _DENIED):
        out.append(
            f"SANDBOX: session {session_id} runs under the sandbox profile '{profile}', which may be why access "
            f"was denied (files outside the workspace, ptyd's own files, other processes). {ask}"
        )
    if any(text in viewport for text in _NO_NETWORK) or ("Connection refused" in viewport and "127.0.0.1" in viewport):
        out.append(
            f"SANDBOX: session {session_id} runs under the sandbox profile '{profile}', which may give it no "
            f"network (nothing outside the sandbox can be reached, not even this machine's localhost). {ask}"
        )
    return out


def listening(ports: Any) -> str:
    """``listening on 127.0.0.1:8000 (pid 123), ...`` from a result's ``listening``, or empty."""
    if not isinstance(ports, list) or not ports:
        return ""
    shown = []
    for port in ports:
        address = port["address"]
        host = f"[{address}]" if ":" in address else address
        shown.append(f"{host}:{port['port']} (pid {port['pid']})")
    return "listening on " + ", ".join(shown)


def send(result: Result, session_id: str) -> str:
    """A settled send: its viewport, then why it returned."""
    viewport = str(result.get("viewport", ""))
    return f"{viewport}\n{why(result, session_id)}" if viewport else why(result, session_id)


def error(exc: PtydError | DaemonUnavailable, session_id: str | None) -> str:
    """What went wrong, said so that the model knows its next step."""
    sid = session_id or "?"
    if isinstance(exc, SessionNotFound):
        return (
            f"No session {sid} for this agent: it was closed, it belongs to another agent name, or the daemon "
            "restarted since. Call terminal_list to see your sessions, or terminal_open to start a new one."
        )
    if isinstance(exc, SessionBusy):
        op = f" ({exc.operation_id})" if exc.operation_id else ""
        return (
            f"Session {sid} is still running an earlier send{op}. Call terminal_wait to wait for it, terminal_output "
            "for its output so far, or terminal_cancel to interrupt it (Ctrl-C)."
        )
    if isinstance(exc, SessionExited):
        return (
            f"The program of session {sid} has exited: it takes no more input. terminal_read shows its output; "
            f"terminal_close {sid}, then terminal_open a new session."
        )
    if isinstance(exc, InvalidParams):
        # A schema error's message names the field itself; a handler's may leave it to data.
        said = exc.message.removeprefix("Invalid params: ")
        return f"Invalid arguments: {said}. {'' if said != exc.message else _detail(exc)}".rstrip()
    if isinstance(exc, SpawnFailed):
        return f"The program could not be started: {exc.message} {_detail(exc)}".rstrip()
    if isinstance(exc, LimitExceeded):
        return f"{exc.message} Close sessions you no longer need (terminal_list, terminal_close) and try again."
    if isinstance(exc, InternalError):
        return f"ptyd failed internally (incident {exc.incident}); the daemon's log has the details. Try again."
    if isinstance(exc, ConnectionLost):
        return f"{exc} Check with terminal_list before repeating it."
    if isinstance(exc, DaemonUnavailable):
        return (
            f"{exc}. ptyd, the daemon that owns the terminals, must be running: ask the human to start it "
            "(`ptyd` in a terminal, or `systemctl --user start ptyd.socket`), then try again."
        )
    return f"{exc.message} ({exc.kind}) {_detail(exc)}".rstrip()


def _detail(exc: PtydError) -> str:
    detail = {k: v for k, v in exc.data.items() if k != "kind"}
    return " ".join(f"{k}: {v}." for k, v in detail.items())
