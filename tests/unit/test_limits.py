"""The limits layer in-process: an agent's group and its sessions' cgroups in real v1 hierarchies (root here), what
is refused where no hierarchy can enforce an agent's limit, and the v2 layout (a session leaf inside its agent's
group, never a group taken for a session), which these hybrid machines can only show on a plain directory tree.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from ptyd import protocol as p
from ptyd.backends.os.containment import CgroupContainment
from ptyd.backends.os.sandbox.limits import Limiter, LimitScope, group_name
from ptyd.config import Config, SandboxProfile
from ptyd.errors import SandboxUnavailable
from tests.unit.conftest import TOKEN, local_service, run

HERD = SandboxProfile(pids_max=40, agent_pids_max=60)
AGENT_ONLY = SandboxProfile(agent_pids_max=60)


@pytest.fixture
def v1() -> Iterator[Limiter]:
    """A limiter over the real writable v1 hierarchies, under an instance of the test's own."""
    limiter = Limiter.detect(f"unit-{secrets.token_hex(4)}", None)
    if "pids" not in limiter.v1:
        pytest.skip(f"no writable v1 pids hierarchy here ({limiter.describe()})")
    yield limiter
    limiter.close()


def test_an_agents_sessions_are_made_in_its_group_which_holds_the_aggregate_limit(v1: Limiter) -> None:
    group = v1.group("herd", HERD, v2_leaf=False)
    assert group is not None
    base = v1.v1["pids"]
    assert group.paths() == [base / group_name("herd")]
    first = v1.scope("pty-one", HERD, None, group)
    second = v1.scope("pty-two", AGENT_ONLY, None, group)  # no limit of its own: still counted in the group
    assert first is not None
    assert second is not None
    assert (base / group_name("herd") / "pids.max").read_text().strip() == "60"
    assert (base / group_name("herd") / "pty-one" / "pids.max").read_text().strip() == "40"
    assert (base / group_name("herd") / "pty-two" / "pids.max").read_text().strip() == "max"
    assert v1.group("other", HERD, v2_leaf=False) is not None
    assert (base / group_name("other")).is_dir()  # another agent: a group of its own

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        first.attach(sleeper.pid)
        assert f"/{base.name}/{group.name}/pty-one\n" in Path(f"/proc/{sleeper.pid}/cgroup").read_text()
        assert (base / group.name / "pids.current").read_text().strip() == "1"  # counted in the group too
        assert first.remove() is False  # busy while its process is in it
    finally:
        sleeper.kill()
        sleeper.wait()
    deadline = time.monotonic() + 5
    while not first.remove() and time.monotonic() < deadline:  # the reaped process leaves its cgroup a moment after
        time.sleep(0.002)
    assert not (base / group.name / "pty-one").exists()
    assert (base / group.name).is_dir()  # the second session is still in it
    assert second.remove() is True
    assert not (base / group.name).exists()  # gone with the agent's last session


def test_a_group_made_once_keeps_its_limits_until_its_last_session_is_gone(v1: Limiter) -> None:
    v1.group("herd", HERD, v2_leaf=False)
    again = v1.group("herd", SandboxProfile(agent_pids_max=500), v2_leaf=False)
    assert again is not None
    assert (v1.v1["pids"] / again.name / "pids.max").read_text().strip() == "60"  # until its last session is gone
    again.remove()
    assert not (v1.v1["pids"] / again.name).exists()


def test_a_scope_saved_in_a_group_is_found_again_with_its_group(v1: Limiter) -> None:
    group = v1.group("herd", HERD, v2_leaf=False)
    scope = v1.scope("pty-one", HERD, None, group)
    assert scope is not None
    assert group is not None
    again = LimitScope.at(scope.paths())
    assert again is not None
    assert again.groups == group.paths()
    assert again.remove() is True
    assert not group.paths()[0].exists()


def test_sweep_removes_stale_groups_and_sessions_but_the_kept_ones(v1: Limiter) -> None:
    base = v1.v1["pids"]
    v1.scope("pty-kept", HERD, None, v1.group("herd", HERD, v2_leaf=False))
    stale = base / "agent-0123456789abcdef"
    (stale / "pty-stale").mkdir(parents=True)
    (base / "pty-loose").mkdir()
    v1.sweep(keep={"pty-kept"})
    assert not stale.exists()
    assert not (base / "pty-loose").exists()
    assert (base / group_name("herd") / "pty-kept").is_dir()
    v1.sweep(keep=set())
    assert not (base / group_name("herd")).exists()


