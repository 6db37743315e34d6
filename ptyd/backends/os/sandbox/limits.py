"""Resource limits (memory, processes, CPU) of one session and of one agent's sessions together, by cgroups.

Each controller comes from where ptyd may use it: cgroup v2, in the session's own leaf (the containment cgroup),
when the daemon's delegated subtree has the controller (a systemd service with ``Delegate=yes``); else a cgroup
v1 hierarchy of that controller that the daemon can write (root on a hybrid layout), in a directory per session
beside the daemon's own cgroup. A profile asking for a limit no hierarchy can enforce is refused
(``sandbox_unavailable``): rlimits are per process or per user, not per session, so they are no substitute.

An agent's aggregate limits (``agent_memory_mib`` ...) sit on an agent group, ``agent-<hash of its name>``, made
at its first limited session and removed with its last: its sessions' cgroups of those controllers are made in
it, so the kernel holds them to both limits. In v2 the group holds only leaves (no process lives in a cgroup
with children there), and the session's containment leaf itself goes in it.

The kernel counts what the limits did: ``oom_kill`` (memory.events in v2, memory.oom_control in v1) and the
forks refused at ``pids.max`` (pids.events); a send reports whether they grew while it ran.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
from pathlib import Path
from typing import NamedTuple, final

import msgspec

from ptyd.backends.os.containment import GROUP_PREFIX
from ptyd.backends.os.sandbox.cgroupfs import CONTROLLERS, Amounts, Place, apply, counter, enable_v2, v1_bases, write
from ptyd.config import SandboxProfile
from ptyd.errors import SandboxUnavailable


class Counters(NamedTuple):
    oom_kills: int
    pids_refused: int


def group_name(agent: str) -> str:
    """The agent group's directory name: a hash, since an agent's name may hold anything (a "/", "..")."""
    return GROUP_PREFIX + hashlib.sha256(agent.encode()).hexdigest()[:16]


def _rmdir_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):  # busy: it still holds another session, or a process leaving
        path.rmdir()


@final
class AgentGroup:
    """One agent's group cgroups, one per controller its profile limits in aggregate."""

    def __init__(self, name: str, places: list[Place]) -> None:
        self.name = name
        self.places = places

    def controllers(self) -> list[str]:
        return [place.controller for place in self.places]

    @property
    def v2_name(self) -> str | None:
        """The group's name in the v2 tree when it has v2 limits: the session's leaf must be made in it."""
        return self.name if any(place.v2 for place in self.places) else None

    def v1_parent(self, controller: str) -> Path | None:
        return next((p.path for p in self.places if p.controller == controller and not p.v2), None)

    def paths(self) -> list[Path]:
        return list(dict.fromkeys(place.path for place in self.places))

    def remove(self) -> None:
        """Remove the group's directories if no session is left in them."""
        for path in self.paths():
            _rmdir_quietly(path)


@final
class LimitScope:
    """One session's limit cgroups, and the agent group holding them."""

    def __init__(self, places: list[Place], groups: list[Path] | None = None) -> None:
        self.places = places
        self.groups = groups or []

    def paths(self) -> list[str]:
        return [str(place.path) for place in self.places]

    @classmethod
    def at(cls, paths: list[str]) -> LimitScope | None:
        """A session's scope again after a handover or crash, from the paths it was saved with."""
        places = []
        for path in map(Path, paths):
            v2 = (path / "cgroup.events").exists()
            for controller in CONTROLLERS:
                files = ("memory.max", "memory.limit_in_bytes", "pids.max", "cpu.max", "cpu.cfs_quota_us")
                if any(name.startswith(controller + ".") and (path / name).exists() for name in files):
                    places.append(Place(controller, path, v2=v2))
        groups = [path.parent for path in map(Path, paths) if path.parent.name.startswith(GROUP_PREFIX)]
        return cls(places, list(dict.fromkeys(groups))) if places else None

    def attach(self, pid: int) -> None:
        for place in self.places:
            if not place.v2:  # the v2 leaf is the containment's cgroup: the pid is attached there already
                write(place.path / "cgroup.procs", str(pid))

    def counters(self) -> Counters:
        """The session's own counters: the kernel counts a kill or a refused fork of the session's processes
        there whether the session's limit or its agent's caused it (v2 pids: only the session's, see sandbox.md)."""
        oom = pids = 0
        for place in self.places:
            if place.controller == "memory":
                oom = counter(f"{place.path}/{'memory.events' if place.v2 else 'memory.oom_control'}", b"oom_kill")
            elif place.controller == "pids":
                pids = counter(f"{place.path}/pids.events", b"max")
        return Counters(oom, pids)

    def remove(self) -> bool:
        """Remove the v1 directories (the v2 leaf goes with the containment scope), then the agent group if this
        was its last session; False while still busy."""
        done = True
        for place in self.places:
            if not place.v2:
                try:
                    place.path.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    done = done and exc.errno != errno.EBUSY
        if done:
            for group in self.groups:
                _rmdir_quietly(group)
        return done


