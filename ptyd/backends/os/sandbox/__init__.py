"""Running a session's programs inside a sandbox: the seam, and the choice of how (``auto``).

A sandbox is an argv prefix the spawn chain execs between its gate and the program (``bwrap ... --``), so no
Python runs in the child and the sandbox starts inside the session's cgroup. The one implementation so far is
bubblewrap (``bwrap.py``); Landlock is not used (docs/sandbox.md says why). Where no sandbox can be made, every
profile that needs one is refused with ``sandbox_unavailable``: a session is never started unsandboxed in its
place.
"""

from __future__ import annotations

import logging
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


@final
class DetectedSandbox:
    """The choice, made at the first sandboxed open (or daemon_info): a daemon whose sessions are all ``none``
    never runs the bubblewrap probe (a few tens of ms, more under load), nor does each handover's new daemon."""

    def __init__(self, choice: str, bwrap_program: str) -> None:
        self._choice = choice
        self._program = bwrap_program
        self._found: Sandbox | None = None

    def get(self) -> Sandbox:
        if self._found is None:
            from ptyd.backends.os.sandbox.bwrap import Bubblewrap

            found = Bubblewrap.detect(self._program)
            self._found = found if isinstance(found, Bubblewrap) else NoSandbox(found)
            log.info("sandbox: %s", self._found.describe())
        return self._found

    @property
    def name(self) -> str:
        return self.get().name

    def describe(self) -> str:
        return self.get().describe()

    def wrap(self, plan: SandboxPlan) -> tuple[str, ...]:
        return self.get().wrap(plan)


def select_sandbox(choice: str, bwrap_program: str) -> DetectedSandbox:
    return DetectedSandbox(choice, bwrap_program)
