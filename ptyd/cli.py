"""``ptyd``: run the daemon in the foreground (no self-daemonizing; logs go to stderr)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import uvloop

from ptyd import __version__
from ptyd.config import ConfigError, load_config
from ptyd.daemon import Daemon, StartupError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ptyd", description="Serve persistent PTY sessions over a Unix socket.")
    parser.add_argument(
        "--socket",
        type=Path,
        help="socket path (default: $PTYD_SOCKET, $XDG_RUNTIME_DIR/ptyd/ptyd.sock, /tmp/ptyd-$UID/ptyd.sock)",
    )
    parser.add_argument("--config", type=Path, help="TOML config file (default: $XDG_CONFIG_HOME/ptyd/config.toml)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--version", action="version", version=f"ptyd {__version__}")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="ptyd: %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        config = load_config(args.config, required=args.config is not None)
    except ConfigError as exc:
        print(f"ptyd: {exc}", file=sys.stderr)
        sys.exit(2)
    daemon = Daemon(config, args.config, args.socket)
    try:
        code = uvloop.run(daemon.run())
    except StartupError as exc:
        print(f"ptyd: {exc}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)
