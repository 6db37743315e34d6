"""The TypeScript client (clients/typescript): its types are generated from the daemon's, and its own
``node --test`` suite passes against a real daemon."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Daemon
from sshd import Sshd

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "typescript"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed (Debian: apt-get install nodejs npm)")

# Every test file but limits.test.js, which needs a daemon configured for it.
SUITE = ["client", "conformance", "discovery", "events", "framing", "reconnect"]


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 90) -> str:
    proc = subprocess.run(argv, cwd=CLIENT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def built() -> None:
    """Install the pinned dev dependencies (typescript, @types/node) if needed, then compile with tsc."""
    npm = shutil.which("npm")
    assert npm is not None, "node is installed but npm is not (Debian: apt-get install npm)"
    installed = CLIENT / "node_modules" / ".package-lock.json"
    lock = CLIENT / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        _run([npm, "ci", "--no-audit", "--no-fund"], timeout=300)
    _run([npm, "run", "--silent", "build"])


def _node_test(files: list[str], **extra: str) -> str:
    """Run ``node --test`` on compiled test files; every test must pass and none may be skipped."""
    assert NODE is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    env.update(extra, PTYD_PYTHON=sys.executable)
    paths = [f"dist/test/{name}.test.js" for name in files]
    out = _run([NODE, "--test", "--test-reporter=tap", *paths], env=env)
    assert "\n# fail 0\n" in out, out
    assert "\n# skipped 0\n" in out, out
    assert "\n# todo 0\n" in out, out
    return out


def test_typescript_wire_types_are_generated_from_the_daemons() -> None:
    from ptyd.rpc.codegen_ts import TARGET, render

    assert TARGET.read_text() == render(), "run: python -m ptyd.rpc.codegen_ts"


@needs_node
def test_typescript_client_suite_passes_against_a_real_daemon(daemon: Daemon, token: str, built: None) -> None:
    _node_test(SUITE, PTYD_SOCKET=str(daemon.socket), PTYD_TOKEN=token)


@needs_node
def test_typescript_client_reports_a_limit_as_limit_exceeded(fresh_daemon: Daemon, built: None) -> None:
    fresh_daemon.config_path.write_text("max_sessions_per_agent = 1\n")
    fresh_daemon.start()
    out = _node_test(["limits"], PTYD_LIMITED_SOCKET=str(fresh_daemon.socket))
    assert "\n# pass 1\n" in out, out
    assert fresh_daemon.stop() == 0, fresh_daemon.log()


@needs_node
def test_typescript_client_reaches_a_daemon_through_ssh(sshd: Sshd, daemon: Daemon, token: str, built: None) -> None:
    _node_test(
        ["remote"],
        PTYD_HOST="ssh://testhost",
        PTYD_SSH_COMMAND=" ".join(sshd.ssh),
        PTYD_REMOTE_PTYD=f"ptyd --socket {daemon.socket}",
        PTYD_TOKEN=token,
    )
