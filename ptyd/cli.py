"""``ptyd``: run the daemon in the foreground (no self-daemonizing; logs go to stderr).

``ptyd dial-stdio`` bridges stdin/stdout to the running daemon (what ``ssh host ptyd dial-stdio`` runs for a
client on another machine), ``ptyd operator-token`` prints the running daemon's operator token (what ``ptyctl
--host`` fetches), ``ptyd install-user`` installs the systemd user units shipped in the package, ``ptyd
--print-config`` the configuration in effect, ``ptyd agent-key NAME`` a registration key that proves an agent's
name. The daemon's modules are imported only
to run it: dial-stdio starts in the time of a bare interpreter.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ptyd import __version__
from ptyd.config import (
    OPERATOR_TOKEN_FILE,
    Config,
    ConfigError,
    default_config_path,
    default_socket_path,
    load_config,
)

WEB_PORT = 8707  # ptyd web's default port on 127.0.0.1: a fixed one, so the printed URL can be bookmarked
SOCKET_HELP = "socket path (default: $PTYD_SOCKET, $XDG_RUNTIME_DIR/ptyd/ptyd.sock, /tmp/ptyd-$UID/ptyd.sock)"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ptyd",
        description="Serve persistent PTY sessions over a Unix socket.",
        epilog="Configuration keys, defaults and reasons: docs/config.md (or ptyd --print-config).",
    )
    parser.add_argument("--socket", type=Path, help=SOCKET_HELP)
    parser.add_argument("--config", type=Path, help="TOML config file (default: $XDG_CONFIG_HOME/ptyd/config.toml)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--print-config", action="store_true", help="print the configuration in effect (defaults and file) and exit"
    )
    parser.add_argument(
        "--check-handover",
        action="store_true",
        help="read a handover document on stdin and exit 0 if this ptyd can take it over (the running daemon "
        "runs this before it execs the newly installed ptyd)",
    )
    parser.add_argument("--version", action="version", version=f"ptyd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    dial = sub.add_parser(
        "dial-stdio",
        help="bridge stdin/stdout to the running daemon (for `ssh HOST ptyd dial-stdio`)",
        description="Connect to the running daemon's socket and copy stdin to it and its answers to stdout, "
        "until the daemon closes the connection. Exit 3 if it cannot be reached.",
    )
    dial.add_argument("--socket", type=Path, default=argparse.SUPPRESS, help=SOCKET_HELP)
    token = sub.add_parser(
        "operator-token",
        help="print the running daemon's operator token (every agent's sessions; what ptyctl uses)",
        description="Print the operator token the running daemon wrote beside its socket. Exit 3 if there is none.",
    )
    token.add_argument("--socket", type=Path, default=argparse.SUPPRESS, help=SOCKET_HELP)
    issue = sub.add_parser(
        "agent-key",
        help="issue a registration key that proves an agent's name (for a profile looser than the default)",
        description="Print a fresh registration key for the agent NAME, to give its harness (agent_register's "
        "key), and the config line that makes the daemon accept it (agent_keys, a digest only; SIGHUP reloads). "
        "Issuing again replaces the key once the line is replaced.",
    )
    issue.add_argument("name", metavar="NAME")
    web = sub.add_parser(
        "web",
        help="serve a read-only dashboard of every session in the browser (live screens, recordings)",
        description="Serve a read-only dashboard: every session, its live screen as the daemon renders it, and "
        "the replay of recordings. A client of the running daemon with its operator token; prints the URL (with "
        "the token) to open. Listens on 127.0.0.1 or a Unix socket only, for processes of this user only.",
    )
    web.add_argument("--socket", type=Path, default=argparse.SUPPRESS, help=SOCKET_HELP)
    web.add_argument(
        "--listen",
        default=f"127.0.0.1:{WEB_PORT}",
        metavar="ADDRESS",
        help=f"127.0.0.1:PORT (0: a free one), or unix:PATH (default 127.0.0.1:{WEB_PORT})",
    )
    keeper = sub.add_parser(
        "keeper",
        help="hold the PTY masters of a daemon that runs without systemd (started by the daemon: fd_keeper)",
        description="Keep the PTY masters the daemon hands over, so that its sessions outlive a crash; the next "
        "daemon takes them back. Started by the daemon itself when fd_keeper is on.",
    )
    keeper.add_argument("--dir", type=Path, required=True, help="the daemon's runtime directory")
    keeper.add_argument("--grace-ms", type=float, required=True, help="how long to wait for a next daemon")
    sub.add_parser(
        "install-user",
        help="install the systemd user units (ptyd.socket, ptyd.service) with ExecStart = this ptyd",
        description="Copy the units shipped in this package to the user unit directory, pointing at this ptyd "
        "($PTYD_BIN overrides), and say what to run next (or instead, without a user service manager).",
    )
    sub.add_parser(
        "uninstall-user",
        help="stop and remove the systemd user units (this closes every session)",
        description="Stop and disable ptyd.socket and ptyd.service if a user manager is reachable, then remove them.",
    )
    return parser.parse_args(argv)


UNITS = Path(__file__).resolve().parent / "daemon" / "units"  # package data: the units and their installer


def this_ptyd() -> str | None:
    """The path of the ``ptyd`` command running now (the console script), for the unit's ExecStart."""
    import shutil

    for candidate in (sys.argv[0], str(Path(sys.executable).parent / "ptyd")):
        if Path(candidate).name == "ptyd" and shutil.which(candidate):
            return str(Path(candidate).absolute())
    return None


