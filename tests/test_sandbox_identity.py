"""A name is no identity without its key (issue 27, attack 3), through a real daemon: a registration under a
name mapped to `none` gets `none` only with the name's registration key; without it, the default sandbox. The
per-agent session cap follows the identity: registering again does not reset it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, Daemon, RpcError
from ptyd.service.agents import new_key

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_a_looser_profile_needs_the_names_key_and_the_session_cap_follows_the_name(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    key, digest = new_key()
    fresh_daemon.config_path.write_text(
        'sandbox_default = "workspace"\n'
        f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n'
        "max_sessions_per_agent = 1\n"
        'sandbox_agents = { "prod-ssh" = "none", "unkeyed" = "none" }\n'
        f'agent_keys = {{ "prod-ssh" = "{digest}" }}\n'
    )
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        proven = rpc.call("agent_register", name="prod-ssh", key=key)
        assert proven["proven"] is True
        assert rpc.call("terminal_open", token=proven["token"])["sandbox"] == "none"
        for wrong in (None, new_key()[0]):
            impostor = rpc.call("agent_register", name="prod-ssh", **({"key": wrong} if wrong else {}))
            assert impostor["proven"] is False
            # Its own identity: the proven agent's cap (1, spent) does not stop it, and it gets the default.
            assert rpc.call("terminal_open", token=impostor["token"])["sandbox"] == "workspace"
        assert "does not prove it" in fresh_daemon.log()
        unkeyed = rpc.call("agent_register", name="unkeyed")
        assert rpc.call("terminal_open", token=unkeyed["token"])["sandbox"] == "workspace"  # nothing proves it
        again = rpc.call("agent_register", name="unkeyed")  # the same name: the same agent, the same cap
        with pytest.raises(RpcError) as capped:
            rpc.call("terminal_open", token=again["token"])
        assert capped.value.data["limit"] == "max_sessions_per_agent"
        with pytest.raises(RpcError) as capped:
            rpc.call("terminal_open", token=rpc.call("agent_register", name="prod-ssh", key=key)["token"])
        assert capped.value.data["limit"] == "max_sessions_per_agent"


def test_ptyd_agent_key_prints_a_key_and_the_digest_the_config_takes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ptyd", "agent-key", "ci"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    key = done.stdout.splitlines()[0].rsplit(" ", 1)[1]
    line = done.stdout.splitlines()[1].split(": ", 1)[1]
    from ptyd.config import load_config
    from ptyd.service.agents import proves

    (tmp_path / "config.toml").write_text(f"[agent_keys]\n{line}\n")
    config = load_config(tmp_path / "config.toml")
    assert proves(config.agent_keys, "ci", key)
    assert not proves(config.agent_keys, "ci", key[:-1])
    assert key not in (tmp_path / "config.toml").read_text()
