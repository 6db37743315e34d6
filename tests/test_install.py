"""Installing without a checkout: the wheels built from this tree carry what the daemon needs at run time (the
shell integration files, the systemd units and their installer, the license), and a fresh virtualenv outside the
checkout with the wheel installed runs ptyd, a session with shell integration, ptyctl and ``ptyd install-user``.

The fresh venv gets ptyd from the wheel alone; its third-party dependencies come from this interpreter's
site-packages through a path entry (no index needed, and the checkout's own editable ptyd is not on that path:
a .pth file's path entries are not searched for further .pth files)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, Daemon

PIP = [sys.executable, "-m", "pip"]
RUNTIME_FILES = [
    "ptyd/backends/shell_integration/bash_integration.sh",
    "ptyd/backends/shell_integration/fish_integration.fish",
    "ptyd/backends/shell_integration/zsh/.zshenv",
    "ptyd/daemon/units/ptyd.service",
    "ptyd/daemon/units/ptyd.socket",
    "ptyd/daemon/units/install.sh",
    # screenshots draw with the font the package ships, and its licence travels with it
    "ptyd/terminal/fonts/DejaVuSansMono.ttf",
    "ptyd/terminal/fonts/DejaVuSansMono-Bold.ttf",
    "ptyd/terminal/fonts/LICENSE",
    "ptyd/py.typed",
    "ptyd_client/py.typed",
]


def build_wheels(out: Path, *sources: Path) -> list[Path]:
    """``pip wheel SOURCE... -w OUT --no-deps``, as a user would (each in its own isolated build environment)."""
    done = subprocess.run(
        [*PIP, "wheel", *map(str, sources), "-w", str(out), "--no-deps", "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(out.glob("*.whl"))


def fresh_venv(directory: Path, wheel: Path, *, with_dependencies: bool) -> Path:
    """A new virtualenv at ``directory`` with ``wheel`` installed (no dependencies from an index)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=120)
    python = directory / "bin" / "python"
    done = subprocess.run(
        [*PIP, "--python", str(python), "install", "--no-deps", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if with_dependencies:
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        ours = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
        (Path(purelib) / "dependencies-from-the-test.pth").write_text("\n".join(sorted(ours)) + "\n")
    return directory / "bin"


def outside_env(bin_dir: Path, home: Path) -> dict[str, str]:
    """A user's environment with the fresh venv's bin first on PATH and nothing of the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", HOME=str(home), XDG_CONFIG_HOME=str(home / "config"))
    return env


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ptyd, client = build_wheels(tmp_path_factory.mktemp("dist"), ROOT, ROOT / "clients" / "python")
    assert (ptyd.name, client.name) == ("ptyd-0.1.0-py3-none-any.whl", "ptyd_client-0.1.0-py3-none-any.whl")
    return {"ptyd": ptyd, "ptyd-client": client}


def test_the_wheel_carries_the_files_the_daemon_reads_at_run_time(wheels: dict[str, Path]) -> None:
    names = zipfile.ZipFile(wheels["ptyd"]).namelist()
    missing = [name for name in RUNTIME_FILES if name not in names]
    assert not missing, f"the wheel lacks {missing}"
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not [name for name in names if name.startswith(("tests/", "tools/", "bench/"))]


def test_the_client_wheel_is_the_client_alone(wheels: dict[str, Path]) -> None:
    names = zipfile.ZipFile(wheels["ptyd-client"]).namelist()
    assert "ptyd_client/ptyctl.py" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not [name for name in names if name.startswith(("ptyd/", "ptyd_mcp/"))]


@pytest.fixture(scope="module")
def installed(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fresh venv with the ptyd wheel, and a home directory outside the checkout."""
    home = tmp_path_factory.mktemp("home")
    home.chmod(0o700)
    return fresh_venv(home / "venv", wheels["ptyd"], with_dependencies=True), home


def test_installed_ptyd_runs_a_session_with_shell_integration_outside_the_checkout(
    installed: tuple[Path, Path],
) -> None:
    bin_dir, home = installed
    env = outside_env(bin_dir, home)
    version = subprocess.run(["ptyd", "--version"], env=env, cwd=home, capture_output=True, text=True, timeout=60)
    assert (version.returncode, version.stdout.strip()) == (0, "ptyd 0.1.0"), version.stderr
    where = subprocess.run(
        ["python", "-c", "import ptyd, ptyd_client; print(ptyd.__file__); print(ptyd_client.__file__)"],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(path).is_relative_to(bin_dir.parent) for path in where), where  # the wheel's, not the checkout's

    (home / "run").mkdir(mode=0o700)
    daemon = Daemon(home / "run")
    with open(daemon.log_path, "wb") as log:
        daemon.proc = subprocess.Popen(
            ["ptyd", "--socket", str(daemon.socket), "--config", str(daemon.config_path)],
            env=env,
            cwd=home,
            stdout=log,
            stderr=log,
        )
    try:
        daemon.wait_ready()
        status = subprocess.run(
            ["ptyctl", "--socket", str(daemon.socket), "status"], env=env, cwd=home, capture_output=True, text=True
        )
        assert status.returncode == 0, status.stderr
        assert status.stdout.startswith("ptyd 0.1.0 (protocol ")
        script = (
            "import json, sys\n"
            "from ptyd_client import Client\n"
            "with Client(sys.argv[1]) as ptyd:\n"
            "    ptyd.agent_register('from-the-wheel')\n"
            "    with ptyd.open(cwd='/') as shell:\n"
            "        result = shell.send('false\\n')\n"
            "    ptyd.agent_release()\n"
            "print(json.dumps(result))\n"
        )
        sent = subprocess.run(
            ["python", "-c", script, str(daemon.socket)], env=env, cwd=home, capture_output=True, text=True, timeout=60
        )
        assert sent.returncode == 0, sent.stderr + daemon.log()
        result = json.loads(sent.stdout)
        # exit_code and cwd come from the prompt marks: the integration's files were found inside the package.
        assert (result["wait_reason"], result["exit_code"], result["cwd"]) == ("stdin_read", 1, "/")
    finally:
        assert daemon.stop() == 0, daemon.log()


def test_installed_ptyd_installs_the_units_it_carries(installed: tuple[Path, Path]) -> None:
    bin_dir, home = installed
    env = outside_env(bin_dir, home)
    done = subprocess.run(["ptyd", "install-user"], env=env, cwd=home, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    service = (home / "config" / "systemd" / "user" / "ptyd.service").read_text()
    assert f"\nExecStart={bin_dir / 'ptyd'} " in service
    assert (home / "config" / "systemd" / "user" / "ptyd.socket").exists()
    assert "systemctl --user enable --now ptyd.socket" in done.stdout or "'make run'" in done.stdout
    assert "fd_keeper = true" not in done.stdout  # the default already: nothing to add to a config file
    removed = subprocess.run(["ptyd", "uninstall-user"], env=env, cwd=home, capture_output=True, text=True)
    assert removed.returncode == 0, removed.stderr
    assert not (home / "config" / "systemd" / "user" / "ptyd.service").exists()


def test_the_client_alone_installs_and_reaches_a_daemon(
    wheels: dict[str, Path], daemon: Daemon, tmp_path: Path
) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", wheels["ptyd-client"], with_dependencies=False)
    env = outside_env(bin_dir, tmp_path)
    status = subprocess.run(
        ["ptyctl", "--socket", str(daemon.socket), "status"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("ptyd 0.1.0 (protocol ")
    alone = subprocess.run(["python", "-c", "import ptyd"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert alone.returncode != 0  # the daemon is not part of it


def test_every_install_line_of_the_readme_names_this_checkout_as_it_is() -> None:
    """`pipx install ./ptyd` named the package folder, not an installable project: each local target of an
    install line in the README's shell blocks is a project directory from the checkout's root, and each extra it
    names is one of the project's."""
    readme = (ROOT / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", readme, re.S))
    lines = [line.split("#", 1)[0] for line in blocks.splitlines() if re.search(r"\bpipx? install\b", line)]
    assert lines, "the README's install lines are gone"
    extras = set(importlib.metadata.metadata("ptyd").get_all("Provides-Extra") or [])
    for line in lines:
        targets = [word.strip("'\"") for word in line.split()[2:] if not word.startswith("-")]
        assert targets, line
        for target in targets:
            path, _, extra = target.partition("[")
            assert (ROOT / path / "pyproject.toml").is_file(), f"{line!r}: {path} is no project of this checkout"
            for name in filter(None, extra.rstrip("]").split(",")):
                assert name in extras, f"{line!r}: no extra {name!r}"
