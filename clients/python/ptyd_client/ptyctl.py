"""``ptyctl``: look at and act on a running ptyd's sessions, every agent's, as the operator.

A thin layer over :class:`~ptyd_client.Client`. It authenticates with the operator token the daemon writes
beside its socket (``operator.token``, mode 0600) unless ``--token`` names an agent's own token.

Exit codes: 0 success, 1 the daemon answered with an error (bad id, bad token, ...), 2 usage error,
3 the daemon is not reachable, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from ptyd_client import __version__, core, remote, render
from ptyd_client.client import Client
from ptyd_client.errors import (
    ConnectionLost,
    DaemonUnavailable,
    PtydError,
    SessionBusy,
    SessionExited,
    SessionNotFound,
    Unauthorized,
)
from ptyd_client.types import SendResult

ClientT = TypeVar("ClientT")
EXIT_OK, EXIT_DAEMON_ERROR, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
READ_PAGE_LINES = 10_000


class Usage(Exception):
    """A command line that cannot be run as given."""


class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json: bool = args.json
        if args.socket is not None and args.host is not None:
            raise Usage("give --socket or --host, not both")
        try:
            self.target = remote.resolve_target(args.socket, args.host)
        except ValueError as exc:
            raise Usage(str(exc)) from None
        self._client: Client | None = None

    def token(self) -> str:
        if self.args.token:
            return str(self.args.token)
        if isinstance(self.target, remote.SshHost):
            return self.target.operator_token()
        return core.read_operator_token(self.target)

    def client(self, *, token: bool = True) -> Client:
        if self._client is None:
            self._client = self.new_client(Client, self.token() if token else None)
        return self._client

    def new_client(self, kind: Callable[..., ClientT], token: str | None) -> ClientT:
        """A :class:`Client` or :class:`AsyncClient` for this command's daemon, local or over ssh."""
        if isinstance(self.target, remote.SshHost):
            return kind(None, token, host=self.target.url)
        return kind(self.target, token)

    def session_id(self, text: str) -> str:
        """The session ``text`` names: an id, a unique name, or a unique id prefix (as given when none matches,
        so the daemon's own not-found answer reaches the user)."""
        sessions = self.client().terminal_list()["sessions"]
        if any(s["session_id"] == text for s in sessions):
            return text
        for matches, what in (
            ([s for s in sessions if s["name"] == text], "name"),
            ([s for s in sessions if s["session_id"].startswith(text)], "id prefix"),
        ):
            if len(matches) == 1:
                return matches[0]["session_id"]
            if matches:
                ids = ", ".join(s["session_id"] for s in matches)
                raise Usage(f"{what} {text!r} matches {len(matches)} sessions ({ids}); give the id")
        return text

    def emit(self, result: Any, text: str | None) -> None:
        """The result as JSON with ``--json``, else the human text (nothing when None)."""
        if self.json:
            print(json.dumps(result, indent=2, ensure_ascii=False))
        elif text is not None:
            print(text)

    def screen_text(self, text: str) -> str:
        # Program output is shown as is in a pipe; on a terminal its control sequences are neutralised.
        return render.safe(text) if sys.stdout.isatty() else text


# --- commands --------------------------------------------------------------------------------------------


def cmd_status(ctx: Context) -> int:
    info = ctx.client(token=False).daemon_info()
    ctx.emit({"running": True, "socket": str(ctx.target), **info}, render.daemon_status(info, str(ctx.target)))
    return EXIT_OK


