"""ptyd as a systemd user service: the units pass systemd's own checks, install.sh writes what it says, and the
daemon keeps the socket-activation and sd_notify contract.

systemd need not be PID 1 here: the units are checked with ``systemd-analyze --user verify``, and the daemon is
run under ``systemd-socket-activate`` (or handed a listening fd exactly as systemd hands it, where the test must
hold the socket across a restart) with a datagram socket of the test's own as ``$NOTIFY_SOCKET``. Where the tests
run as root, a private ``systemd --user`` (own cgroup, cgroup and mount namespaces) runs the installed units for
real: Delegate=, KillMode=, Restart= and ExecReload= as systemd applies them.
"""

from __future__ import annotations

import array
import configparser
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Daemon, Rpc, RpcError, Shell, pid_alive, session_pids, start_escapee, wait_until
from ptyd.continuity.document import StateFile

UNITS = ROOT / "ptyd" / "daemon" / "units"
INSTALL = UNITS / "install.sh"
PTYD_BIN = Path(sys.executable).parent / "ptyd"  # the console script install.sh points the unit at

# In a user service each of these implies NoNewPrivileges=yes (systemd.exec(5)), which breaks sudo, su and
# every other setuid program in the sessions; the rest need PrivateUsers=yes, which breaks sudo as well.
IMPLIES_NO_NEW_PRIVILEGES = {
    "DynamicUser",
    "LockPersonality",
    "MemoryDenyWriteExecute",
    "PrivateDevices",
    "ProtectClock",
    "ProtectHostname",
    "ProtectKernelLogs",
    "ProtectKernelModules",
    "ProtectKernelTunables",
    "RestrictAddressFamilies",
    "RestrictNamespaces",
    "RestrictRealtime",
    "RestrictSUIDSGID",
    "SystemCallArchitectures",
    "SystemCallFilter",
    "SystemCallLog",
}
NEEDS_PRIVATE_USERS = {"PrivateUsers", "PrivateTmp", "ProtectSystem", "ProtectHome", "ProtectProc"}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian package systemd)")
    return path


def private_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    path = tmp_path_factory.mktemp(name)
    path.chmod(0o700)
    return path


def read_unit(path: Path) -> configparser.ConfigParser:
    # systemd allows repeated keys and keeps case; neither matters for the keys read here.
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


# ---------------------------------------------------------------------------------------------------------------
# The unit files and install.sh
# ---------------------------------------------------------------------------------------------------------------


def offline_env(tmp: Path) -> dict[str, str]:
    """An environment that reaches no user manager but the test's own (%t is ``tmp/runtime``, no session bus)."""
    runtime = tmp / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DBUS_SESSION_BUS_ADDRESS", "PTYD_BIN")}
    env.update(XDG_RUNTIME_DIR=str(runtime), XDG_CONFIG_HOME=str(tmp / "config"), HOME=str(tmp))
    return env


