"""Where a sandboxed session may write: the operator's grant, never the agent's choice.

A session's *writable root* is its cwd only if the cwd lies under a root the operator granted that agent
(``sandbox_roots``, ``sandbox_agent_roots``); else it is the agent's scratch directory, and the cwd (the one asked
for, or the scratch directory when none was) is only read. Whatever the roots say, a cwd is refused
(``workspace_refused``, naming the path) that is another agent's workspace or inside one, or inside ptyd's own
private directories (both hidden in the sandbox: the session would run in an empty directory); and it is no
writable root if it is the home directory or holds it, lies in a dot-directory of the home (``~/.config``,
``~/.ssh``, ``~/.local``: the user's programs' settings, keys and ``~/.local/bin``), or holds or lies in one of
ptyd's own directories (its state, config, package).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ptyd.backends.recording.store import default_directory as default_recordings
from ptyd.config import Config
from ptyd.errors import WorkspaceRefused

# Inside every writable root these stay read-only when they exist: a program there would otherwise leave what
# runs later, outside the sandbox, when *you* start a shell (startup files), use git (hooks, and the config whose
# core.hooksPath, core.fsmonitor and aliases run commands) or ssh, or start a program that reads ~/.config.
READ_ONLY_INSIDE = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".login",
    ".logout",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".mkshrc",
    ".inputrc",
    ".envrc",
    ".ssh",
    ".config",
    ".git/hooks",
    ".git/config",
)


def within(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return root == "/" or path == root or path.startswith(root + "/")


def real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where a session runs (``cwd``) and what of it it may write (``writable``: None, nothing)."""

    cwd: str
    writable: str | None


@dataclass(frozen=True, slots=True)
class WorkspaceRules:
    """What the operator granted this agent, and what no sandboxed session may have."""

    roots: tuple[str, ...]  # the agent's granted roots, as configured ("~" allowed)
    scratch: str  # this agent's scratch directory (made on first use)
    others: tuple[str, ...]  # other agents' workspaces, every one used since the daemon started
    private: tuple[str, ...]  # ptyd's hidden directories (runtime, state, $XDG_RUNTIME_DIR)
    protected: tuple[str, ...]  # ptyd's directories a session may read but never write (config, package)


def choose(cwd: str | None, writes: bool, rules: WorkspaceRules) -> Workspace:
    """The session's workspace; ``writes``: its profile has a workspace to write (not ``readonly``)."""
    if cwd is None:
        return Workspace(_scratch(rules.scratch), _scratch(rules.scratch) if writes else None)
    path = real(cwd)
    for other in map(real, rules.others):
        if within(path, other):
            raise WorkspaceRefused(f"{cwd} is another agent's workspace", path=cwd, reason="another_agent")
    for private in map(real, rules.private):
        if within(path, private):
            raise WorkspaceRefused(f"{cwd} is inside ptyd's private {private}", path=cwd, reason="ptyd_private")
    if not writes:
        return Workspace(path, None)
    if not any(within(path, real(root)) for root in rules.roots):
        return Workspace(path, _scratch(rules.scratch))
    why = _never_writable(path, (*rules.private, *rules.protected))
    if why is not None:
        raise WorkspaceRefused(f"{cwd} may not be a sandbox's writable root: {why}", path=cwd, reason="protected")
    return Workspace(path, path)


def _never_writable(path: str, ours: tuple[str, ...]) -> str | None:
    home = real("~")
    if within(home, path):
        return "it is the home directory or holds it"
    top = os.path.relpath(path, home).split(os.sep)[0] if within(path, home) else ""
    if top.startswith("."):
        return f"it lies in {os.path.join(home, top)}"
    for directory in map(real, ours):
        if within(path, directory) or within(directory, path):
            return f"it holds or lies in ptyd's {directory}"
    return None


def _scratch(path: str) -> str:
    Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)
    return real(path)


ANONYMOUS = "+"  # the prefix of an unnamed agent's scratch directory: no name's directory starts with it


def scratch_dir(base: str, owner: str, *, anonymous: bool = False) -> str:
    """An agent's scratch directory: its name made safe, and a hash so that two names never share one; an agent
    known only by its id (no name, or a keyed name it did not prove): ``+`` and the id, removed with the agent."""
    if anonymous:
        return os.path.join(base, ANONYMOUS + re.sub(r"[^A-Za-z0-9_-]", "_", owner))
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", owner)[:48].lstrip(".") or "agent"
    return os.path.join(base, f"{safe}-{hashlib.sha256(owner.encode()).hexdigest()[:12]}")


def remove_scratch(path: str) -> tuple[str, bool | None]:
    """Remove a scratch directory and everything the agent left in it, directories it made unwritable too
    (never following a symlink out of it): its real path, and whether it is gone (None: there was none)."""
    where = os.path.realpath(path)
    if not os.path.lexists(path):
        return where, None
    with contextlib.suppress(OSError):
        for directory, _, _ in os.walk(path):  # os.walk follows no symlinked directory
            os.chmod(directory, 0o700)
    shutil.rmtree(path, ignore_errors=True)
    return where, not os.path.lexists(path)


_OLD_ANONYMOUS = re.compile(r"(agent-[0-9a-f]{16})-([0-9a-f]{12})")  # before "+": an id's own name and hash


def anonymous_scratch(base: str) -> list[tuple[str, str]]:
    """Every unnamed agent's scratch directory under ``base``: (agent id, path); also those daemons before the
    ``+`` prefix made, named like any agent's after its id (``agent-HEX-HASH``, the hash of that id; an agent
    *named* so has the very same directory, and is taken for an id)."""
    try:
        names = os.listdir(base)
    except OSError:
        return []
    found = []
    for name in names:
        old = _OLD_ANONYMOUS.fullmatch(name)
        if name.startswith(ANONYMOUS):
            found.append((name[len(ANONYMOUS) :], os.path.join(base, name)))
        elif old and hashlib.sha256(old[1].encode()).hexdigest()[:12] == old[2]:
            found.append((old[1], os.path.join(base, name)))
    return found


def default_scratch_base() -> str:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return os.path.join(base, "ptyd", "workspaces")


def state_directories(config: Config) -> list[str]:
    """ptyd's state (recordings, ptyd-mcp's tokens for ssh hosts), hidden from every sandbox."""
    found = [str(default_recordings().parent)]
    if config.recording_dir:
        found.append(config.recording_dir)
    return found


def read_only_inside(root: str) -> list[tuple[str, bool]]:
    """The mounts inside a writable root, (path, writable): the existing paths that stay read-only, and a
    repository's ``.git`` bound onto itself, so that it cannot be renamed away (a mount point cannot be) and
    replaced by one with hooks of the session's. A repository without hooks gets an empty hooks directory first
    (git makes one anyway), so none can be put there from inside."""
    git = os.path.join(root, ".git")
    mounts = []
    if os.path.isdir(git):
        with contextlib.suppress(OSError):  # not ours to make: then not the session's either (the same user)
            os.makedirs(os.path.join(git, "hooks"), 0o755, exist_ok=True)
        mounts.append((git, True))
    # Not lexists: a dangling symlink cannot be bound (bubblewrap would refuse the whole sandbox).
    found = [path for path in (os.path.join(root, name) for name in READ_ONLY_INSIDE) if os.path.exists(path)]
    return mounts + [(path, False) for path in found]
