"""Running a session's programs inside a sandbox: the seam, and the choice of how (``auto``).

A sandbox is an argv prefix the spawn chain execs between its gate and the program (``bwrap ... --``), so no
Python runs in the child and the sandbox starts inside the session's cgroup. The one implementation so far is
bubblewrap (``bwrap.py``); Landlock is not used (docs/sandbox.md says why). Where no sandbox can be made, every
profile that needs one is refused with ``sandbox_unavailable``: a session is never started unsandboxed in its
place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, final

from ptyd.config import SandboxProfile
from ptyd.errors import SandboxUnavailable


@dataclass(frozen=True, slots=True)
class SandboxPlan:
    """One session's sandbox: its profile, the workspace it may write, and what it must not see."""

    profile: SandboxProfile
    workspace: str  # the session's working directory
    private: tuple[str, ...]  # ptyd's runtime and state directories, $XDG_RUNTIME_DIR: never visible
    others: tuple[str, ...]  # other agents' workspaces: hidden unless they hold what this session needs


class Sandbox(Protocol):
    name: str

    def wrap(self, plan: SandboxPlan) -> tuple[str, ...]:
        """The argv prefix that runs a program inside the plan's sandbox (raises SandboxUnavailable)."""
        ...


@final
class NoSandbox:
    """This system cannot make one: says why on every attempt."""

    name = "unavailable"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def wrap(self, plan: SandboxPlan) -> tuple[str, ...]:
        raise SandboxUnavailable(f"this session's profile needs a sandbox, and {self.reason}", reason=self.reason)


def select_sandbox(choice: str, bwrap_program: str) -> Sandbox:
    from ptyd.backends.sandbox.bwrap import Bubblewrap

    found = Bubblewrap.detect(bwrap_program)
    return found if isinstance(found, Bubblewrap) else NoSandbox(found)
