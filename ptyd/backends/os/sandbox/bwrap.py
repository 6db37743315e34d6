"""bubblewrap (``bwrap``, the sandbox of Flatpak and Claude Code): namespaces and bind mounts, set up by a
program of its own, so the daemon's spawn chain stays free of Python.

The mount plan, in order (later mounts cover earlier ones): the whole filesystem read-only; a fresh /dev (the
session's terminal appears as /dev/console, new ptys come from a devpts of the sandbox's own, so no other
session's terminal can be opened) and /proc (of the sandbox's pid namespace: no other process is visible, so none
can be signalled or traced); a private /tmp; the workspace and the profile's writable paths bound read-write; an
empty /run (the system daemons' sockets); then an empty tmpfs over every private directory (ptyd's runtime
directory with its socket and tokens, ``$XDG_RUNTIME_DIR`` with the user's bus and agent sockets), over other
agents' workspaces and over the profile's hidden paths. A user namespace with every capability dropped and
``--disable-userns`` means nothing inside can undo a mount; bubblewrap sets no-new-privileges, so setuid programs
(sudo) cannot gain anything. Not used, on purpose: ``--new-session`` (the program needs the PTY as its
controlling terminal for job control and /dev/tty) and ``--die-with-parent`` (sessions outlive a daemon crash
and a handover). bubblewrap keeps a pid 1 of its own in the namespace, so the program is not an init whose
default signal actions the kernel ignores (Ctrl-C would do nothing to a ``cat``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import final

from ptyd.backends.os import procfs
from ptyd.backends.os.sandbox.network import INFO_FD, NET_GATE
from ptyd.backends.os.sandbox.plan import SandboxPlan
from ptyd.backends.os.sandbox.workspace import read_only_inside, within
from ptyd.errors import InvalidArgument

PACKAGE_DIR = str(Path(__file__).resolve().parents[3])  # shell integration files are read from here, inside
INTEGRATION_DIR = str(Path(__file__).resolve().parents[2] / "shell_integration")  # ...this directory of it
PROBE_TIMEOUT_S = 10.0
ORPHAN_WAIT_S = 1.0  # what the probe left exits at once; this only bounds a wait that should never be needed
_NAMESPACES = ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")


PRIVATE_ROOTS = ("/tmp", "/run")  # replaced by empty tmpfs in every sandbox


def _system_sockets_hidden() -> list[str]:
    """An empty /run: it holds the system's daemons' Unix sockets (D-Bus, docker, postgresql, systemd), which
    a read-only mount does not keep a program from connecting to. The resolver's configuration, when
    /etc/resolv.conf points into /run (systemd-resolved), is bound back read-only so names still resolve."""
    args = ["--tmpfs", "/run"]
    resolv = os.path.realpath("/etc/resolv.conf")
    if within(resolv, "/run") and resolv != "/run" and os.path.exists(resolv):
        directory = os.path.dirname(resolv)
        args += ["--ro-bind", directory, directory]
    return args


def _probe(argv: list[str]) -> str | None:
    """None if the sandbox can be made, else why not (bwrap's own message)."""
    before = set(procfs.children(os.getpid()))
    try:
        done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        _reap_orphans(before)
    if done.returncode == 0:
        return None
    message = done.stderr.decode(errors="replace").strip().splitlines()
    return message[-1] if message else f"bwrap exited with {done.returncode}"


def _reap_orphans(before: set[int]) -> None:
    """bubblewrap leaves one of its processes to the nearest subreaper, the daemon: reap what the probe left (the
    daemon spawns nothing else meanwhile; the probe runs on the event loop's thread), so it lingers as no zombie."""
    deadline = time.monotonic() + ORPHAN_WAIT_S
    for pid in set(procfs.children(os.getpid())) - before:
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.001)


