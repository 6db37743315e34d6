"""A small file in the runtime directory naming every live session's process tree, fenced by start time.

After a daemon crash (SIGKILL), the next daemon reads it and kills exactly the trees the dead one left behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import final

from ptyd.backends import procfs
from ptyd.backends.containment import MARKER_VAR, CgroupContainment, CgroupScope, Containment, signal_fenced

log = logging.getLogger("ptyd.manifest")


@final
class Manifest:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, dict[str, object]] = {}

    def add(self, session_id: str, pid: int, cgroup: str | None) -> None:
        stat = procfs.read_stat(pid)
        self._entries[session_id] = {
            "pid": pid,
            "starttime": stat.starttime if stat else None,
            "cgroup": cgroup,
        }
        self._write()

    def remove(self, session_id: str) -> None:
        if self._entries.pop(session_id, None) is not None:
            self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"daemon_pid": os.getpid(), "sessions": self._entries}, f)
        os.replace(tmp, self.path)

    def recover(self, containment: Containment) -> int:
        """Kill what a dead daemon left; returns the number of processes killed."""
        killed = 0
        handled: set[str] = set()
        try:
            data = json.loads(self.path.read_text())
            sessions = data.get("sessions", {})
        except (OSError, ValueError, AttributeError):
            sessions = {}
        for session_id, entry in sessions.items():
            if not isinstance(entry, dict):
                continue
            cgroup = entry.get("cgroup")
            if isinstance(cgroup, str) and os.path.isdir(cgroup):
                scope = CgroupScope(Path(cgroup))
                killed += len(scope.pids())
                scope.kill_all()
                handled.add(cgroup)
                continue
            killed += _kill_marked(session_id, entry.get("pid"), entry.get("starttime"))
        if isinstance(containment, CgroupContainment):
            for scope in containment.leftovers():
                if scope.cgroup not in handled:
                    killed += len(scope.pids())
                    scope.kill_all()
        if killed:
            log.warning("killed %d processes left by a previous daemon", killed)
        self._write()
        return killed


def _kill_marked(session_id: str, pid: object, starttime: object) -> int:
    marker = f"{MARKER_VAR}={session_id}".encode()
    top = procfs.read_stat(pid) if isinstance(pid, int) else None
    # The session id of the dead tree is only meaningful while its leader is the same process.
    session = pid if top is not None and top.starttime == starttime else None
    killed = 0
    for candidate in procfs.all_pids():
        stat = procfs.read_stat(candidate)
        if stat is None or candidate == os.getpid():
            continue
        mine = (session is not None and stat.session == session) or procfs.environ_has(candidate, marker)
        if mine and signal_fenced(candidate, stat.starttime, signal.SIGKILL):
            killed += 1
    return killed


def remove_leftover_cgroups(containment: Containment) -> None:
    if isinstance(containment, CgroupContainment):
        for scope in containment.leftovers():
            with contextlib.suppress(OSError):
                scope.remove()
