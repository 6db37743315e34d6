"""What one session's sandbox is to be: the plan every sandbox implementation carries out."""

from __future__ import annotations

from dataclasses import dataclass

from ptyd.config import SandboxProfile


@dataclass(frozen=True, slots=True)
class SandboxPlan:
    """One session's sandbox: its profile, where it runs, what it may write, and what it must not see."""

    profile: SandboxProfile
    workspace: str  # the session's working directory
    private: tuple[str, ...]  # ptyd's runtime and state directories, $XDG_RUNTIME_DIR: never visible
    others: tuple[str, ...]  # other agents' workspaces: hidden unless they hold ptyd's package
    writable: str | None = None  # its writable root (workspace.py): the workspace, its scratch directory, or none
    scratch_base: str | None = None  # every agent's scratch directory is under it: hidden, its own bound back
    tmp_mib: int | None = None  # the size of its private /tmp; None: the kernel's default (half the RAM)
    own_network: bool = False  # a network namespace of its own, connected by pasta (network.py), if it has network
    enter_network: tuple[str, ...] = ()  # or one made ahead (netpool.py): the argv prefix that enters it
