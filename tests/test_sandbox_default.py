"""Sandboxed by default (issue 27, item 3): a config that names no sandbox_default ("auto") runs agents' sessions
in ``workspace`` where bubblewrap works; where it cannot, the daemon says so at start, in daemon_info, in every
such open's result and in ``ptyctl status``, and looks again at the next open (a bubblewrap installed since) and
at SIGHUP. The operator's sessions stay unsandboxed.

Real daemons, real bubblewrap; "cannot" is a bwrap_program that is not there (or a real bubblewrap behind a
wrapper that fails until a flag file exists: the same program, working only after something else changed).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, Daemon, Rpc, RpcError, Shell, wait_until

BWRAP = shutil.which("bwrap")
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed")


def fresh_install(daemon: Daemon, scratch: Path, extra: str = "") -> None:
    """A config that names no sandbox_default (the suite's daemons name "none"): a fresh install's, with the
    scratch directories in the test's temporary directory rather than the home."""
    with open(daemon.config_path, "w") as config:  # not ConfigPath.write_text: it would add sandbox_default
        config.write(f'sandbox_scratch_dir = "{scratch}"\n{extra}')


def ptyctl_status(daemon: Daemon) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    done = subprocess.run(
        [sys.executable, "-m", "ptyd_client", "--socket", str(daemon.socket), "status"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    )
    return done.stdout


def operator(daemon: Daemon) -> str:
    return (daemon.directory / "operator.token").read_text().strip()


@needs_bwrap
def test_a_fresh_install_runs_agents_in_workspace_and_the_operator_unsandboxed(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    fresh_install(fresh_daemon, tmp_path / "scratch")
    fresh_daemon.start()
    assert "sandbox: agents' sessions run in workspace (sandbox_default auto)" in fresh_daemon.log()
    with fresh_daemon.rpc() as rpc:
        info = rpc.call("daemon_info")
        assert (info["sandbox"], info["sandbox_default"], info["sandbox_warning"]) == ("bwrap", "workspace", None)
        token = rpc.call("agent_register", name="fresh")["token"]
        s = Shell(rpc, token, env={"PS1": "$ "})
        assert s.opened["sandbox"] == "workspace"
        assert s.opened.get("sandbox_note") is None
        result = s.send("pwd; touch ~/ptyd-fresh-install-probe; echo tmp=$(df -m --output=size /tmp | tail -1)\n")
        assert str(tmp_path / "scratch") in result["viewport"], result["viewport"]
        assert "Read-only file system" in result["viewport"], result["viewport"]
        assert "tmp=1024" in result["viewport"].replace(" ", ""), result["viewport"]  # sandbox_tmp_mib
        assert not (Path.home() / "ptyd-fresh-install-probe").exists()
        limits = s.call("terminal_status")["limits"]
        # The built-in limits hold where a cgroup hierarchy can enforce them (these machines: v1, root).
        enforced = {name: value for name, value in (limits or {}).items() if value is not None}
        assert enforced in ({}, {"pids_max": 4096}, {"memory_mib": 8192}, {"pids_max": 4096, "memory_mib": 8192})
        if "pids cgroup" in (info["limits"] or ""):
            assert enforced["pids_max"] == 4096
        mine = rpc.call("terminal_open", token=operator(fresh_daemon), cwd=str(fresh_daemon.directory))
        assert mine["sandbox"] == "none"
    status = ptyctl_status(fresh_daemon)
    assert "agents' sandbox: workspace" in status, status
    assert "WARNING" not in status
    # A network of its own too (passt is part of the set-up): the open above took the first namespace.
    assert "sandbox network: its own per session (pasta); " in status, status
    assert "0 of 1 opens found one" in status, status


def test_without_bubblewrap_the_fresh_install_says_so_everywhere_and_looks_again(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    missing = tmp_path / "bin" / "bwrap"  # installed below, while the daemon runs
    fresh_install(fresh_daemon, tmp_path / "scratch", f'bwrap_program = "{missing}"\n')
    fresh_daemon.start()
    log = fresh_daemon.log()
    assert "WARNING" in log, log
    assert "agents' sessions are NOT sandboxed" in log, log
    assert "not installed" in log, log
    with fresh_daemon.rpc() as rpc:
        info = rpc.call("daemon_info")
        assert info["sandbox_default"] == "none"
        assert "not installed" in info["sandbox_warning"]
        assert "apt install bubblewrap" in info["sandbox_warning"]
        token = rpc.call("agent_register", name="fresh")["token"]
        s = Shell(rpc, token, env={"PS1": "$ "}, cwd=str(tmp_path))
        assert s.opened["sandbox"] == "none"
        assert "not installed" in s.opened["sandbox_note"], s.opened
        mine = rpc.call("terminal_open", token=operator(fresh_daemon), cwd=str(tmp_path))
        assert mine["sandbox"] == "none"
        assert mine.get("sandbox_note") is None
        status = ptyctl_status(fresh_daemon)
        assert "agents' sandbox: none" in status
        assert "WARNING: agents' sessions are NOT sandboxed" in status
        if BWRAP is None:
            return
        missing.parent.mkdir()
        missing.symlink_to(BWRAP)  # installed after the daemon started: the next open finds it
        again = Shell(rpc, token, env={"PS1": "$ "})
        assert again.opened["sandbox"] == "workspace"
        assert again.opened.get("sandbox_note") is None
        assert "Read-only file system" in again.send("touch ~/ptyd-fresh-install-probe\n")["viewport"]
        info = rpc.call("daemon_info")
        assert (info["sandbox"], info["sandbox_default"], info["sandbox_warning"]) == ("bwrap", "workspace", None)


@needs_bwrap
def test_sighup_probes_again_what_an_open_does_not(fresh_daemon: Daemon, tmp_path: Path) -> None:
    """The same program failing before and working now (user namespaces enabled since, say): an open does not
    probe it again (that would cost every open a probe), SIGHUP does."""
    flag = tmp_path / "userns-enabled"
    wrapper = tmp_path / "bwrap"
    wrapper.write_text(
        f'#!/bin/sh\n[ -e "{flag}" ] || {{ echo "no user namespaces" >&2; exit 1; }}\nexec {BWRAP} "$@"\n'
    )
    wrapper.chmod(0o755)
    fresh_install(fresh_daemon, tmp_path / "scratch", f'bwrap_program = "{wrapper}"\n')
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="fresh")["token"]
        assert "no user namespaces" in rpc.call("daemon_info")["sandbox_warning"]
        flag.touch()
        opened = rpc.call("terminal_open", token=token, cwd=str(tmp_path))
        assert opened["sandbox"] == "none"
        assert "no user namespaces" in opened["sandbox_note"]
        assert fresh_daemon.proc is not None
        fresh_daemon.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "configuration reloaded" in fresh_daemon.log(), message="the reload")
        assert "sandbox: agents' sessions run in workspace" in fresh_daemon.log()
        assert rpc.call("daemon_info")["sandbox_default"] == "workspace"
        assert rpc.call("terminal_open", token=token)["sandbox"] == "workspace"


def test_an_explicit_workspace_default_is_refused_not_degraded(fresh_daemon: Daemon, tmp_path: Path) -> None:
    fresh_daemon.config_path.write_text(f'sandbox_default = "workspace"\nbwrap_program = "{tmp_path / "no-bwrap"}"\n')
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        info = rpc.call("daemon_info")
        assert info["sandbox_default"] == "workspace"
        assert info["sandbox_warning"] is None
        token = rpc.call("agent_register", name="strict")["token"]
        with pytest.raises(Exception, match="not installed"):
            Shell(rpc, token, cwd=str(tmp_path))
        assert isinstance(rpc, Rpc)


@needs_bwrap
def test_the_operator_may_sandbox_its_own_sessions_and_then_asks_none_looser(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    """Issue 27: the operator token's sessions stay unsandboxed unless configured (sandbox_operator)."""
    fresh_install(fresh_daemon, tmp_path / "scratch", 'sandbox_operator = "workspace-offline"\n')
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        mine = Shell(rpc, operator(fresh_daemon), env={"PS1": "$ "})
        assert mine.opened["sandbox"] == "workspace-offline"
        result = mine.send("touch ~/ptyd-operator-probe; ls /proc | grep -c '^[0-9]'\n")
        assert "Read-only file system" in result["viewport"], result["viewport"]
        assert not (Path.home() / "ptyd-operator-probe").exists()
        with pytest.raises(RpcError) as looser:
            rpc.call("terminal_open", token=operator(fresh_daemon), sandbox="none")
        assert looser.value.kind == "sandbox_refused"
        assert rpc.call("terminal_open", token=operator(fresh_daemon), sandbox="readonly")["sandbox"] == "readonly"
