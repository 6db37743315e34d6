"""The sandbox profile rules, in process: the config that names them, and the "at least as strict" partial order."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ptyd.config import BUILTIN_PROFILES, Config, ConfigError, SandboxProfile, load_config
from ptyd.errors import SandboxRefused
from ptyd.service.agents import Agent, AgentRegistry, new_key
from ptyd.service.sandbox import agent_roots, choose, looser


def test_an_unknown_profile_in_the_config_is_an_error_that_names_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('sandbox_agents = { "ci" = "workspcae" }\n')
    with pytest.raises(ConfigError, match=r"sandbox_agents\.ci: unknown sandbox profile 'workspcae'"):
        load_config(path)
    path.write_text('sandbox_default = "nope"\n')
    with pytest.raises(ConfigError, match="sandbox_default: unknown sandbox profile 'nope'"):
        load_config(path)


def test_a_built_in_profile_cannot_be_redefined(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[sandbox_profiles.workspace]\nfilesystem = "full"\n')
    with pytest.raises(ConfigError, match="may not redefine the built-in workspace"):
        load_config(path)


def test_a_profile_field_typo_or_bad_value_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    for body in ('filesytem = "readonly"', 'filesystem = "most"', "pids_max = 0", 'writable = ["relative/path"]'):
        path.write_text(f"[sandbox_profiles.mine]\n{body}\n")
        with pytest.raises(ConfigError):
            load_config(path)


def test_a_fresh_install_sandboxes_agents_where_it_can_and_ships_limits() -> None:
    assert Config().sandbox_default == "auto"  # workspace where bubblewrap works, else none, said (below)
    assert not BUILTIN_PROFILES["none"].contained
    for name in ("workspace", "workspace-offline", "readonly"):
        profile = BUILTIN_PROFILES[name]
        assert profile.contained
        # Default limits, enforced where a cgroup hierarchy can (left out elsewhere, not refused).
        assert (profile.pids_max, profile.memory_mib, profile.limits_required) == (4096, 8192, False)
    assert Config().sandbox_tmp_mib == 1024
    config = Config()
    assert choose(config, agent("someone"), None) == "workspace"
    assert choose(config, agent("someone"), None, "bubblewrap (bwrap) is not installed") == "none"
    assert choose(config, agent("someone", operator=True), None) == "none"  # the operator's stay as they were
    # Where none can be made, a stricter profile may still be asked for (and is refused at the spawn, not run).
    assert choose(config, agent("someone"), "readonly", "not installed") == "readonly"


def test_auto_is_reserved_and_weighs_as_workspace_for_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[sandbox_profiles.auto]\nfilesystem = "full"\n')
    with pytest.raises(ConfigError, match="may not redefine the built-in auto"):
        load_config(path)
    config = msgspec.convert({"sandbox_agents": {"prod": "none", "ci": "auto"}}, Config)
    # "none" is looser than what auto stands for, with or without a bubblewrap: a key-less name gets the default.
    assert choose(config, agent("prod"), None) == "workspace"
    assert choose(config, agent("prod"), None, "not installed") == "none"  # ...which is none there, said
    assert choose(config, agent("ci"), None) == "workspace"


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (SandboxProfile(filesystem="readonly"), SandboxProfile(filesystem="workspace"), []),
        (SandboxProfile(filesystem="workspace"), SandboxProfile(filesystem="readonly"), ["filesystem"]),
        (SandboxProfile(filesystem="full"), SandboxProfile(filesystem="workspace"), ["filesystem"]),
        (SandboxProfile(network=True), SandboxProfile(network=False), ["network"]),
        (SandboxProfile(pids_max=64), SandboxProfile(pids_max=32), ["pids_max"]),
        (SandboxProfile(), SandboxProfile(memory_mib=256), ["memory_mib"]),  # no limit is the highest
        (SandboxProfile(memory_mib=128, cpu_percent=50), SandboxProfile(memory_mib=256), []),
        (
            SandboxProfile(filesystem="workspace", writable=("/srv/cache/pip",)),
            SandboxProfile(filesystem="workspace", writable=("/srv/cache",)),
            [],
        ),
        (
            SandboxProfile(filesystem="workspace", hidden=("~/.ssh", "~/.aws")),
            SandboxProfile(filesystem="workspace", hidden=("~/.ssh",)),
            [],
        ),
        (
            SandboxProfile(filesystem="workspace"),
            SandboxProfile(filesystem="workspace", hidden=("~/.ssh",)),
            ["hidden"],
        ),
        (
            SandboxProfile(filesystem="workspace", writable=("/srv/cachex",)),
            SandboxProfile(filesystem="workspace", writable=("/srv/cache",)),
            ["writable"],
        ),
    ],
)
def test_at_least_as_strict_is_decided_property_by_property(
    a: SandboxProfile, b: SandboxProfile, expected: list[str]
) -> None:
    assert looser(a, b) == expected


def test_incomparable_profiles_cannot_stand_in_for_each_other() -> None:
    low_memory = SandboxProfile(filesystem="workspace", memory_mib=256)
    offline = SandboxProfile(filesystem="workspace", network=False)
    assert looser(low_memory, offline) == ["network"]
    assert looser(offline, low_memory) == ["memory_mib"]


def agent(name: str | None, *, operator: bool = False, keys: dict[str, str] | None = None, key: str = "") -> Agent:
    return AgentRegistry(10).register(name, operator=operator, keys=keys, key=key)[0]


def test_an_agent_gets_its_mapped_profile_and_may_only_tighten_it() -> None:
    config = msgspec.convert(
        {
            "sandbox_default": "workspace",
            "sandbox_agents": {"lean-agent": "lean"},
            "sandbox_profiles": {"lean": {"filesystem": "workspace", "memory_mib": 512}},
        },
        Config,
    )
    assert choose(config, agent("someone"), None) == "workspace"
    assert choose(config, agent(None), None) == "workspace"
    assert choose(config, agent("lean-agent"), None) == "lean"  # stricter than the default: no proof needed
    assert choose(config, agent("someone"), "readonly") == "readonly"
    assert choose(config, agent("someone"), "lean") == "lean"
    with pytest.raises(SandboxRefused) as refused:
        choose(config, agent("someone"), "none")
    assert refused.value.data["looser"] == ["filesystem"]
    assert choose(config, agent("someone", operator=True), "none") == "none"  # the operator is the user


def test_a_profile_looser_than_the_default_goes_only_to_an_agent_that_proves_its_name() -> None:
    key, digest = new_key()
    _, other = new_key()
    config = msgspec.convert(
        {
            "sandbox_default": "workspace",
            "sandbox_agents": {"prod": "none", "unkeyed": "none"},
            "agent_keys": {"prod": digest},
        },
        Config,
    )
    keys = config.agent_keys
    assert choose(config, agent("prod", keys=keys, key=key), None) == "none"
    for wrong in ("", other, key + "x"):
        impostor = agent("prod", keys=keys, key=wrong)
        assert not impostor.proven
        assert impostor.identity == impostor.agent_id  # anonymous: not the named agent's caps, limits, workspaces
        assert choose(config, impostor, None) == "workspace"
    assert choose(config, agent("unkeyed", keys=keys), None) == "workspace"  # looser, and nothing proves it
    assert agent("unkeyed", keys=keys).identity == "unkeyed"


def test_an_agents_own_roots_beyond_the_defaults_need_its_key() -> None:
    key, digest = new_key()
    config = msgspec.convert(
        {
            "sandbox_roots": ["/srv/work"],
            "sandbox_agent_roots": {"ci": ["/srv/ci"], "narrow": ["/srv/work/narrow"]},
            "agent_keys": {"ci": digest},
        },
        Config,
    )
    keys = config.agent_keys
    assert agent_roots(config, agent("ci", keys=keys, key=key)) == ("/srv/ci",)
    assert agent_roots(config, agent("ci", keys=keys)) == ("/srv/work",)
    assert agent_roots(config, agent("narrow", keys=keys)) == ("/srv/work/narrow",)  # within the defaults
    assert agent_roots(config, agent("other", keys=keys)) == ("/srv/work",)