def cmd_upgrade(ctx: Context) -> int:
    """SIGUSR2 to the daemon, then wait until the newly installed ptyd serves its sessions (or the old one says
    why it refused). Local only: the signal goes to a process of this machine."""
    if isinstance(ctx.target, remote.SshHost):
        raise Usage(f"upgrade signals a local daemon: run `ptyctl upgrade` on {ctx.target.url} itself")
    before = ctx.client(token=False).daemon_info()
    os.kill(before["pid"], signal.SIGUSR2)
    deadline = time.monotonic() + ctx.args.timeout
    while True:
        try:
            with Client(ctx.target, None) as probe:
                info = probe.daemon_info()
        except (DaemonUnavailable, ConnectionLost):
            info = None  # the connection dropped while the daemon execs: ask again
        if info is not None and info.get("handovers", 0) > before.get("handovers", 0):
            text = f"ptyd {before['version']} -> {info['version']} (pid {info['pid']}), sessions: {info['sessions']}"
            ctx.emit({"from": before, **info}, text)
            return EXIT_OK
        if (
            info is not None
            and info.get("handover_error")
            and info.get("handover_error") != before.get("handover_error")
        ):
            return fail(ctx.json, EXIT_DAEMON_ERROR, "handover_refused", str(info["handover_error"]), {})
        if time.monotonic() > deadline:
            return fail(ctx.json, EXIT_DAEMON_ERROR, "timeout", "the new daemon did not answer in time", {})
        time.sleep(0.05)


def cmd_ls(ctx: Context) -> int:
    result = ctx.client().terminal_list()
    sessions = sorted(result["sessions"], key=lambda s: s["created_at_ms"])
    ctx.emit(result, render.session_table(sessions) if sessions else "no sessions")
    return EXIT_OK


def cmd_agents(ctx: Context) -> int:
    result = ctx.client().agent_list()
    agents = sorted(result["agents"], key=lambda a: (a["name"] or "", a["agent_id"]))
    ctx.emit(result, render.agent_table(agents) if agents else "no agents")
    return EXIT_OK


def cmd_release(ctx: Context) -> int:
    """Release the agent that NAME|ID names (an id, a unique name or a unique id prefix): close its sessions and
    revoke its token."""
    text = ctx.args.agent
    agents = ctx.client().agent_list()["agents"]
    chosen = [a for a in agents if a["agent_id"] == text]
    for matches, what in (
        ([a for a in agents if a["name"] == text], "name"),
        ([a for a in agents if a["agent_id"].startswith(text)], "id prefix"),
    ):
        if chosen:
            break
        if len(matches) > 1:
            ids = ", ".join(a["agent_id"] for a in matches)
            raise Usage(f"{what} {text!r} matches {len(matches)} agents ({ids}); give the id")
        chosen = matches
    agent_id = chosen[0]["agent_id"] if chosen else text  # as given: the daemon's own answer reaches the user
    result = ctx.client().agent_release(agent_id)
    closed = result["closed_sessions"]
    ctx.emit(result, f"released {agent_id}, closed {closed} session{'' if closed == 1 else 's'}")
    return EXIT_OK


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise Usage(f"--env wants NAME=VALUE, not {pair!r}")
        env[name] = value
    return env


def cmd_open(ctx: Context) -> int:
    a = ctx.args
    options: core.OpenOptions = {"type": a.type}
    if a.name is not None:
        options["name"] = a.name
    if a.cwd is not None:
        options["cwd"] = os.path.abspath(a.cwd)
    elif not isinstance(ctx.target, remote.SshHost):
        options["cwd"] = os.getcwd()  # where the caller is, as a new shell tab would; a far host has no such dir
    if a.env:
        options["env"] = parse_env(a.env)
    if a.env_profile is not None:
        options["env_profile"] = a.env_profile
    if a.sandbox is not None:
        options["sandbox"] = a.sandbox
    if a.size is not None:
        # --size 120 40 takes two words; a first program word after --size 120x40 is the program's.
        two = len(a.size) >= 2 and a.size[1].isdigit() and "x" not in a.size[0].lower()
        words, rest = (a.size[:2], a.size[2:]) if two else (a.size[:1], a.size[1:])
        options["cols"], options["rows"] = parse_size(words)
        a.argv = rest + a.argv
    if a.argv:
        options["argv"] = a.argv
    opened = ctx.client().terminal_open(**options)
    ctx.emit(opened, opened["session_id"])
    return EXIT_OK


