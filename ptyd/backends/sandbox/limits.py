"""Resource limits of one session (memory, processes, CPU), from its profile, enforced by cgroups.

Each controller comes from where ptyd may use it: cgroup v2, in the session's own leaf (the containment cgroup),
when the daemon's delegated subtree has the controller (a systemd service with ``Delegate=yes``); else a cgroup
v1 hierarchy of that controller that the daemon can write (root on a hybrid layout), in a directory per session
beside the daemon's own cgroup. A profile asking for a limit no hierarchy can enforce is refused
(``sandbox_unavailable``): rlimits are per process or per user, not per session, so they are no substitute.

The kernel counts what the limits did: ``oom_kill`` (memory.events in v2, memory.oom_control in v1) and the
forks refused at ``pids.max`` (pids.events); a send reports whether they grew while it ran.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, final

from ptyd.config import SandboxProfile
from ptyd.errors import SandboxUnavailable

CPU_PERIOD_US = 100_000  # the kernel's default CFS period: a quota of percent * 1000 us is that share of a CPU
CONTROLLERS = ("memory", "pids", "cpu")


class Counters(NamedTuple):
    oom_kills: int
    pids_refused: int


@dataclass(frozen=True, slots=True)
class Place:
    """Where one controller's files for a session live."""

    controller: str
    path: Path
    v2: bool


def _counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _write(path: Path, value: str) -> None:
    path.write_text(value + "\n")


@final
class LimitScope:
    """One session's limit cgroups."""

    def __init__(self, places: list[Place]) -> None:
        self.places = places

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
        return cls(places) if places else None

    def attach(self, pid: int) -> None:
        for place in self.places:
            if not place.v2:  # the v2 leaf is the containment's cgroup: the pid is attached there already
                _write(place.path / "cgroup.procs", str(pid))

    def counters(self) -> Counters:
        oom = pids = 0
        for place in self.places:
            if place.controller == "memory":
                oom = _counter(place.path / ("memory.events" if place.v2 else "memory.oom_control"), "oom_kill")
            elif place.controller == "pids":
                pids = _counter(place.path / "pids.events", "max")
        return Counters(oom, pids)

    def remove(self) -> bool:
        """Remove the v1 directories (the v2 leaf goes with the containment scope); False while still busy."""
        done = True
        for place in self.places:
            if not place.v2:
                try:
                    place.path.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    done = done and exc.errno != errno.EBUSY
        return done


def _v1_bases(instance: str) -> dict[str, Path]:
    """controller -> the directory for ptyd's sessions in a writable v1 hierarchy, beside the daemon's cgroup."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(","):
                own[name] = path
    bases: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, extra = left.split(), right.split()
            if not extra or extra[0] != "cgroup" or len(extra) < 3:
                continue
            options = set(extra[2].split(","))
            for controller in CONTROLLERS:
                if controller in options and controller not in bases and controller in own:
                    relative = os.path.relpath(own[controller], fields[3])
                    parent = Path(fields[4]) / relative
                    if os.access(parent, os.W_OK) and os.access(parent / "cgroup.procs", os.W_OK):
                        bases[controller] = parent / f"ptyd-{instance}"  # made at the first session with limits
    return bases


def _v2_controllers(leaf_parent: Path | None) -> set[str]:
    """Controllers of the delegated v2 subtree, enabled for the session leaves below ``leaf_parent``."""
    if leaf_parent is None:
        return set()
    try:
        available = set((leaf_parent / "cgroup.controllers").read_text().split()) & set(CONTROLLERS)
        if available:
            _write(leaf_parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(available)))
        return set((leaf_parent / "cgroup.subtree_control").read_text().split()) & set(CONTROLLERS)
    except OSError:
        return set()


@final
class Limiter:
    """Which hierarchy enforces each controller, decided once at start-up."""

    def __init__(self, v2: set[str], v1: dict[str, Path]) -> None:
        self.v2 = v2
        self.v1 = {c: path for c, path in v1.items() if c not in v2}

    @classmethod
    def detect(cls, instance: str, leaf_parent: Path | None) -> Limiter:
        v2 = _v2_controllers(leaf_parent)
        return cls(v2, _v1_bases(instance) if set(CONTROLLERS) - v2 else {})

    def describe(self) -> str:
        where = dict.fromkeys(self.v2, "cgroup2") | dict.fromkeys(self.v1, "cgroup1")
        return ", ".join(f"{c} {where.get(c, 'none')}" for c in CONTROLLERS)

    def _needed(self, profile: SandboxProfile) -> list[str]:
        wanted = {"memory": profile.memory_mib, "pids": profile.pids_max, "cpu": profile.cpu_percent}
        return [c for c in CONTROLLERS if wanted[c] is not None]

    def check(self, profile: SandboxProfile, *, v2_leaf: bool) -> None:
        """Refuse, before anything starts, a profile whose limits cannot all be enforced."""
        missing = [c for c in self._needed(profile) if c not in self.v1 and not (c in self.v2 and v2_leaf)]
        if missing:
            raise SandboxUnavailable(
                f"no cgroup hierarchy ptyd may use has the {', '.join(missing)} controller, so the profile's "
                "limits cannot be enforced",
                reason="no_cgroup_controller",
                controllers=missing,
            )

    def scope(self, session_id: str, profile: SandboxProfile, v2_leaf: Path | None) -> LimitScope | None:
        """The session's limit cgroups with the profile's limits written (None: the profile has no limits)."""
        needed = self._needed(profile)
        if not needed:
            return None
        self.check(profile, v2_leaf=v2_leaf is not None)
        places = []
        for controller in needed:
            if controller in self.v2 and v2_leaf is not None:
                places.append(Place(controller, v2_leaf, v2=True))
            else:
                path = self.v1[controller] / session_id
                path.parent.mkdir(exist_ok=True)
                path.mkdir(exist_ok=True)
                places.append(Place(controller, path, v2=False))
        scope = LimitScope(places)
        try:
            for place in places:
                _apply(place, profile)
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
        """Remove the empty v1 directories a previous daemon left, but those of sessions in ``keep``."""
        for base in self.v1.values():
            with contextlib.suppress(OSError):
                for path in base.iterdir():
                    if path.is_dir() and path.name not in keep:
                        with contextlib.suppress(OSError):
                            path.rmdir()


def _apply(place: Place, profile: SandboxProfile) -> None:
    path = place.path
    if place.controller == "memory" and profile.memory_mib is not None:
        limit = str(profile.memory_mib * 1024 * 1024)
        if place.v2:
            _write(path / "memory.max", limit)
            with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to bound
                _write(path / "memory.swap.max", "0")
        else:
            _write(path / "memory.limit_in_bytes", limit)
            with contextlib.suppress(FileNotFoundError):  # memsw: memory and swap together, so swap is no way out
                _write(path / "memory.memsw.limit_in_bytes", limit)
    elif place.controller == "pids" and profile.pids_max is not None:
        _write(path / "pids.max", str(profile.pids_max))
    elif place.controller == "cpu" and profile.cpu_percent is not None:
        quota = profile.cpu_percent * CPU_PERIOD_US // 100
        if place.v2:
            _write(path / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        else:
            _write(path / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(path / "cpu.cfs_quota_us", str(quota))