@final
class Limiter:
    """Which hierarchy enforces each controller, decided once at start-up."""

    def __init__(self, v2: set[str], v1: dict[str, Path], v2_base: Path | None = None) -> None:
        self.v2 = v2
        self.v1 = {c: path for c, path in v1.items() if c not in v2}
        self.v2_base = v2_base  # the containment's instance cgroup: the session leaves' and agent groups' parent

    @classmethod
    def detect(cls, instance: str, leaf_parent: Path | None) -> Limiter:
        v2 = enable_v2(leaf_parent, set(CONTROLLERS)) if leaf_parent is not None else set()
        return cls(v2, v1_bases(instance) if set(CONTROLLERS) - v2 else {}, leaf_parent)

    def describe(self) -> str:
        where = dict.fromkeys(self.v2, "cgroup2") | dict.fromkeys(self.v1, "cgroup1")
        return ", ".join(f"{c} {where.get(c, 'none')}" for c in CONTROLLERS)

    def check(self, profile: SandboxProfile, *, v2_leaf: bool, agent: SandboxProfile | None = None) -> None:
        """Refuse, before anything starts, a profile whose limits (or the agent's aggregate ones) cannot all be
        enforced."""
        needed = set(Amounts.session(profile).controllers())
        if agent is not None:
            needed |= set(Amounts.agent(agent).controllers())
        missing = [c for c in CONTROLLERS if c in needed and c not in self.v1 and not (c in self.v2 and v2_leaf)]
        if missing:
            raise SandboxUnavailable(
                f"no cgroup hierarchy ptyd may use has the {', '.join(missing)} controller, so the profile's "
                "limits cannot be enforced",
                reason="no_cgroup_controller",
                controllers=missing,
            )

    def enforceable(self, profile: SandboxProfile, *, v2_leaf: bool) -> SandboxProfile:
        """The profile with the limits no hierarchy here can enforce left out, if it does not require them (the
        built-in profiles' default limits); as it is otherwise (check refuses it then)."""
        if profile.limits_required:
            return profile
        fields = {"memory": ("memory_mib",), "pids": ("pids_max",), "cpu": ("cpu_percent",)}
        dropped = {
            name: None
            for controller, names in fields.items()
            if controller not in self.v1 and not (controller in self.v2 and v2_leaf)
            for name in names
            if getattr(profile, name) is not None
        }
        return msgspec.structs.replace(profile, **dropped) if dropped else profile

    def group(self, agent: str, profile: SandboxProfile | None, *, v2_leaf: bool) -> AgentGroup | None:
        """The agent's group, made with its aggregate limits at its first limited session, else as it is (its
        limits stay those it was made with until its last session is gone). None: no aggregate limits."""
        amounts = Amounts.agent(profile) if profile is not None else None
        if profile is None or amounts is None or not amounts.controllers():
            return None
        self.check(SandboxProfile(), v2_leaf=v2_leaf, agent=profile)
        name = group_name(agent)
        places: list[Place] = []
        made: list[Path] = []
        try:
            for controller in amounts.controllers():
                v2 = controller in self.v2 and self.v2_base is not None
                path = (self.v2_base if v2 and self.v2_base is not None else self.v1[controller]) / name
                place = Place(controller, path, v2=v2)
                places.append(place)
                if path not in made:
                    path.parent.mkdir(exist_ok=True)
                    try:
                        path.mkdir()
                    except FileExistsError:
                        continue
                    made.append(path)
                    if v2:  # the session leaves below get the controllers, for their own limits
                        enable_v2(path, self.v2)
                apply(place, amounts)
        except OSError:
            for path in made:
                _rmdir_quietly(path)
            raise
        return AgentGroup(name, places)

    def scope(
        self, session_id: str, profile: SandboxProfile, v2_leaf: Path | None, group: AgentGroup | None = None
    ) -> LimitScope | None:
        """The session's limit cgroups with the profile's limits written, in its agent's group for the controllers
        the group limits (None: neither the profile nor the group has limits)."""
        own = Amounts.session(profile)
        needed = set(own.controllers()) | set(group.controllers() if group is not None else [])
        if not needed:
            return None
        self.check(profile, v2_leaf=v2_leaf is not None)
        places = []
        for controller in CONTROLLERS:
            if controller not in needed:
                continue
            if controller in self.v2 and v2_leaf is not None:
                places.append(Place(controller, v2_leaf, v2=True))
            else:
                parent = group.v1_parent(controller) if group is not None else None
                path = (parent or self.v1[controller]) / session_id
                self.v1[controller].mkdir(exist_ok=True)
                path.mkdir(exist_ok=True)
                places.append(Place(controller, path, v2=False))
        scope = LimitScope(places, group.paths() if group is not None else [])
        try:
            for place in places:
                apply(place, own)
        except OSError:
            scope.remove()
            raise
        return scope

    def close(self) -> None:
        """At shutdown: remove the (now empty) directories; a session left behind keeps its own, harmlessly."""
        self.sweep(keep=set())
        for base in self.v1.values():
            with contextlib.suppress(OSError):
                base.rmdir()

    def sweep(self, keep: set[str]) -> None:
        """Remove the empty v1 directories and agent groups a previous daemon left, but those of sessions in
        ``keep`` (v2 session leaves are the containment's to remove, before this)."""
        for base in self.v1.values():
            _sweep(base, keep)
        if self.v2_base is not None:
            with contextlib.suppress(OSError):
                for path in self.v2_base.iterdir():
                    if path.is_dir() and path.name.startswith(GROUP_PREFIX):
                        _rmdir_quietly(path)


def _sweep(directory: Path, keep: set[str]) -> None:
    with contextlib.suppress(OSError):
        for path in directory.iterdir():
            if not path.is_dir():
                continue
            if path.name.startswith(GROUP_PREFIX):
                _sweep(path, keep)
                _rmdir_quietly(path)  # busy while it holds a kept session
            elif path.name not in keep:
                _rmdir_quietly(path)