def unescape(text: str) -> str:
    """``\\n``, ``\\t``, ``\\x03``, ``\\u2603``... as in a Python string literal."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


def cmd_send(ctx: Context) -> int:
    a = ctx.args
    text = unescape(a.text) if a.escapes else a.text
    if not a.no_newline:
        text += "\n"
    options: core.SendOptions = {} if a.timeout is None else {"timeout_ms": int(a.timeout * 1000)}
    if a.key:
        options["keys"] = a.key
    if a.until is not None:
        options["until"] = a.until
    if a.stable is not None:
        options["until_stable_ms"] = int(a.stable * 1000)
    result = ctx.client().terminal_send(ctx.session_id(a.id), text, **options)
    if ctx.json:
        ctx.emit(result, None)
        return EXIT_OK
    print(ctx.screen_text(result["viewport"]))
    print(send_footer(result, a.id), file=sys.stderr)
    return EXIT_OK


def send_footer(result: SendResult, session: str) -> str:
    """Why the send returned, with the exit code of the command that ended and a password prompt called out."""
    reason: str = result["wait_reason"]
    if reason == "session_exit":
        reason += ": " + render.status_word(result["session_status"])
    if result.get("exit_code") is not None:
        reason += f", exit code {result['exit_code']}"
    if result.get("continuation") is not None:
        reason += ", continuation: the shell waits for the rest of a command"
    footer = f"[{reason}]"
    if result.get("password_prompt"):
        footer += (
            f"\n[password prompt: the program waits for a secret, not echoed; type it with `ptyctl attach {session}`]"
        )
    return footer


def cmd_read(ctx: Context) -> int:
    a = ctx.args
    client = ctx.client()
    session_id = ctx.session_id(a.id)
    if a.tail is not None:
        page = client.terminal_read(session_id, start_line=-a.tail, max_lines=a.tail, join_wrapped=a.join)
        pages = [page]
    else:
        page = client.terminal_read(session_id, start_line=a.start, max_lines=READ_PAGE_LINES, join_wrapped=a.join)
        pages = [page]
        end = page["total_lines"]  # the transcript as it was at the first page, not a moving target
        while page["lines"] and page["next_line"] < end:
            page = client.terminal_read(
                session_id, start_line=page["next_line"], max_lines=READ_PAGE_LINES, join_wrapped=a.join
            )
            pages.append(page)
    lines = [line for p in pages for line in p["lines"]]
    combined = {**pages[0], "lines": lines, "next_line": pages[-1]["next_line"], "truncated": pages[0]["truncated"]}
    ctx.emit(combined, ctx.screen_text("\n".join(lines)))
    return EXIT_OK


def cmd_signal(ctx: Context) -> int:
    a = ctx.args
    signal: str | int = int(a.signal) if a.signal.isdigit() else a.signal
    result = ctx.client().terminal_signal(ctx.session_id(a.id), signal)
    state = "sent" if result["delivered"] else "not delivered (the group is gone)"
    ctx.emit(result, f"{result['signal']} {state} to process group {result['pgid']}")
    return EXIT_OK


def cmd_resize(ctx: Context) -> int:
    a = ctx.args
    cols, rows = parse_size(a.size)
    info = ctx.client().terminal_resize(ctx.session_id(a.id), cols, rows)
    ctx.emit(info, f"{info['session_id']} is now {info['cols']}x{info['rows']}")
    return EXIT_OK


def cmd_screenshot(ctx: Context) -> int:
    import base64
    from pathlib import Path

    a = ctx.args
    session_id = ctx.session_id(a.id)
    result = ctx.client().terminal_screenshot(session_id, a.font_size)
    data = base64.b64decode(result["png"])
    out = a.output or f"{session_id}.png"
    if out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return EXIT_OK
    Path(out).write_bytes(data)
    shown = {k: v for k, v in result.items() if k != "png"}
    text = f"wrote {out}: {result['width']}x{result['height']} px, {result['cols']}x{result['rows']} cells"
    ctx.emit({**shown, "path": out, "bytes": len(data)}, text)
    return EXIT_OK


def cmd_close(ctx: Context) -> int:
    session_id = ctx.session_id(ctx.args.id)
    result = ctx.client().terminal_close(session_id, reason="ptyctl close")
    text = f"closed {session_id}" if result["closed"] else f"{session_id} was already closed"
    ctx.emit(result, text)
    return EXIT_OK


def cmd_watch(ctx: Context) -> int:
    from ptyd_client.watch import watch

    reason = watch(ctx.client(), ctx.session_id(ctx.args.id), sys.stdout)
    print(f"ptyctl: {reason}", file=sys.stderr)
    return EXIT_OK


def cmd_attach(ctx: Context) -> int:
    from ptyd_client.aio import AsyncClient
    from ptyd_client.attach import attach

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise Usage("attach needs a terminal on stdin and stdout (use send/read from scripts)")
    token = ctx.token()
    session_id = ctx.session_id(ctx.args.id)

    async def run() -> str:
        async with ctx.new_client(AsyncClient, token) as client:
            return await attach(client, session_id, sys.stdin.fileno(), sys.stdout)

    reason = asyncio.run(run())
    with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
        print(f"ptyctl: {reason}", file=sys.stderr)
    return EXIT_OK


def cmd_record(ctx: Context) -> int:
    client = ctx.client()
    session_id = ctx.session_id(ctx.args.id)
    if not ctx.args.stop:
        result = client.terminal_record(session_id, record=True)
        ctx.emit(result, f"recording {result['session_id']} to {result['path']}")
        return EXIT_OK
    # A stop answers recording=false either way: whether it stopped one is known from before.
    was = next((s for s in client.terminal_list()["sessions"] if s["session_id"] == session_id), None)
    result = client.terminal_record(session_id, record=False)
    if was is not None and was.get("recording"):
        parts = [r for r in client.terminal_recordings()["recordings"] if r["session_id"] == session_id]
        where = f"; the recording is in {parts[-1]['path']}" if parts else ""
        text = f"stopped recording {session_id}{where} (ptyctl replay {session_id} plays it)"
    else:
        text = f"{session_id} was not being recorded"
    ctx.emit(result, text)
    return EXIT_OK


def cmd_recordings(ctx: Context) -> int:
    result = ctx.client().terminal_recordings()
    rows = [
        f"{r['session_id']:<30} {r['part']:>4} {r['bytes']:>10} "
        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r['started_at_ms'] / 1000))} "
        f"{r['cols']}x{r['rows']:<4} {'live ' if r['active'] else ''}{r['title']}"
        for r in result["recordings"]
    ]
    header = f"{'SESSION':<30} {'PART':>4} {'BYTES':>10} {'STARTED':<19} SIZE    TITLE"
    text = "\n".join([header, *rows]) if rows else f"no recordings in {result['directory']}"
    ctx.emit(result, text)
    return EXIT_OK


def cmd_replay(ctx: Context) -> int:
    from pathlib import Path

    from ptyd_client.replay import BadRecording, play

    a = ctx.args
    if a.speed <= 0:
        raise Usage("--speed must be above 0")
    given = Path(a.target)
    if given.is_file():
        paths = [given]
    else:
        found = ctx.client().terminal_recordings()["recordings"]
        ids = sorted({r["session_id"] for r in found})
        match = [i for i in ids if i == a.target] or [i for i in ids if i.startswith(a.target)]
        if not match:
            with contextlib.suppress(Usage):  # a live session's name
                named = ctx.session_id(a.target)
                match = [i for i in ids if i == named]
        if len(match) != 1:
            what = "no recording" if not match else f"{len(match)} recorded sessions ({', '.join(match)})"
            raise Usage(f"{a.target!r} is not a file, and names {what}: see `ptyctl recordings`")
        paths = [Path(r["path"]) for r in sorted(found, key=lambda r: r["part"]) if r["session_id"] == match[0]]
    if a.gif is not None:
        from ptyd_client.export import export_gif

        try:
            ctx.emit(*export_gif(paths, a.gif, font_size=a.font_size, idle_limit=a.idle_limit))
        except (BadRecording, OSError) as exc:
            raise Usage(str(exc)) from None
        return EXIT_OK
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        reason = play(paths, sys.stdout, speed=a.speed, idle_limit=a.idle_limit)
    except (BadRecording, OSError) as exc:
        raise Usage(str(exc)) from None
    if reason == "stopped":  # a replay that ran to its end leaves its last screen as it was, as asciinema does
        print(f"ptyctl: {reason}", file=sys.stderr)
    return EXIT_OK


# --- command line --------------------------------------------------------------------------------------------


def parse_size(words: list[str]) -> tuple[int, int]:
    """``["120x40"]`` or ``["120", "40"]``: both commands that take a size accept both forms."""
    pair = words[0].lower().split("x") if len(words) == 1 else words
    if len(pair) != 2 or not all(n.isdigit() for n in pair):
        raise Usage(f"want COLSxROWS or COLS ROWS, such as 120x40, not {' '.join(words)!r}")
    return int(pair[0]), int(pair[1])


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: an option given before the command is not overwritten by the subcommand's default.
    common.add_argument("--socket", default=argparse.SUPPRESS, help="daemon socket (default: as ptyd finds it)")
    common.add_argument(
        "-H",
        "--host",
        default=argparse.SUPPRESS,
        help="the daemon of another machine, ssh://[user@]host[:port] (default: $PTYD_HOST; runs ssh HOST ptyd "
        "dial-stdio)",
    )
    common.add_argument(
        "--token", default=argparse.SUPPRESS, help="an agent's token (default: the daemon's operator token)"
    )
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")

    parser = argparse.ArgumentParser(
        prog="ptyctl",
        parents=[common],
        description="Inspect and drive ptyd sessions (every agent's, with the operator token).",
        epilog="exit codes: 0 ok, 1 error from the daemon, 2 usage, 3 daemon unavailable, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"ptyctl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func: Callable[[Context], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(func=func)
        return p

    command("status", cmd_status, "is the daemon up? version, pid, uptime, totals")
    p = command("upgrade", cmd_upgrade, "hand every session to the newly installed ptyd; print the new version")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="give up after (default 60)")
    command("ls", cmd_ls, "every agent's sessions")
    command("agents", cmd_agents, "the registered agents: id, name, sessions, idle time")
    p = command("release", cmd_release, "release an agent: close its sessions and revoke its token")
    p.add_argument("agent", metavar="NAME|ID", help="an agent id, a unique name, or a unique id prefix")
    p = command("open", cmd_open, "open a session and print its id")
    p.add_argument("--name", help="display name")
    p.add_argument("--type", default="shell", help="backend type (default: shell)")
    p.add_argument("--cwd", help="working directory (default: this one; the daemon's home over --host)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="add a variable (repeatable)")
    p.add_argument("--size", nargs="+", metavar="COLSxROWS", help="terminal size: 120x40 or 120 40")
    p.add_argument(
        "--env-profile",
        choices=["agent", "human"],
        help="'agent': no pagers or editors (PAGER=cat, GIT_EDITOR=true, ...), as agents' sessions get by default "
        "on every route; 'human': the environment as it is. Default: human with the operator token (a person's "
        "session, where less and $EDITOR work), agent with an agent's --token",
    )
    p.add_argument(
        "--agent-profile",
        dest="env_profile",
        action="store_const",
        const="agent",
        help="the same as --env-profile agent",
    )
    p.add_argument("--sandbox", metavar="PROFILE", help="sandbox profile: workspace, readonly, ... (docs/sandbox.md)")
    p.add_argument("argv", nargs="*", help="program and arguments, after --")
    p = command("send", cmd_send, "type TEXT and a newline, print the screen delta and why the send returned")
    p.add_argument("id")
    p.add_argument("text")
    p.add_argument("-n", "--no-newline", action="store_true", help="do not add the newline")
    p.add_argument("-e", "--escapes", action="store_true", help=r"interpret \n, \t, \x03 ... in TEXT")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="give up waiting after this long")
    p.add_argument("-k", "--key", action="append", metavar="NAME", help="then press key NAME (Down, F10, C-c...)")
    p.add_argument("--until", metavar="REGEX", help="wait until an output line matches REGEX ('listening on')")
    p.add_argument("--stable", type=float, metavar="SECONDS", help="wait until the screen is unchanged this long")
    p = command("read", cmd_read, "print the session's transcript (scrollback and screen)")
    p.add_argument("id")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--tail", type=int, metavar="N", help="only the last N lines")
    group.add_argument("--start", type=int, default=0, metavar="LINE", help="first line (negative: from the end)")
    p.add_argument("-J", "--join", action="store_true", help="join rows the terminal wrapped (as tmux capture-pane -J)")
    p = command("signal", cmd_signal, "signal the foreground process group (SIGINT, TERM, 9...)")
    p.add_argument("id")
    p.add_argument("signal")
    p = command("resize", cmd_resize, "change the terminal size: resize ID 120x40, or resize ID 120 40")
    p.add_argument("id")
    p.add_argument("size", nargs="+", metavar="COLSxROWS")
    p = command("screenshot", cmd_screenshot, "save the session's screen as a PNG, in colour, with its cursor")
    p.add_argument("id")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: ID.png; '-': stdout)")
    p.add_argument("--font-size", type=int, metavar="PX", help="pixels per em (default: the daemon's, 14)")
    p = command("close", cmd_close, "end the session's whole process tree")
    p.add_argument("id")
    p = command("watch", cmd_watch, "follow the session's screen live, read-only (Ctrl-C quits)")
    p.add_argument("id")
    p = command("attach", cmd_attach, "type into the session from this terminal (Ctrl-] detaches)")
    p.add_argument("id")
    p = command("record", cmd_record, "start recording a live session in asciicast v2 (--stop: stop)")
    p.add_argument("id")
    p.add_argument("--stop", action="store_true", help="stop recording")
    command("recordings", cmd_recordings, "the recordings on disk: session, part, size, start, title")
    p = command("replay", cmd_replay, "play a recording in this terminal at its own pace (Ctrl-C stops), or --gif")
    p.add_argument("target", metavar="FILE|ID", help="a .cast file, or a session id (all its parts, in order)")
    p.add_argument("--speed", type=float, default=1.0, metavar="N", help="N times as fast (default 1)")
    p.add_argument("--idle-limit", type=float, metavar="SECONDS", help="cut pauses longer than this")
    p.add_argument("--gif", metavar="FILE", help="write it as an animated GIF instead of playing it (a PR holds one)")
    p.add_argument("--font-size", type=int, metavar="PX", help="the GIF's pixels per em (default 14)")
    return parser


def explain(exc: PtydError) -> str:
    """One line a person can act on."""
    if isinstance(exc, SessionNotFound):
        return f"no session {exc.session_id or ''} (closed, or a mistyped id: see `ptyctl ls`)"
    if isinstance(exc, Unauthorized):
        return (
            f"the daemon refused the token ({exc.message}); the operator token changes each time ptyd starts, "
            "and an agent token dies with its agent"
        )
    if isinstance(exc, SessionBusy):
        return f"the session is busy with send {exc.operation_id}: wait for it to settle, or `ptyctl signal ID INT`"
    if isinstance(exc, SessionExited):
        return "the session's program has exited: `ptyctl read` shows what it printed, `ptyctl close` removes it"
    details = ", ".join(f"{k}={v}" for k, v in exc.data.items() if k != "kind")
    return f"{exc.message} ({exc.kind}{': ' + details if details else ''})"


def fail(ctx_json: bool, code: int, kind: str, message: str, extra: dict[str, Any]) -> int:
    if ctx_json:
        print(json.dumps({"error": {"kind": kind, "message": message, **extra}}), file=sys.stderr)
    else:
        print(f"ptyctl: {message}", file=sys.stderr)
    return code


def run(argv: list[str] | None = None) -> int:
    """Run ptyctl with ``argv`` and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, default in (("socket", None), ("host", None), ("token", None), ("json", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    try:
        return int(args.func(Context(args)))
    except Usage as exc:
        parser.print_usage(sys.stderr)
        return fail(args.json, EXIT_USAGE, "usage", str(exc), {})
    except DaemonUnavailable as exc:
        extra: dict[str, Any] = {"socket": str(exc.socket_path)}
        return fail(args.json, EXIT_UNAVAILABLE, "daemon_unavailable", str(exc), extra)
    except PtydError as exc:
        extra_error: dict[str, Any] = {"code": exc.code, "data": exc.data}
        return fail(args.json, EXIT_DAEMON_ERROR, exc.kind, explain(exc), extra_error)
    except KeyboardInterrupt:
        return fail(args.json, EXIT_INTERRUPTED, "interrupted", "interrupted", {})
    except BrokenPipeError:
        # `ptyctl read ID | head`: the reader left; nothing more to say.
        sys.stderr.close()
        return EXIT_OK


def main() -> NoReturn:
    sys.exit(run())


if __name__ == "__main__":
    main()