def run_install(tmp: Path, action: str, bin_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = offline_env(tmp)
    if bin_path is not None:
        env["PTYD_BIN"] = str(bin_path)
    return subprocess.run(["sh", str(INSTALL), action], env=env, capture_output=True, text=True, timeout=30)


def install(tmp: Path, bin_path: Path) -> Path:
    done = run_install(tmp, "install", bin_path)
    assert done.returncode == 0, done.stderr
    return tmp / "config" / "systemd" / "user"


@pytest.mark.parametrize(
    "bin_name", ["ptyd", "dir with spaces/100% ptyd"], ids=["plain-path", "path-with-spaces-and-percent"]
)
def test_installed_units_pass_systemd_analyze_verify_without_a_warning(tmp_path: Path, bin_name: str) -> None:
    analyze = tool("systemd-analyze")
    bin_path = tmp_path / "bin" / bin_name
    bin_path.parent.mkdir(parents=True)
    bin_path.symlink_to(PTYD_BIN)
    unit_dir = install(tmp_path, bin_path)
    verify = subprocess.run(
        [analyze, "--user", "--man=no", "verify", str(unit_dir / "ptyd.socket"), str(unit_dir / "ptyd.service")],
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Warnings (an unknown key, an unparsable value) leave the exit status 0: any output at all is a failure.
    assert (verify.returncode, verify.stderr, verify.stdout) == (0, "", "")


def test_install_changes_nothing_but_the_service_executable(tmp_path: Path) -> None:
    unit_dir = install(tmp_path, PTYD_BIN)
    assert (unit_dir / "ptyd.socket").read_text() == (UNITS / "ptyd.socket").read_text()
    shipped = (UNITS / "ptyd.service").read_text().splitlines()
    installed = (unit_dir / "ptyd.service").read_text().splitlines()
    changed = [(a, b) for a, b in zip(shipped, installed, strict=True) if a != b]
    assert len(changed) == 1
    before, after = changed[0]
    assert after.startswith(f"ExecStart={PTYD_BIN} ")
    assert after.split(" ", 1)[1] == before.split(" ", 1)[1]  # the daemon's arguments are the shipped ones


def test_install_without_a_user_manager_says_what_to_run_instead(tmp_path: Path) -> None:
    done = run_install(tmp_path, "install", PTYD_BIN)
    assert done.returncode == 0, done.stderr
    assert "no user service manager reachable" in done.stdout or "does not run systemd" in done.stdout
    assert "'make run'" in done.stdout
    assert f"'{PTYD_BIN}'" in done.stdout
    # The sessions outlive a crash there too, by default: nothing to add to a config file.
    assert "fd_keeper = true" not in done.stdout
    assert "fd keeper holds them (fd_keeper, on by default" in done.stdout
    assert "next: systemctl --user enable" not in done.stdout


def test_install_refuses_a_ptyd_that_is_not_there(tmp_path: Path) -> None:
    done = run_install(tmp_path, "install", tmp_path / "no-such-ptyd")
    assert done.returncode == 1
    assert "not an executable file" in done.stderr
    assert not (tmp_path / "config" / "systemd" / "user" / "ptyd.service").exists()


def test_uninstall_removes_the_units_and_their_enable_links_and_nothing_else(tmp_path: Path) -> None:
    unit_dir = install(tmp_path, PTYD_BIN)
    wants = unit_dir / "sockets.target.wants"
    wants.mkdir()
    (wants / "ptyd.socket").symlink_to("../ptyd.socket")  # what 'systemctl --user enable ptyd.socket' makes
    (wants / "other.socket").symlink_to("../other.socket")
    (unit_dir / "other.service").write_text("[Service]\nExecStart=/bin/true\n")
    done = run_install(tmp_path, "uninstall")
    assert done.returncode == 0, done.stderr
    left = sorted(str(p.relative_to(unit_dir)) for p in unit_dir.rglob("*"))
    assert left == ["other.service", "sockets.target.wants", "sockets.target.wants/other.socket"]


def test_service_passes_the_socket_units_path_to_the_daemon() -> None:
    # The daemon keeps its lock, manifest and operator.token beside --socket; clients look beside the socket.
    listen = read_unit(UNITS / "ptyd.socket")["Socket"]["ListenStream"]
    argv = read_unit(UNITS / "ptyd.service")["Service"]["ExecStart"].split()
    assert argv[argv.index("--socket") + 1] == listen


def test_service_keeps_setuid_programs_working_in_sessions() -> None:
    service = read_unit(UNITS / "ptyd.service")["Service"]
    assert service["NoNewPrivileges"] == "no"
    assert set(service) & (IMPLIES_NO_NEW_PRIVILEGES | NEEDS_PRIVATE_USERS) == set()


# ---------------------------------------------------------------------------------------------------------------
# The daemon under socket activation
# ---------------------------------------------------------------------------------------------------------------


class NotifySocket:
    """The receiving end of sd_notify: what systemd would learn about the service's state."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.messages: list[dict[str, str]] = []
        self.fds: dict[str, int] = {}  # the fds sent with FDSTORE=1, by FDNAME (the fd store systemd would keep)

    def close(self) -> None:
        self.sock.close()
        for fd in self.fds.values():
            os.close(fd)

    def wait_for(self, entry: str, timeout: float = 30.0) -> dict[str, str]:
        """The first message (received so far or within ``timeout``) carrying ``entry``, e.g. ``READY=1``."""
        key, _, value = entry.partition("=")
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for message in self.messages[seen:]:
                if message.get(key) == value:
                    return message
            seen = len(self.messages)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {entry} among the notifications {self.messages}")
            self.sock.settimeout(remaining)
            try:
                data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
            except TimeoutError:
                continue
            message = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.messages.append(message)
            fds = [fd for _, _, raw in ancillary for fd in array.array("i", raw)]
            if message.get("FDSTORE") == "1" and len(fds) == 1:
                self.fds[message["FDNAME"]] = fds[0]
            else:
                for fd in fds:
                    os.close(fd)


@pytest.fixture
def notify(fresh_daemon: Daemon) -> Iterator[NotifySocket]:
    receiver = NotifySocket(fresh_daemon.directory / "notify.sock")
    yield receiver
    receiver.close()


def listening(path: Path) -> bool:
    """A Unix socket bound at ``path`` accepts connections (/proc/net/unix: the __SO_ACCEPTCON flag, 0x10000)."""
    with open("/proc/net/unix") as table:
        for line in table.read().splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 8 and fields[7] == str(path) and int(fields[3], 16) & 0x10000:
                return True
    return False


def start_socket_activated(daemon: Daemon, notify: NotifySocket) -> None:
    """Run ptyd the way ptyd.socket + ptyd.service do: systemd binds the socket and execs the daemon on the
    first connection, with ``LISTEN_FDS``/``LISTEN_PID`` and a ``NOTIFY_SOCKET``."""
    activate = tool("systemd-socket-activate")
    log = open(daemon.log_path, "ab")  # noqa: SIM115 - handed to the child
    daemon.proc = subprocess.Popen(
        [
            activate,
            "--listen",
            str(daemon.socket),
            "--fdname=ptyd.socket",
            "-E",
            "NOTIFY_SOCKET",
            str(PTYD_BIN),
            "--socket",
            str(daemon.socket),
            "--config",
            str(daemon.config_path),
        ],
        stdout=log,
        stderr=log,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}, "NOTIFY_SOCKET": str(notify.path)},
    )
    log.close()
    # The tool binds at once and execs ptyd in its own place (same pid) when the first client connects. The file
    # appears at bind(), before listen(): a connect in between is refused, so wait for the listening socket.
    wait_until(lambda: listening(daemon.socket), message="systemd-socket-activate to listen on the socket")


def listener_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/fd/3").st_ino


def holders_of_socket(inode: int, pids: list[int]) -> list[int]:
    target = f"socket:[{inode}]"
    holders = []
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if target in links:
            holders.append(pid)
    return holders


def test_socket_activated_daemon_serves_the_passed_socket_and_reports_ready(
    fresh_daemon: Daemon, notify: NotifySocket
) -> None:
    start_socket_activated(fresh_daemon, notify)
    with fresh_daemon.rpc() as rpc:  # this connection is what makes systemd-socket-activate exec the daemon
        tok = rpc.call("agent_register", name="systemd")["token"]
        ready = notify.wait_for("READY=1")
        assert fresh_daemon.proc is not None
        assert int(ready["MAINPID"]) == fresh_daemon.proc.pid == rpc.call("daemon_info")["pid"]
        assert ready["STATUS"] == "serving, 0 sessions"
        s = Shell(rpc, tok, env={"PS1": "$ "})
        out = s.send("echo $((6 * 7)) ${NOTIFY_SOCKET-none} ${LISTEN_FDS-none} ${LISTEN_PID-none}\n")
        # The session got none of the activation variables: a program in it cannot talk to systemd as ptyd.
        assert out["viewport"].splitlines()[1] == "42 none none none"
        assert holders_of_socket(listener_inode(fresh_daemon.proc.pid), session_pids(s)) == []
        assert s.close()["closed"] is True
        rpc.call("agent_release", token=tok)
    assert fresh_daemon.stop(signal.SIGTERM) == 0, fresh_daemon.log()
    notify.wait_for("STOPPING=1")
    # systemd owns the socket file: the daemon leaves it, and removes only what it wrote itself.
    assert fresh_daemon.socket.exists()
    assert not (fresh_daemon.directory / "operator.token").exists()


def test_sigterm_under_socket_activation_reports_stopping_and_leaves_no_session_process(
    fresh_daemon: Daemon, notify: NotifySocket
) -> None:
    start_socket_activated(fresh_daemon, notify)
    with fresh_daemon.rpc() as rpc:
        tok = rpc.call("agent_register")["token"]
        notify.wait_for("READY=1")
        shells = [Shell(rpc, tok, env={"PS1": "$ "}) for _ in range(3)]
        escapee = start_escapee(shells[0])
        shells[1].send("sleep 1000\n", wait=False)
        shells[2].send("trap '' HUP TERM; sleep 1000 &\n")
        tree = [pid for s in shells for pid in session_pids(s)]
    assert escapee in tree
    assert fresh_daemon.stop(signal.SIGTERM) == 0, fresh_daemon.log()
    stopping = notify.wait_for("STOPPING=1")
    assert stopping["STATUS"] == "closing 3 sessions"
    assert [pid for pid in tree if pid_alive(pid)] == []


# ---------------------------------------------------------------------------------------------------------------
# A restart with the socket held open, as systemd holds it
# ---------------------------------------------------------------------------------------------------------------

TIOCGPTN = 0x80045430  # _IOR('T', 0x30, unsigned int): the number of a PTY master's /dev/pts entry

# What systemd does between fork and exec: the listener at fd 3 and the stored fds after it, LISTEN_PID naming
# the process itself. argv[1]: the fds as "fd=name,fd=name".
_EXEC_WITH_LISTEN_FDS = """
import fcntl, os, sys
passed = [item.split("=") for item in sys.argv[1].split(",")]
moved = [fcntl.fcntl(int(fd), fcntl.F_DUPFD_CLOEXEC, 100) for fd, _ in passed]  # out of the way first
for index, fd in enumerate(moved):
    os.dup2(fd, 3 + index)  # inheritable
os.environ.update(
    LISTEN_PID=str(os.getpid()), LISTEN_FDS=str(len(passed)), LISTEN_FDNAMES=":".join(name for _, name in passed)
)
os.execv(sys.argv[2], sys.argv[2:])
"""


def start_on_listener(
    daemon: Daemon, listener: socket.socket, notify: NotifySocket, stored: dict[str, int] | None = None
) -> None:
    """Start ptyd on ``listener`` the way systemd does, with ``stored`` (fds by name) as its fd store passes them
    back, and ``$FDSTORE`` set when there is a store."""
    passed = {listener.fileno(): "ptyd.socket", **{fd: name for name, fd in (stored or {}).items()}}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}, "NOTIFY_SOCKET": str(notify.path)}
    if stored is not None:
        env["FDSTORE"] = "16"
    log = open(daemon.log_path, "ab")  # noqa: SIM115 - handed to the child
    daemon.proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _EXEC_WITH_LISTEN_FDS,
            ",".join(f"{fd}={name}" for fd, name in passed.items()),
            str(PTYD_BIN),
            "--socket",
            str(daemon.socket),
            "--config",
            str(daemon.config_path),
        ],
        pass_fds=tuple(passed),
        stdout=log,
        stderr=log,
        env=env,
    )
    log.close()


def saved_text(directory: Path) -> str:
    """The transcripts and screens in the state file: what a daemon restarted after a crash starts from."""
    state = StateFile(directory).read()
    if state is None:
        return ""
    terminals = [s.terminal for s in state.sessions.values() if s.terminal is not None]
    return "\n".join(line for t in terminals for line in [*t.lines, t.screen.decode(errors="replace")])


@pytest.fixture
def listener(fresh_daemon: Daemon) -> Iterator[socket.socket]:
    """The daemon's listening socket, held by the test as systemd holds it across daemon restarts."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(fresh_daemon.socket))
    sock.listen(16)
    yield sock
    sock.close()


def test_client_connecting_while_the_daemon_restarts_is_answered_by_the_next_one(
    fresh_daemon: Daemon, notify: NotifySocket, listener: socket.socket
) -> None:
    start_on_listener(fresh_daemon, listener, notify)
    first = notify.wait_for("READY=1")
    assert fresh_daemon.stop(signal.SIGTERM) == 0, fresh_daemon.log()
    notify.wait_for("STOPPING=1")
    # Between the two daemons the socket still accepts into its backlog: the client waits, it is not refused.
    with Rpc(fresh_daemon.socket) as rpc:
        request = rpc.request("daemon_info")
        start_on_listener(fresh_daemon, listener, notify)
        assert fresh_daemon.proc is not None
        assert rpc.response(request)["pid"] == fresh_daemon.proc.pid != int(first["MAINPID"])
    assert fresh_daemon.stop(signal.SIGTERM) == 0, fresh_daemon.log()


def test_the_fd_store_holds_each_sessions_pty_and_a_daemon_started_with_it_adopts_the_sessions(
    fresh_daemon: Daemon, notify: NotifySocket, listener: socket.socket
) -> None:
    # The test plays systemd: it keeps what the daemon stores, SIGKILLs it, and passes the store to the next one.
    start_on_listener(fresh_daemon, listener, notify, stored={})
    notify.wait_for("READY=1")
    with Rpc(fresh_daemon.socket) as rpc:
        tok = rpc.call("agent_register")["token"]
        kept, gone = Shell(rpc, tok, env={"PS1": "$ "}), Shell(rpc, tok, env={"PS1": "$ "})
        kept.send("X=kept; echo marker-$X\n")
        assert gone.close()["closed"] is True
    notify.wait_for(f"FDNAME={gone.id}")
    removed = notify.wait_for("FDSTOREREMOVE=1")
    assert removed["FDNAME"] == gone.id
    # What was stored is the session's PTY: its master, whose slave is the program's terminal.
    master = notify.fds[kept.id]
    assert os.readlink(f"/proc/self/fd/{master}") == "/dev/ptmx"
    pts = int.from_bytes(fcntl.ioctl(master, TIOCGPTN, bytes(4)), sys.byteorder)
    assert os.readlink(f"/proc/{kept.opened['pid']}/fd/0") == f"/dev/pts/{pts}"
    wait_until(lambda: "marker-kept" in saved_text(fresh_daemon.directory), message="the screen to be saved")
    tree = session_pids(kept)
    assert fresh_daemon.proc is not None
    fresh_daemon.proc.kill()
    fresh_daemon.proc.wait()
    assert [pid for pid in tree if not pid_alive(pid)] == []
    unknown = "pty-" + "0" * 24  # a stored fd no session of the state file has
    start_on_listener(fresh_daemon, listener, notify, stored={kept.id: master, unknown: os.dup(master)})
    with Rpc(fresh_daemon.socket) as rpc:
        assert rpc.call("daemon_info")["sessions"] == 1
        kept.rpc = rpc
        assert kept.call("terminal_status")["pid"] == kept.opened["pid"]
        assert "marker-kept" in kept.transcript()
        assert kept.send("echo still-$X\n")["viewport"].splitlines()[-2] == "still-kept"
    assert notify.wait_for(f"FDNAME={unknown}").get("FDSTOREREMOVE") == "1"  # dropped from the store
    assert fresh_daemon.stop(signal.SIGTERM) == 0, fresh_daemon.log()
    assert [pid for pid in tree if pid_alive(pid)] == []


# ---------------------------------------------------------------------------------------------------------------
# A real systemd user manager: Delegate=, KillMode=, Restart= and socket activation by systemd itself
# ---------------------------------------------------------------------------------------------------------------

# A private user manager that cannot see or touch the host's cgroups or /run/systemd: it runs in a cgroup made
# for it, inside its own cgroup and mount namespaces, with cgroup2 remounted so that its cgroup is the root.
# /run/systemd/system is what sd_booted() looks for; without it a user manager refuses to start.
_USER_MANAGER = """
echo $$ > "$1/cgroup.procs"
exec unshare --mount --cgroup --propagation private -- sh -c '
  umount -R -l /sys/fs/cgroup
  mount -t cgroup2 cgroup2 /sys/fs/cgroup
  mount -t tmpfs tmpfs /run/systemd
  mkdir /run/systemd/system
  exec "$0" --user --log-target=console
' "$2"
"""


class UserManager:
    """``systemctl --user`` against a private ``systemd --user`` whose units, runtime dir and cgroup are a test's."""

    def __init__(self, home: Path, cgroup: Path) -> None:
        self.home = home
        self.cgroup = cgroup
        self.runtime = home / "runtime"
        self.config = home / "config"
        self.units = self.config / "systemd" / "user"
        self.socket = self.runtime / "ptyd" / "ptyd.sock"
        self.log = home / "ptyd.log"
        self.env = {k: v for k, v in os.environ.items() if k not in ("DBUS_SESSION_BUS_ADDRESS", "PTYD_BIN")}
        self.env.update(HOME=str(home), XDG_CONFIG_HOME=str(self.config), XDG_RUNTIME_DIR=str(self.runtime))

    def systemctl(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["systemctl", "--user", "--no-pager", *args], env=self.env, capture_output=True, text=True, timeout=60
        )
        if check:
            assert done.returncode == 0, f"systemctl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def show(self, unit: str, prop: str) -> str:
        return self.systemctl("show", "--value", "-p", prop, unit).strip()

    def main_pid(self) -> int:
        return int(self.show("ptyd.service", "MainPID"))

    def write_config(self, text: str) -> None:
        (self.config / "ptyd").mkdir(parents=True, exist_ok=True)
        (self.config / "ptyd" / "config.toml").write_text(text)


def _cgroup2_mount() -> Path | None:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                return Path(left.split()[4])
    return None


def unit_cgroup_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text().split("0::", 1)[1].split("\n", 1)[0]


def _kill_cgroup_tree(cgroup: Path) -> None:
    (cgroup / "cgroup.kill").write_text("1\n")
    wait_until(lambda: "populated 0" in (cgroup / "cgroup.events").read_text(), message=f"{cgroup} to empty")
    for directory in sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        directory.rmdir()
    cgroup.rmdir()


@pytest.fixture(scope="module")
def user_manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UserManager]:
    manager_bin = Path("/lib/systemd/systemd")
    if os.geteuid() != 0 or not manager_bin.exists() or shutil.which("unshare") is None:
        pytest.skip("a private systemd user manager needs root, unshare and /lib/systemd/systemd")
    mount = _cgroup2_mount()
    if mount is None:
        pytest.skip("no cgroup v2 hierarchy")
    cgroup = mount / unit_cgroup_of(os.getpid()).lstrip("/") / f"ptyd-test-user-manager-{os.getpid()}"
    cgroup.mkdir()
    if not (cgroup / "cgroup.kill").exists():
        cgroup.rmdir()
        pytest.skip("the kernel has no cgroup.kill (Linux 5.14+)")
    home = private_dir(tmp_path_factory, "user-manager")
    manager = UserManager(home, cgroup)
    manager.runtime.mkdir(mode=0o700)
    manager.units.mkdir(parents=True)
    # systemd-journald is not running: the daemon's log goes to a file so a failure can show it.
    (manager.units / "ptyd.service.d").mkdir()
    (manager.units / "ptyd.service.d" / "log.conf").write_text(
        f"[Service]\nStandardOutput=append:{manager.log}\nStandardError=append:{manager.log}\n"
    )
    with open(home / "manager.log", "wb") as log:
        proc = subprocess.Popen(
            ["sh", "-c", _USER_MANAGER, "sh", str(cgroup), str(manager_bin)],
            env=manager.env,
            stdout=log,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 20
        while manager.systemctl("show", "-p", "Version", check=False) == "":
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"could not start a private user manager: {(home / 'manager.log').read_text()}")
            time.sleep(0.05)
        done = run_install(home, "install", PTYD_BIN)  # the manager is reachable: this also daemon-reloads
        assert done.returncode == 0, done.stderr
        assert "reloaded the user manager" in done.stdout
        manager.systemctl("enable", "--now", "ptyd.socket")
        yield manager
    finally:
        _kill_cgroup_tree(cgroup)
        proc.wait(10)


@pytest.fixture
def managed(user_manager: UserManager) -> Iterator[UserManager]:
    """The user manager with ptyd.service stopped and reset before and after the test."""
    user_manager.systemctl("stop", "ptyd.service")
    user_manager.systemctl("reset-failed", "ptyd.service", check=False)
    yield user_manager
    with contextlib.suppress(FileNotFoundError):
        (user_manager.config / "ptyd" / "config.toml").unlink()
    user_manager.systemctl("stop", "ptyd.service")
    user_manager.systemctl("reset-failed", "ptyd.service", check=False)


def open_sessions(socket_path: Path) -> tuple[dict[int, str], int]:
    """Two sessions, one with a setsid escapee, one with a program that ignores SIGHUP and SIGTERM.

    Returns every session process (pid to session id) and the escapee's pid.
    """
    with Rpc(socket_path) as rpc:
        tok = rpc.call("agent_register")["token"]
        shells = [Shell(rpc, tok, env={"PS1": "$ "}) for _ in range(2)]
        escapee = start_escapee(shells[0])
        shells[1].send("trap '' HUP TERM; sleep 1000 &\n")
        shells[1].send("sleep 1000\n", wait=False)
        tree = {pid: s.id for s in shells for pid in session_pids(s)}
    assert escapee in tree
    return tree, escapee


def test_systemd_starts_the_service_on_connect_and_each_session_gets_a_delegated_cgroup(
    managed: UserManager,
) -> None:
    assert managed.show("ptyd.service", "ActiveState") == "inactive"
    assert oct(managed.socket.stat().st_mode & 0o777) == "0o600"
    assert oct(managed.socket.parent.stat().st_mode & 0o777) == "0o700"
    with Rpc(managed.socket) as rpc:
        info = rpc.call("daemon_info")
    assert managed.show("ptyd.service", "ActiveState") == "active"  # READY=1 arrived
    assert info["pid"] == managed.main_pid()
    assert info["containment"] == "cgroup"
    assert managed.show("ptyd.service", "StatusText").startswith("serving, ")
    tree, escapee = open_sessions(managed.socket)
    daemon_cgroup = unit_cgroup_of(info["pid"])
    assert daemon_cgroup.endswith("/app.slice/ptyd.service")
    sessions_cgroup = unit_cgroup_of(escapee).rsplit("/", 1)[0]
    assert sessions_cgroup.startswith(f"{daemon_cgroup}/ptyd-")
    # Every process, the escapee included (it left its session and process group), is in its session's cgroup.
    assert {pid: unit_cgroup_of(pid) for pid in tree} == {pid: f"{sessions_cgroup}/{sid}" for pid, sid in tree.items()}


def test_systemctl_stop_closes_every_session_and_exits_cleanly(managed: UserManager) -> None:
    tree, _ = open_sessions(managed.socket)
    managed.systemctl("stop", "ptyd.service")
    assert (managed.show("ptyd.service", "Result"), managed.show("ptyd.service", "ExecMainStatus")) == ("success", "0")
    assert [pid for pid in tree if pid_alive(pid)] == []
    assert "sessions did not close" not in managed.log.read_text()


def test_processes_the_daemon_could_not_close_in_time_are_killed_once_it_exits(managed: UserManager) -> None:
    # With no time to close, the HUP/TERM-ignoring program and the escapee are still there when the grace ends:
    # the daemon kills them itself before it exits (KillMode=process: systemd would leave them running).
    managed.write_config("shutdown_grace_ms = 1\n")
    tree, _ = open_sessions(managed.socket)
    managed.systemctl("stop", "ptyd.service")
    assert "sessions did not close within 1 ms" in managed.log.read_text()
    assert managed.show("ptyd.service", "ExecMainStatus") == "0"
    assert [pid for pid in tree if pid_alive(pid)] == []


def daemon_info(manager: UserManager) -> dict[str, Any]:
    """``daemon_info``, or nothing while the daemon is between two processes."""
    try:
        with Rpc(manager.socket) as rpc:
            return dict(rpc.call("daemon_info"))
    except (OSError, RpcError):
        return {}


def test_crashed_daemon_is_restarted_and_adopts_every_session(managed: UserManager) -> None:
    # Unsandboxed: its programs watch the dead daemon's host pid (a sandbox has a pid namespace of its own) and
    # run the checkout's python (under /tmp on CI: the sandbox's /tmp is private).
    managed.write_config('sandbox_default = "none"\n')
    with Rpc(managed.socket) as rpc:
        alice = rpc.call("agent_register", name="alice")["token"]
        bob = rpc.call("agent_register", name="bob")["token"]
        shell = Shell(rpc, alice, env={"PS1": "$ "})
        repl = Shell(rpc, bob, argv=[sys.executable, "-q"], env={"PYTHONSTARTUP": ""})
        crashed = managed.main_pid()
        # A program that ends while no daemon runs: there is nothing to adopt, and nothing of it may be left.
        doomed = Shell(rpc, bob, argv=["sh", "-c", f"while kill -0 {crashed}; do sleep 0.05; done"])
        shell.send("X=forty-two; echo marker-$X\n")
        repl.send("answer = 41\n")
        screen = repl.call("terminal_screen")
        # Printed while no daemon reads the PTY: the kernel keeps it for the next one.
        shell.send(f"while kill -0 {crashed} 2>/dev/null; do sleep 0.05; done; echo printed-unread\n", wait=False)
        trees = {s.id: session_pids(s) for s in (shell, repl, doomed)}
    wait_until(
        lambda: (
            "marker-forty-two" in saved_text(managed.socket.parent)
            and "answer = 41" in saved_text(managed.socket.parent)
        ),
        message="the screens to be saved",
    )
    assert managed.show("ptyd.service", "NFileDescriptorStore") == "3"
    os.kill(crashed, signal.SIGKILL)
    wait_until(lambda: managed.main_pid() not in (0, crashed), timeout=20, message="the restarted daemon")
    wait_until(lambda: managed.show("ptyd.service", "ActiveState") == "active", message="the restart to finish")
    assert managed.show("ptyd.service", "NRestarts") == "1"
    with Rpc(managed.socket) as rpc:
        info = rpc.call("daemon_info")
        assert (info["pid"], info["sessions"]) == (managed.main_pid(), 2)
        shell.rpc = repl.rpc = rpc
        # The owners' tokens still work, and each sees its own sessions only.
        assert {s["session_id"] for s in rpc.call("terminal_list", token=alice)["sessions"]} == {shell.id}
        assert {s["session_id"] for s in rpc.call("terminal_list", token=bob)["sessions"]} == {repl.id}
        # The same programs, with their state, their screens and their transcripts.
        assert {s.id: s.call("terminal_status")["pid"] for s in (shell, repl)} == {
            shell.id: shell.opened["pid"],
            repl.id: repl.opened["pid"],
        }
        assert repl.call("terminal_screen") == screen
        wait_until(lambda: "printed-unread" in shell.transcript(), message="the output printed meanwhile")
        assert "marker-forty-two" in shell.transcript()
        assert shell.send("echo still $X\n")["viewport"].splitlines()[-2] == "still forty-two"
        assert repl.send("print(answer + 1)\n")["viewport"].splitlines()[-2] == "42"
    assert [pid for pid in trees[doomed.id] if pid_alive(pid)] == []
    assert managed.show("ptyd.service", "NFileDescriptorStore") == "2"  # the doomed session's PTY is dropped
    # A planned handover after the adoption: the adopted programs are not the daemon's children (systemd reaps
    # them), and the next daemon still learns of their exit, without a status.
    managed.systemctl("kill", "--kill-whom=main", "-s", "SIGUSR2", "ptyd.service")
    wait_until(lambda: daemon_info(managed).get("handovers") == 1, timeout=60, message="the handover")
    with Rpc(managed.socket) as rpc:
        shell.rpc = rpc
        shell.send("exit\n", wait=False)
        wait_until(lambda: shell.call("terminal_status")["status"]["kind"] == "exited", message="the exit")
        assert shell.call("terminal_status")["status"] == {"kind": "exited", "exit_code": None, "signal": None}
    # Stopping the service still ends every tree.
    managed.systemctl("stop", "ptyd.service")
    assert [pid for tree in trees.values() for pid in tree if pid_alive(pid)] == []


def test_bad_config_fails_the_service_once_instead_of_restarting_in_a_loop(managed: UserManager) -> None:
    managed.write_config("no_such_setting = 1\n")
    managed.systemctl("start", "ptyd.service", check=False)
    wait_until(lambda: managed.show("ptyd.service", "ActiveState") == "failed", message="the service to fail")
    assert managed.show("ptyd.service", "ExecMainStatus") == "2"
    assert managed.show("ptyd.service", "NRestarts") == "0"
    assert managed.show("ptyd.socket", "ActiveState") == "active"  # the next connection tries again


def test_reload_rereads_the_config_and_keeps_sessions(managed: UserManager) -> None:
    tree, _ = open_sessions(managed.socket)
    pid = managed.main_pid()
    managed.write_config("default_cols = 100\n")
    managed.systemctl("reload", "ptyd.service")
    wait_until(lambda: "configuration reloaded" in managed.log.read_text(), message="the reload")
    assert managed.main_pid() == pid
    assert [p for p in tree if not pid_alive(p)] == []


def test_a_ptyd_started_by_hand_on_the_units_path_leaves_the_socket_unit_working(managed: UserManager) -> None:
    listening = managed.socket.stat().st_ino
    config = managed.home / "empty.toml"
    config.write_text("")
    with open(managed.home / "manual.log", "wb") as log:
        manual = subprocess.Popen(
            [str(PTYD_BIN), "--socket", str(managed.socket), "--config", str(config)],
            env=managed.env,
            stdout=log,
            stderr=log,
        )
    try:
        # It must either refuse (the path is taken) or serve it; the bug is that it takes the path over.
        wait_until(
            lambda: manual.poll() is not None or managed.socket.stat().st_ino != listening,
            message="the hand-started ptyd to refuse or to serve",
        )
        assert manual.wait(30) == 1
        assert b"held by another listener" in (managed.home / "manual.log").read_bytes()
        with Rpc(managed.socket) as rpc:
            assert rpc.call("daemon_info")["pid"] == managed.main_pid()
    finally:
        if manual.poll() is None:
            manual.kill()
            manual.wait(10)
        managed.systemctl("restart", "ptyd.socket")  # rebinds the path whatever happened to it


def unit_processes(manager: UserManager) -> list[int]:
    """Every process in the user manager's cgroup tree (the manager, the daemon and the sessions)."""
    procs = [d / "cgroup.procs" for d in [manager.cgroup, *manager.cgroup.rglob("*")] if d.is_dir()]
    return [int(pid) for path in procs if path.exists() for pid in path.read_text().split()]


@pytest.mark.slow
def test_crash_after_crash_adopts_twenty_full_sessions_with_nothing_growing(managed: UserManager) -> None:
    with Rpc(managed.socket) as rpc:
        tok = rpc.call("agent_register")["token"]
        shells = [Shell(rpc, tok, env={"PS1": "$ "}) for _ in range(20)]
        for i, s in enumerate(shells):
            s.send(f"seq -f 'row %g of session {i}' 1 3000; echo done-{i}\n")
        tree = [pid for s in shells for pid in session_pids(s)]
    baseline: tuple[int, int] | None = None
    for round in range(4):  # 5 starts in 10 s is systemd's default start limit: 4 crashes stay under it
        wait_until(lambda: all(f"done-{i}" in saved_text(managed.socket.parent) for i in range(20)), timeout=30)
        crashed = managed.main_pid()
        started = time.monotonic()
        os.kill(crashed, signal.SIGKILL)
        wait_until(lambda: daemon_info(managed).get("sessions") == 20, timeout=30, message="the adoption")
        adopted_s = time.monotonic() - started
        with Rpc(managed.socket) as rpc:
            for s in shells:
                s.rpc = rpc
                assert s.send(f"echo round-{round}\n")["viewport"].splitlines()[-2] == f"round-{round}"
        assert managed.show("ptyd.service", "NFileDescriptorStore") == "20"
        counts = (len(unit_processes(managed)), len(os.listdir(f"/proc/{managed.main_pid()}/fd")))
        assert counts == (baseline or counts), f"processes and daemon fds {counts}, after the first crash {baseline}"
        baseline = counts
        print(f"crash {round + 1}: 20 sessions adopted and served {adopted_s:.2f} s after the SIGKILL")
    managed.systemctl("stop", "ptyd.service")
    assert [pid for pid in tree if pid_alive(pid)] == []