def install_units(action: str) -> int:
    """``ptyd install-user`` / ``uninstall-user``: the shipped install.sh, on the units inside this package."""
    import os
    import subprocess

    env = dict(os.environ)
    if action == "install" and not env.get("PTYD_BIN"):
        ptyd = this_ptyd()
        if ptyd is None:
            print("ptyd install-user: cannot tell where this ptyd is installed; set PTYD_BIN", file=sys.stderr)
            return 1
        env["PTYD_BIN"] = ptyd
    return subprocess.run(["sh", str(UNITS / "install.sh"), action], env=env, check=False).returncode


def print_operator_token(socket_path: Path) -> int:
    path = socket_path.parent / OPERATOR_TOKEN_FILE
    try:
        print(path.read_text().strip())
    except OSError as exc:
        print(f"ptyd operator-token: cannot read {path}: {exc.strerror} (is ptyd running?)", file=sys.stderr)
        return 3
    return 0


def print_agent_key(name: str) -> int:
    from ptyd.service.agents import new_key

    if not name or len(name) > 128 or '"' in name or "\\" in name:
        print("ptyd agent-key: NAME must be 1-128 characters without quotes or backslashes", file=sys.stderr)
        return 2
    key, digest = new_key()
    print(f"key (give it to the harness; shown once): {key}")
    print(f'under [agent_keys] in {default_config_path()} (then SIGHUP): "{name}" = "{digest}"')
    return 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    socket_path: Path | None = args.socket
    if args.command == "dial-stdio":
        from ptyd.daemon.dial import dial_stdio

        sys.exit(dial_stdio(socket_path or default_socket_path()))
    if args.command == "operator-token":
        sys.exit(print_operator_token(socket_path or default_socket_path()))
    if args.command == "agent-key":
        sys.exit(print_agent_key(args.name))
    if args.command in ("install-user", "uninstall-user"):
        sys.exit(install_units(args.command.removesuffix("-user")))
    if args.command == "web":
        from ptyd_web.server import run

        sys.exit(run(socket_path or default_socket_path(), args.listen))
    if args.command == "keeper":
        from ptyd.continuity.keeper import secret_from_stdin, serve

        sys.exit(serve(args.dir, args.grace_ms / 1000, secret_from_stdin()))
    try:
        config = load_config(args.config, required=args.config is not None)
    except ConfigError as exc:
        print(f"ptyd: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.check_handover:
        sys.exit(check_handover(config))
    if args.print_config:
        from ptyd.configdoc import toml

        sys.stdout.write(toml(config, commented=False))
        sys.exit(0)
    run_daemon(config, args.config, socket_path, args.log_level)


def check_handover(config: Config) -> int:
    """``ptyd --check-handover``: import everything the daemon runs and read the document on stdin. The native
    engine is loaded only where the daemon would load it (``engine_process = "daemon"``): engine workers load it
    themselves, and loading it here cost the pre-flight 0.5 s of CPU beside floods (issue 28)."""
    import ptyd.daemon.app  # noqa: F401 - the daemon and every module it imports must import
    from ptyd.continuity.document import StateError, decode
    from ptyd.terminal.engines import engine_name

    try:
        state = decode(sys.stdin.buffer.read())
    except StateError as exc:
        print(exc, file=sys.stderr)
        return 1
    engine = engine_name(config.emulator, load=config.engine_process == "daemon")
    print(f"ptyd {__version__} can take over {len(state.sessions)} sessions (engine {engine})")
    return 0


def run_daemon(config: Config, config_path: Path | None, socket_path: Path | None, log_level: str) -> None:
    import logging

    import uvloop

    from ptyd.daemon.app import Daemon
    from ptyd.daemon.runtime import StartupError

    logging.basicConfig(level=log_level.upper(), format="ptyd: %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    daemon = Daemon(config, config_path, socket_path)
    try:
        code = uvloop.run(daemon.run())
    except StartupError as exc:
        print(f"ptyd: {exc}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)