def test_an_agent_limit_no_hierarchy_enforces_is_refused() -> None:
    nowhere = Limiter(set(), {})
    with pytest.raises(SandboxUnavailable) as refused:
        nowhere.group("herd", SandboxProfile(agent_memory_mib=512, agent_pids_max=64), v2_leaf=True)
    assert refused.value.data["controllers"] == ["memory", "pids"]
    assert nowhere.group("herd", SandboxProfile(pids_max=8), v2_leaf=True) is None  # no aggregate asked


def test_an_open_whose_agent_limit_cannot_be_enforced_is_refused_before_anything_starts() -> None:
    config = {
        "sandbox_agents": {"herd": "herd"},
        "sandbox_profiles": {"herd": SandboxProfile(agent_pids_max=64)},
    }

    async def main() -> None:
        async with local_service(**config) as service:  # no confinement: no hierarchy at all
            agent, _ = service.agents.register("herd")
            with pytest.raises(SandboxUnavailable):
                await service.open(agent, p.TerminalOpenParams(token=TOKEN, type="exec", argv=["cat"]))
            assert service.session_count == 0
            other, _ = service.agents.register("free")  # an agent without aggregate limits still opens
            await service.open(other, p.TerminalOpenParams(token=TOKEN, type="exec", argv=["cat"], idle_ms=100))
            assert service.session_count == 1

    run(main)


def test_v2_a_session_leaf_is_made_in_its_agents_group_and_leftovers_never_take_a_group(tmp_path: Path) -> None:
    limiter = Limiter({"memory", "pids"}, {}, v2_base=tmp_path)
    containment = CgroupContainment(tmp_path)
    profile = SandboxProfile(memory_mib=64, agent_memory_mib=128, agent_pids_max=60)
    group = limiter.group("herd", profile, v2_leaf=True)
    assert group is not None
    assert group.v2_name == group_name("herd")
    assert group.paths() == [tmp_path / group.name]  # one directory for every v2 controller
    assert (tmp_path / group.name / "memory.max").read_text().strip() == str(128 << 20)
    assert (tmp_path / group.name / "pids.max").read_text().strip() == "60"
    leaf = containment.scope("pty-one", group.v2_name)
    loose = containment.scope("pty-loose")
    assert leaf.cgroup == str(tmp_path / group.name / "pty-one")
    scope = limiter.scope("pty-one", profile, Path(str(leaf.cgroup)), group)
    assert scope is not None
    assert scope.paths() == [leaf.cgroup, leaf.cgroup]  # memory and pids, both in the leaf
    assert (tmp_path / group.name / "pty-one" / "memory.max").read_text().strip() == str(64 << 20)
    assert sorted(s.cgroup or "" for s in containment.leftovers()) == sorted([leaf.cgroup, loose.cgroup])


def test_config_bounds_the_agent_limits_like_the_session_ones() -> None:
    for field, value in (("agent_memory_mib", 8), ("agent_pids_max", 4), ("agent_cpu_percent", 0)):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert({"sandbox_profiles": {"x": {field: value}}}, Config)
    assert msgspec.convert({"sandbox_profiles": {"x": {"agent_pids_max": 8}}}, Config)


def test_an_agents_cpu_share_is_a_quota_on_its_group(v1: Limiter) -> None:
    if "cpu" not in v1.v1:
        pytest.skip("no writable v1 cpu hierarchy here")
    group = v1.group("herd", SandboxProfile(agent_cpu_percent=150), v2_leaf=False)
    assert group is not None
    assert group.controllers() == ["cpu"]
    path = v1.v1["cpu"] / group.name
    assert (path / "cpu.cfs_period_us").read_text().strip() == "100000"
    assert (path / "cpu.cfs_quota_us").read_text().strip() == "150000"  # one and a half CPUs for all its sessions
    scope = v1.scope("pty-one", SandboxProfile(), None, group)
    assert scope is not None
    assert scope.paths() == [str(path / "pty-one")]
    assert (path / "pty-one" / "cpu.cfs_quota_us").read_text().strip() == "-1"  # no share of its own
    assert scope.remove() is True
    assert not path.exists()
