"""Containment by cgroup v2: each session gets a leaf; membership is inherited across fork, setsid and double
forks, and ``cgroup.kill`` ends it race-free. Used where the hierarchy is writable (root, or a systemd service with
``Delegate=yes``)."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import final

from ptyd.backends.os import procfs
from ptyd.backends.os.containment.scope import GROUP_PREFIX, Scope


def _cgroup2_mounts() -> list[Path]:
    mounts = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    mounts.append(Path(left.split()[4]))
    except OSError:
        pass
    return mounts


def _own_cgroup_dir() -> Path | None:
    """Our cgroup's directory: under the cgroup2 mount whose view of our cgroup lists our own pid (a mount may
    show another namespace's root, or be shadowed)."""
    own = _own_cgroup()
    if own is None:
        return None
    pid = str(os.getpid())
    for mount in _cgroup2_mounts():
        candidate = mount / own.lstrip("/")
        try:
            if pid in (candidate / "cgroup.procs").read_text().split():
                return candidate
        except OSError:
            continue
    return None


def _own_cgroup() -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


@final
class CgroupScope:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.cgroup: str | None = str(path)
        self._procs = str(path / "cgroup.procs")

    def attach(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self, *, thorough: bool = False) -> list[int]:
        try:
            return [int(x) for x in procfs.read_file(self._procs).split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1\n")

    def remove(self) -> bool:
        """Remove the leaf; False while it is still busy (exiting tasks leave it a moment after they are
        reaped), so the caller can try again."""
        try:
            self.path.rmdir()
        except OSError as exc:
            return exc.errno != errno.EBUSY
        return True


@final
class CgroupContainment:
    name = "cgroup"

    def __init__(self, base: Path) -> None:
        self.base = base

    @property
    def leaf_parent(self) -> Path | None:
        return self.base

    @classmethod
    def detect(cls, instance: str) -> CgroupContainment | None:
        parent = _own_cgroup_dir()
        if parent is None:
            return None
        base = parent / f"ptyd-{instance}"
        try:
            base.mkdir(exist_ok=True)
            probe = base / "probe"
            probe.mkdir(exist_ok=True)
            ok = (probe / "cgroup.kill").exists() and os.access(probe / "cgroup.procs", os.W_OK)
            probe.rmdir()
        except OSError:
            return None
        return cls(base) if ok else None

    def scope(self, session_id: str, group: str | None = None) -> CgroupScope:
        self.base.mkdir(exist_ok=True)  # an administrator may have removed the empty instance cgroup
        path = (self.base / group if group is not None else self.base) / session_id
        path.mkdir()
        return CgroupScope(path)

    def groups(self) -> list[Path]:
        """The agent groups (the limits' directories holding session leaves; no process lives in one)."""
        try:
            return [p for p in self.base.iterdir() if p.is_dir() and p.name.startswith(GROUP_PREFIX)]
        except OSError:
            return []

    def leftovers(self) -> list[Scope]:
        """Every session leaf, beside the agent groups or in one (a group is never one: killing it would kill
        every session in it)."""
        found: list[Scope] = []
        for parent in [self.base, *self.groups()]:
            with contextlib.suppress(OSError):
                found += [
                    CgroupScope(p) for p in parent.iterdir() if p.is_dir() and not p.name.startswith(GROUP_PREFIX)
                ]
        return found

    def close(self) -> None:
        """Remove the (now empty) instance cgroup at shutdown; a leftover session keeps it, harmlessly."""
        for scope in self.leftovers():
            scope.remove()
        for group in self.groups():
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            self.base.rmdir()
