"""The cgroup files resource limits use: where each controller's hierarchy is, the limits written, the counters read.

A limit is written to one directory per controller: a cgroup v2 directory (the session's leaf, or its agent's
group above the leaves), or a v1 one. The kernel's counters are read from the session's own directories, which
is where the kernel counts a kill or a refused fork in its processes whichever limit caused it (docs/sandbox.md
says where v2 differs).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ptyd.backends.os.procfs import read_file
from ptyd.config import SandboxProfile

CPU_PERIOD_US = 100_000  # the kernel's default CFS period: a quota of percent * 1000 us is that share of a CPU
CONTROLLERS = ("memory", "pids", "cpu")


class Amounts(NamedTuple):
    """Limits to write, one of a session's or one of its agent's sessions together; None: unlimited."""

    memory_mib: int | None
    pids_max: int | None
    cpu_percent: int | None

    @classmethod
    def session(cls, profile: SandboxProfile) -> Amounts:
        return cls(profile.memory_mib, profile.pids_max, profile.cpu_percent)

    @classmethod
    def agent(cls, profile: SandboxProfile) -> Amounts:
        return cls(profile.agent_memory_mib, profile.agent_pids_max, profile.agent_cpu_percent)

    def controllers(self) -> list[str]:
        return [c for c, value in zip(CONTROLLERS, self, strict=True) if value is not None]


@dataclass(frozen=True, slots=True)
class Place:
    """Where one controller's files for a session (or an agent's group) live."""

    controller: str
    path: Path
    v2: bool


def counter(path: str, key: bytes) -> int:
    """A counter of a flat-keyed cgroup file (``memory.events``), 0 when not there. Read twice a send: three
    syscalls, no text layer."""
    with contextlib.suppress(OSError, ValueError):
        for line in read_file(path).splitlines():
            name, _, value = line.partition(b" ")
            if name == key:
                return int(value)
    return 0


def write(path: Path, value: str) -> None:
    path.write_text(value + "\n")


def apply(place: Place, amounts: Amounts) -> None:
    """Write the place's controller's limit (nothing when that one is unlimited)."""
    path = place.path
    if place.controller == "memory" and amounts.memory_mib is not None:
        limit = str(amounts.memory_mib * 1024 * 1024)
        if place.v2:
            write(path / "memory.max", limit)
            with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to bound
                write(path / "memory.swap.max", "0")
        else:
            write(path / "memory.limit_in_bytes", limit)
            with contextlib.suppress(FileNotFoundError):  # memsw: memory and swap together, so swap is no way out
                write(path / "memory.memsw.limit_in_bytes", limit)
    elif place.controller == "pids" and amounts.pids_max is not None:
        write(path / "pids.max", str(amounts.pids_max))
    elif place.controller == "cpu" and amounts.cpu_percent is not None:
        quota = amounts.cpu_percent * CPU_PERIOD_US // 100
        if place.v2:
            write(path / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        else:
            write(path / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            write(path / "cpu.cfs_quota_us", str(quota))


def v1_bases(instance: str) -> dict[str, Path]:
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


def enable_v2(parent: Path, wanted: set[str]) -> set[str]:
    """Enable ``wanted`` (those ``parent`` has) for the cgroups below ``parent``; the controllers they now get."""
    try:
        available = set((parent / "cgroup.controllers").read_text().split()) & wanted
        if available:
            write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(available)))
        return set((parent / "cgroup.subtree_control").read_text().split()) & wanted
    except OSError:
        return set()
