"""Where a sandboxed session may write, through a real daemon and real bubblewrap: the operator grants writable
roots, the agent does not (issue 27's first attacks: a `workspace` session writing `~/.bashrc`, `~/.config`,
another agent's workspace, ptyd's state).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Daemon, Rpc, RpcError, Shell
from ptyd.backends.os.sandbox.bwrap import PACKAGE_DIR
from ptyd.backends.os.sandbox.workspace import scratch_dir
from ptyd.backends.recording.store import default_directory as default_recordings

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

TEMP = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
HOME = Path.home()


@pytest.fixture(scope="module")
def scratch_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scratch")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, scratch_base: Path) -> Iterator[Daemon]:
    directory = tmp_path_factory.mktemp("ptyd-workspaces")
    directory.chmod(0o700)
    config = (
        'sandbox_default = "workspace"\n'
        f'sandbox_roots = ["{TEMP}", "~"]\n'
        f'sandbox_scratch_dir = "{scratch_base}"\n'
        'sandbox_agent_roots = { "ungranted" = [] }\n'
        "sandbox_tmp_mib = 8\n"
    )
    d = Daemon(directory, config)
    d.start()
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Rpc]:
    with daemon.rpc() as rpc:
        yield rpc


@contextlib.contextmanager
def agent(rpc: Rpc, name: str) -> Iterator[str]:
    token: str = rpc.call("agent_register", name=name)["token"]
    try:
        yield token
    finally:
        with contextlib.suppress(RpcError, OSError):
            rpc.call("agent_release", token=token)


def shell(rpc: Rpc, token: str, **params: Any) -> Shell:
    return Shell(rpc, token, env={"PS1": "$ "}, **params)


def refused(rpc: Rpc, token: str, cwd: Path) -> RpcError:
    with pytest.raises(RpcError) as caught:
        rpc.call("terminal_open", token=token, cwd=str(cwd))
    assert caught.value.kind == "workspace_refused", caught.value
    assert caught.value.data["path"] == str(cwd)
    assert str(cwd) in caught.value.message
    return caught.value


@pytest.fixture
def home_dir() -> Iterator[Path]:
    """A directory in the home (not under /tmp, which every sandbox has its own of)."""
    path = Path(tempfile.mkdtemp(dir=HOME, prefix="ptyd-test-"))
    yield path
    shutil.rmtree(path)


def test_a_session_opened_without_cwd_writes_its_scratch_directory_never_the_home(
    client: Rpc, scratch_base: Path
) -> None:
    bashrc = HOME / ".bashrc"
    before = bashrc.read_bytes() if bashrc.exists() else None
    with agent(client, "no-cwd") as token:
        s = shell(client, token)
        scratch = scratch_dir(str(scratch_base), "no-cwd")
        result = s.send("pwd; echo pwned >> ~/.bashrc; touch ~/ptyd-test-pwned; echo mine > notes; cat notes\n")
        assert scratch in result["viewport"].splitlines(), result["viewport"]
        assert ".bashrc: Read-only file system" in result["viewport"], result["viewport"]
        assert "ptyd-test-pwned': Read-only file system" in result["viewport"]
        assert "mine" in result["viewport"].splitlines()
    assert (Path(scratch) / "notes").read_text() == "mine\n"
    assert (Path(scratch).stat().st_mode & 0o777) == 0o700
    assert not (HOME / "ptyd-test-pwned").exists()
    assert (bashrc.read_bytes() if bashrc.exists() else None) == before


def test_the_home_its_dot_directories_and_ptyds_own_are_never_writable_roots(client: Rpc) -> None:
    with agent(client, "greedy") as token:  # "~" is granted: still not the home itself, nor ~/.config
        assert refused(client, token, HOME).data["reason"] == "protected"
        assert "home directory" in refused(client, token, HOME).message
        (HOME / ".config").mkdir(exist_ok=True)
        assert refused(client, token, HOME / ".config").data["reason"] == "protected"
        state = default_recordings().parent
        state.mkdir(parents=True, exist_ok=True)
        assert refused(client, token, state).data["reason"] == "ptyd_private"
        assert client.call("terminal_list", token=token)["sessions"] == []  # nothing was started


def test_ptyds_package_and_config_are_never_writable_roots_even_under_a_granted_root(fresh_daemon: Daemon) -> None:
    fresh_daemon.config_path.write_text('sandbox_default = "workspace"\nsandbox_roots = ["/"]\n')
    fresh_daemon.start()
    package = Path(PACKAGE_DIR)
    with fresh_daemon.rpc() as rpc, agent(rpc, "everywhere") as token:
        for cwd in (package, package / "ptyd", package.parent, Path("/")):
            assert refused(rpc, token, cwd).data["reason"] == "protected"
        assert "ptyd's" in refused(rpc, token, package).message
        assert refused(rpc, token, fresh_daemon.directory).data["reason"] == "ptyd_private"


def test_a_cwd_outside_the_granted_roots_is_only_read_and_the_scratch_is_written(
    client: Rpc, home_dir: Path, scratch_base: Path
) -> None:
    (home_dir / "readme").write_text("project\n")
    with agent(client, "ungranted") as token:
        s = shell(client, token, cwd=str(home_dir))
        scratch = scratch_dir(str(scratch_base), "ungranted")
        result = s.send(f"cat readme; echo x > new; pwd; echo built > {scratch}/out\n")
        assert "project" in result["viewport"].splitlines()
        assert "new: Read-only file system" in result["viewport"], result["viewport"]
        assert str(home_dir) in result["viewport"].splitlines()
        s.close()
    assert not (home_dir / "new").exists()
    assert (Path(scratch) / "out").read_text() == "built\n"


def test_another_agents_workspace_is_refused_and_hidden_after_it_closed(
    client: Rpc, tmp_path: Path, scratch_base: Path
) -> None:
    theirs = tmp_path / "alice"
    theirs.mkdir()
    with agent(client, "alice") as alice:
        s = shell(client, alice, cwd=str(theirs))
        s.send("echo hunter2 > secret\n")
        scratch = shell(client, alice)  # and its scratch directory
        scratch.send("echo hunter3 > secret\n")
    assert (theirs / "secret").exists()  # alice is gone, her sessions closed: her files are still there
    mine = tmp_path / "mallory"
    mine.mkdir()
    with agent(client, "mallory") as mallory:
        assert refused(client, mallory, theirs).data["reason"] == "another_agent"
        (theirs / "src").mkdir()
        assert refused(client, mallory, theirs / "src").data["reason"] == "another_agent"
        s = shell(client, mallory, cwd=str(mine))
        alices = scratch_dir(str(scratch_base), "alice")
        result = s.send(f"cat {theirs}/secret {alices}/secret; ls {scratch_base} 2>/dev/null | wc -l\n")
        assert "hunter2" not in result["viewport"]
        assert "hunter3" not in result["viewport"]
        assert result["viewport"].count("No such file or directory") == 2, result["viewport"]
        assert result["viewport"].splitlines()[-2] == "0"  # not even the names of the others' scratch


def test_startup_files_git_hooks_and_config_stay_read_only_inside_a_workspace(client: Rpc, tmp_path: Path) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    shutil.rmtree(workspace / ".git" / "hooks")  # the attack: a repository without hooks gets some
    config = (workspace / ".git" / "config").read_text()
    (workspace / ".bashrc").write_text("# theirs\n")
    (workspace / ".ssh").mkdir()
    (workspace / ".config").mkdir()
    with agent(client, "committer") as token:
        s = shell(client, token, cwd=str(workspace))
        attacks = {
            ".bashrc": "echo evil >> .bashrc",
            ".git/hooks/pre-commit": "echo evil > .git/hooks/pre-commit",
            ".git/config": "echo '[core] hooksPath = /tmp' >> .git/config",
            ".ssh/authorized_keys": "echo evil > .ssh/authorized_keys",
            ".config/autostart": "echo evil > .config/autostart",
        }
        for path, attack in attacks.items():
            result = s.send(f"{attack}\n")
            assert f"{path}: Read-only file system" in result["viewport"], result["viewport"]
        result = s.send("mv .git .git-away; mkdir -p x/.git; mv x/.git .git\n")  # nor replace the repository
        assert "mv: cannot move '.git' to '.git-away': Device or resource busy" in result["viewport"], result
        assert s.send("echo fine > main.c; cat main.c\n")["viewport"].splitlines()[-2] == "fine"
        assert (
            s.send("git add main.c && git -c user.name=a -c user.email=a@b commit -qm x; echo git=$?\n")[
                "viewport"
            ].splitlines()[-2]
            == "git=0"
        )  # git itself still works in it
    assert (workspace / ".bashrc").read_text() == "# theirs\n"
    assert (workspace / ".git" / "config").read_text() == config
    assert (workspace / ".git" / "HEAD").exists()
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert not (workspace / ".ssh" / "authorized_keys").exists()
    assert (workspace / "main.c").read_text() == "fine\n"


def test_ptyds_state_directory_recordings_and_tokens_is_hidden(
    client: Rpc, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state = default_recordings().parent
    state.mkdir(parents=True, exist_ok=True)
    secret = state / f"ptyd-test-secret-{os.getpid()}"
    secret.write_text("hunter2\n")
    request.addfinalizer(secret.unlink)
    with agent(client, "reader") as token:
        s = shell(client, token, cwd=str(tmp_path))
        result = s.send(f"cat {secret}; ls -A {state} | wc -l\n")
        assert "hunter2" not in result["viewport"].splitlines()
        assert "No such file or directory" in result["viewport"], result["viewport"]
        assert result["viewport"].splitlines()[-2] == "0"


def test_a_sandboxs_private_tmp_is_sized_not_half_the_machines_memory(client: Rpc) -> None:
    with agent(client, "filler") as token:
        s = shell(client, token)
        result = s.send("head -c 16M /dev/zero > /tmp/fill; echo status=$?; df -k /tmp | tail -1\n")
        assert "No space left on device" in result["viewport"], result["viewport"]
        assert "status=1" in result["viewport"]
        assert result["viewport"].splitlines()[-2].split()[1] == "8192"  # KiB


def test_an_agent_may_use_only_so_many_workspaces_each_hidden_from_every_other(
    fresh_daemon: Daemon, tmp_path: Path
) -> None:
    fresh_daemon.config_path.write_text(
        f'sandbox_default = "workspace"\nsandbox_roots = ["{TEMP}"]\nsandbox_workspaces_per_agent = 2\n'
        f'sandbox_scratch_dir = "{tmp_path / "scratch"}"\n'
    )
    fresh_daemon.start()
    dirs = [tmp_path / f"ws{i}" for i in range(3)]
    for path in dirs:
        path.mkdir()
    with fresh_daemon.rpc() as rpc, agent(rpc, "hoarder") as token:
        for path in dirs[:2]:
            shell(rpc, token, cwd=str(path)).close()
        with pytest.raises(RpcError) as limited:
            rpc.call("terminal_open", token=token, cwd=str(dirs[2]))
        assert limited.value.data["limit"] == "sandbox_workspaces_per_agent"
        assert str(dirs[2]) in limited.value.message
        assert shell(rpc, token, cwd=str(dirs[0])).opened["sandbox"] == "workspace"  # one it had: still its own


def test_an_unnamed_agents_scratch_directory_goes_with_it(client: Rpc, scratch_base: Path) -> None:
    """Issue 27, item 4: an agent without a name cannot come back to its scratch directory (nothing names it), so
    its release (or expiry, which releases) removes it, whatever it made unwritable inside; a name's stays."""
    registered = client.call("agent_register")
    token, agent_id = registered["token"], registered["agent_id"]
    s = shell(client, token)
    scratch = Path(scratch_dir(str(scratch_base), agent_id, anonymous=True))
    assert scratch.name == f"+{agent_id}"
    result = s.send("pwd; mkdir -p locked/in; echo x > locked/in/f; chmod 500 locked/in locked; ln -s / escape\n")
    assert str(scratch) in result["viewport"].splitlines(), result["viewport"]
    assert (scratch / "locked" / "in" / "f").exists()
    client.call("agent_release", token=token)
    assert not scratch.exists()
    assert Path("/etc/passwd").exists()  # the symlink to / was removed, not followed


