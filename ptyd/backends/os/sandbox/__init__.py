"""Running a session's programs inside a sandbox: the seam, and the choice of how (``auto``).

A sandbox is an argv prefix the spawn chain execs between its gate and the program (``bwrap ... --``), so no
Python runs in the child and the sandbox starts inside the session's cgroup. The one implementation so far is
bubblewrap (``bwrap.py``); Landlock is not used (docs/sandbox.md says why). Where no sandbox can be made, every
profile that needs one is refused with ``sandbox_unavailable``: a session is never started unsandboxed in its
place.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Protocol, final

from ptyd.backends.os.sandbox.plan import SandboxPlan
from ptyd.errors import SandboxUnavailable

__all__ = ["DetectedSandbox", "NoSandbox", "Sandbox", "SandboxPlan", "select_sandbox"]

log = logging.getLogger("ptyd.sandbox")


class Sandbox(Protocol):
    @property
    def name(self) -> str: ...
    def describe(self) -> str:
        """'bwrap', or why sessions cannot be sandboxed here."""
        ...

    def wrap(self, plan: SandboxPlan) -> tuple[str, ...]:
        """The argv prefix that runs a program inside the plan's sandbox (raises SandboxUnavailable)."""
        ...

    def unavailable(self) -> str | None:
        """Why no sandbox can be made here, or None: one can."""
        ...

    def reset(self, choice: str, bwrap_program: str) -> None:
        """A reloaded configuration."""
        ...


@final
class NoSandbox:
    """This system cannot make one: says why on every attempt."""

    name = "unavailable"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def describe(self) -> str:
        return self.reason

    def wrap(self, plan: SandboxPlan) -> tuple[str, ...]:
        raise SandboxUnavailable(f"this session's profile needs a sandbox, and {self.reason}", reason=self.reason)

    def unavailable(self) -> str | None:
        return self.reason

    def reset(self, choice: str, bwrap_program: str) -> None:
        pass


@final
class DetectedSandbox:
    """The choice, made at the first sandboxed open (or daemon_info, or at start when agents default to
    ``auto``): a daemon whose sessions are all ``none`` never runs the bubblewrap probe (~6 ms, more under load).

    Where none was found, it is looked for again (``refresh``) at every open that needs one: a bubblewrap
    installed since (or replaced) is probed, while the same program that failed before is not, so an open costs
    a ``stat`` more, not a probe. SIGHUP probes again whatever was found (``reset``): the way to make a daemon
    see user namespaces enabled since it started.
    """

    def __init__(self, choice: str, bwrap_program: str) -> None:
        self._choice = choice
        self._program = bwrap_program
        self._found: Sandbox | None = None
        self._probed: object = None  # the identity of the program the last probe found (None: not installed)

    def get(self) -> Sandbox:
        if self._found is None:
            from ptyd.backends.os.sandbox.bwrap import Bubblewrap

            self._probed = _identity(self._program)
            found = Bubblewrap.detect(self._program)
            self._found = found if isinstance(found, Bubblewrap) else NoSandbox(found)
            if isinstance(self._found, NoSandbox):
                log.warning("sandbox: none can be made: %s", self._found.describe())
            else:
                log.info("sandbox: %s", self._found.describe())
        return self._found

    def refresh(self) -> Sandbox:
        """What was found, probed again if none was and the program changed since (installed, replaced)."""
        found = self.get()
        if isinstance(found, NoSandbox) and _identity(self._program) != self._probed:
            self._found = None
            found = self.get()
        return found

    def reset(self, choice: str, bwrap_program: str) -> None:
        """A reloaded configuration: probe again at the next use, whatever was found."""
        self._choice, self._program, self._found = choice, bwrap_program, None

    def unavailable(self) -> str | None:
        """Why no sandbox can be made here (probed again as ``refresh`` does), or None: one can."""
        found = self.refresh()
        return found.describe() if isinstance(found, NoSandbox) else None

    @property
    def name(self) -> str:
        return self.get().name

    def describe(self) -> str:
        return self.get().describe()

    def wrap(self, plan: SandboxPlan) -> tuple[str, ...]:
        return self.refresh().wrap(plan)


def _identity(program: str) -> object:
    """Which file ``program`` is now (its path and inode, its change time), or None: not on PATH."""
    found = shutil.which(program)
    if found is None:
        return None
    try:
        st = os.stat(found)
    except OSError:
        return None
    return (found, st.st_dev, st.st_ino, st.st_ctime_ns)


def select_sandbox(choice: str, bwrap_program: str) -> DetectedSandbox:
    return DetectedSandbox(choice, bwrap_program)
