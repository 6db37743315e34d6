"""The README's examples run as written: with the PATH line of its "Set up" section, from the checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, Daemon, Rpc

README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent  # what `export PATH="$PWD/.venv/bin:$PATH"` puts first


def readme_blocks(heading: str, language: str) -> list[str]:
    text = README.read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(rf"```{language}\n(.*?)```", section, re.S)
    assert blocks, f"no {language} block under {heading!r}"
    return blocks


def readme_block(heading: str, language: str) -> str:
    return readme_blocks(heading, language)[0]


def as_the_readme_says(daemon: Daemon, **extra: str) -> dict[str, str]:
    """The user's environment after the README's PATH line, with the test's daemon as the default socket."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["PTYD_SOCKET"] = str(daemon.socket)
    env.pop("PYTHONPATH", None)
    return {**env, **extra}


def run_sh(script: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # bash -e: a step of the block that fails fails the test (a pasted block would just print the error).
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_set_up_puts_ptyd_and_ptyctl_on_the_path(daemon: Daemon) -> None:
    path_block = readme_blocks("Set up", "sh")[1]
    assert 'export PATH="$PWD/.venv/bin:$PATH"' in path_block
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTYD_")}
    env["PTYD_SOCKET"] = str(daemon.socket)
    env["PATH"] = "/usr/bin:/bin"  # nothing of the checkout until the block's own export
    done = run_sh(path_block, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ptyd 0.1.0 (protocol ")


@pytest.mark.skipif(not (shutil.which("socat") and shutil.which("jq")), reason="socat or jq is not installed")
def test_shell_session_example(daemon: Daemon) -> None:
    done = run_sh(readme_block("A session from the shell", "sh"), as_the_readme_says(daemon))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[1] == "Linux"


def test_shell_session_example_stops_and_says_so_without_socat_or_jq(daemon: Daemon, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # every tool the example uses but jq
    bin_dir.mkdir()
    for tool in ("id", "socat"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    script = readme_block("A session from the shell", "sh")
    env = {**as_the_readme_says(daemon), "PATH": str(bin_dir)}
    # As pasted into an interactive shell: no -e, the example's own chain must stop.
    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "this example needs socat and jq" in done.stderr
    assert done.stdout == ""


def test_python_example(daemon: Daemon, tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text(readme_block("From Python", "python"))
    done = subprocess.run(
        ["python3", "hello.py"],
        env=as_the_readme_says(daemon),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == ["$ echo hello from $((6*7))", "hello from 42", "$"]
    assert "stdin_read" in done.stdout


def test_configuration_example(daemon: Daemon, tmp_path: Path) -> None:
    block = README.read_text().split("### Configuration", 1)[1]
    script = re.search(r"```sh\n(.*?)```", block, re.S)
    assert script
    done = run_sh(script.group(1), as_the_readme_says(daemon), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'shell_argv = ["/bin/bash", "-i"]'


def test_the_method_table_lists_every_method(rpc: Rpc) -> None:
    table = README.read_text().split("| method | what it does |", 1)[1].split("\n\n", 1)[0]
    methods = [m["name"] for m in rpc.call("rpc.discover")["methods"]]
    missing = [name for name in methods if f"`{name}" not in table]
    assert not missing, f"README's method table lacks {missing}"
