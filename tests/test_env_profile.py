"""One environment default for sessions agents open, on every route: the agent preset (no pagers, editors or
prompts) for an agent's token, the environment as it is for the operator (a person at ptyctl), ``env_profile`` to
choose either, and the open result saying which was applied."""

from __future__ import annotations

import os

import pytest

from conftest import Daemon, Rpc, RpcError, Shell
from ptyd_client import Client

PROBE = "echo pager=$PAGER editor=$GIT_EDITOR debian=$DEBIAN_FRONTEND\n"
AGENT = "pager=cat editor=true debian=noninteractive"
HUMAN = "pager={} editor={} debian={}".format(
    *(os.environ.get(name, "") for name in ("PAGER", "GIT_EDITOR", "DEBIAN_FRONTEND"))
)


def probe(shell: Shell) -> str:
    return str(shell.send(PROBE)["viewport"].splitlines()[-2]).rstrip()


@pytest.fixture
def operator(daemon: Daemon) -> str:
    return (daemon.directory / "operator.token").read_text().strip()


def test_an_agent_token_gets_the_agent_preset_by_default(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, env={"PS1": "$ "})
    assert s.opened["env_profile"] == "agent"
    assert probe(s) == AGENT
    s.close()


def test_human_leaves_the_environment_as_it_is(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, env={"PS1": "$ "}, env_profile="human")
    assert s.opened["env_profile"] == "human"
    assert probe(s) == HUMAN
    s.close()


def test_the_operator_gets_a_persons_environment_unless_it_asks(rpc: Rpc, operator: str) -> None:
    person = Shell(rpc, operator, env={"PS1": "$ "})
    assert person.opened["env_profile"] == "human"
    assert probe(person) == HUMAN
    person.close()
    for params in ({"env_profile": "agent"}, {"profile": "agent"}):  # the older spelling still works
        asked = Shell(rpc, operator, env={"PS1": "$ "}, **params)
        assert asked.opened["env_profile"] == "agent"
        assert probe(asked) == AGENT
        asked.close()


def test_the_callers_own_variables_win_over_the_preset(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, env={"PS1": "$ ", "PAGER": "less"})
    assert probe(s).startswith("pager=less editor=true")
    s.close()


def test_an_unknown_preset_is_a_typed_error(rpc: Rpc, token: str) -> None:
    with pytest.raises(RpcError) as err:
        rpc.call("terminal_open", token=token, env_profile="robot")
    assert err.value.code == -32602
    assert "$.env_profile" in err.value.data["detail"]


def test_the_python_client_route_gets_the_same_default(daemon: Daemon) -> None:
    with Client(daemon.socket) as client:
        client.agent_register("route")
        with client.open(env={"PS1": "$ "}) as shell:
            assert shell.send(PROBE)["viewport"].splitlines()[-2].rstrip() == AGENT
        client.agent_release()