def test_a_restart_sweeps_the_scratch_of_unnamed_agents_it_revoked(fresh_daemon: Daemon, tmp_path: Path) -> None:
    base = tmp_path / "scratch"
    fresh_daemon.config_path.write_text(f'sandbox_default = "workspace"\nsandbox_scratch_dir = "{base}"\n')
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        registered = rpc.call("agent_register")
        shell(rpc, registered["token"]).send("echo left > behind\n")
        named = rpc.call("agent_register", name="keeps-its-own")["token"]
        shell(rpc, named).send("echo kept > here\n")
    anonymous = Path(scratch_dir(str(base), registered["agent_id"], anonymous=True))
    assert (anonymous / "behind").exists()
    assert fresh_daemon.stop() == 0  # a shutdown releases nobody: the next start's sweep does it
    assert (anonymous / "behind").exists()
    fresh_daemon.start()
    assert not anonymous.exists()
    assert (Path(scratch_dir(str(base), "keeps-its-own")) / "here").read_text() == "kept\n"


def test_the_sweep_takes_an_unnamed_agents_scratch_of_the_old_naming_too(tmp_path: Path) -> None:
    """Daemons before the "+" prefix named an unnamed agent's scratch directory after its id like any name's: the
    start's sweep finds those by their id and its hash, and leaves every name's alone."""
    from ptyd.backends.os.sandbox.workspace import anonymous_scratch

    old = Path(scratch_dir(str(tmp_path), "agent-0123456789abcdef"))
    new = Path(scratch_dir(str(tmp_path), "agent-fedcba9876543210", anonymous=True))
    named = Path(scratch_dir(str(tmp_path), "builder"))
    lookalike = tmp_path / "agent-0123456789abcdef-000000000000"  # the id's form, not its hash: someone's name
    for path in (old, new, named, lookalike):
        path.mkdir()
    found = sorted(anonymous_scratch(str(tmp_path)))
    assert found == [("agent-0123456789abcdef", str(old)), ("agent-fedcba9876543210", str(new))]