@final
class Bubblewrap:
    name = "bwrap"

    def __init__(self, program: str, *, disable_userns: bool) -> None:
        self.program = program
        self.disable_userns = disable_userns
        self.sized_tmpfs = disable_userns  # --size (bubblewrap 0.7) where --disable-userns (0.8) works: one probe

    @classmethod
    def detect(cls, program: str) -> Bubblewrap | str:
        """A working bubblewrap, or the reason there is none (not installed, no user namespaces, ...)."""
        found = shutil.which(program)
        if found is None:
            return f"bubblewrap ({program}) is not installed"
        base = [found, *_NAMESPACES, "--unshare-net", "--cap-drop", "ALL", "--ro-bind", "/", "/"]
        tail = ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "true"]
        why = _probe([*base, "--disable-userns", *tail])
        if why is None:
            return cls(found, disable_userns=True)
        if _probe([*base, *tail]) is None:  # a bubblewrap older than 0.8
            return cls(found, disable_userns=False)
        return f"bubblewrap cannot make a sandbox here: {why}"

    def describe(self) -> str:
        return self.name

    def unavailable(self) -> str | None:
        return None

    def reset(self, choice: str, bwrap_program: str) -> None:
        """Nothing to probe again: the daemon's DetectedSandbox does that."""

    def wrap(self, plan: SandboxPlan) -> tuple[str, ...]:
        profile = plan.profile
        workspace = os.path.realpath(plan.workspace)
        writable = [os.path.realpath(plan.writable)] if plan.writable is not None else []
        writable += [path for path in map(os.path.realpath, profile.writable) if os.path.exists(path)]
        if "/" in writable:
            raise InvalidArgument("a sandbox whose workspace is / would contain nothing", field="cwd")
        private = [os.path.realpath(path) for path in (*plan.private, "/run")]
        for directory in private:
            if any(within(path, directory) for path in writable):
                raise InvalidArgument(f"a sandbox cannot write inside ptyd's private {directory}", field="cwd")
        others = [os.path.realpath(path) for path in plan.others]
        hidden = private + [path for path in others if not within(PACKAGE_DIR, path)]
        if plan.scratch_base is not None:
            hidden.append(os.path.realpath(plan.scratch_base))
        # A namespace made ahead is entered before bubblewrap starts, which then makes no network namespace.
        args = [*(plan.enter_network if profile.network else ()), self.program, *_NAMESPACES]
        own_network = profile.network and plan.own_network  # connected by pasta while the program waits
        if not profile.network or own_network:
            args.append("--unshare-net")
        if own_network:
            args += ["--info-fd", str(INFO_FD)]
        if self.disable_userns:
            args.append("--disable-userns")
        args += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        if plan.tmp_mib is not None and self.sized_tmpfs:
            args += ["--size", str(plan.tmp_mib << 20)]
        args += ["--tmpfs", "/tmp", *_system_sockets_hidden()]
        # Each mount lands on top of those of shallower paths: the mounts are made from the shallowest path to
        # the deepest, so a hidden directory can hold a bound one (a scratch directory among every agent's) and a
        # writable root a read-only one (its .git/hooks) or a hidden one (another agent's workspace inside it).
        mounts: list[tuple[str, list[str]]] = [(workspace, ["--ro-bind", workspace, workspace])]
        for path in dict.fromkeys(hidden):
            # Under /tmp and /run a directory is gone already (private), unless a bound path brought it back.
            bound = [workspace, *writable]
            gone = any(within(path, root) for root in PRIVATE_ROOTS) and not any(within(path, w) for w in bound)
            if os.path.isdir(path) and not gone:
                mounts.append((path, ["--tmpfs", path]))
        for path in writable:
            mounts.append((path, ["--bind", path, path]))
            inside = read_only_inside(path)
            mounts += [(inner, ["--bind" if rw else "--ro-bind", inner, inner]) for inner, rw in inside]
        profile_hidden = [os.path.realpath(os.path.expanduser(path)) for path in profile.hidden]
        for path in profile_hidden:
            if os.path.isdir(path):
                mounts.append((path, ["--tmpfs", path]))
            elif os.path.exists(path):
                mounts.append((path, ["--ro-bind", "/dev/null", path]))
        # Every shell inside reads the integration's files: bound back where ptyd lies in a private or hidden
        # directory (a virtualenv under /tmp), or its shells would start without their marks.
        if any(within(INTEGRATION_DIR, path) for path in (*PRIVATE_ROOTS, *hidden, *profile_hidden)):
            mounts.append((INTEGRATION_DIR, ["--ro-bind", INTEGRATION_DIR, INTEGRATION_DIR]))
        for _, mount in sorted(mounts, key=lambda item: item[0].rstrip("/").count("/")):
            args += mount
        args += ["--chdir", workspace, "--"]
        if own_network:
            args += NET_GATE
        return tuple(args)
