"""The README's examples run as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, Daemon


def readme_block(heading: str, language: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {heading}", 1)[1]
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"no {language} block under {heading!r}"
    return match.group(1)


@pytest.mark.skipif(not (shutil.which("socat") and shutil.which("jq")), reason="needs socat and jq")
def test_shell_session_example(daemon: Daemon) -> None:
    script = readme_block("A session from the shell", "sh")
    env = {**os.environ, "PTYD_SOCKET": str(daemon.socket)}
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["result"]
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[1] == "Linux"


def test_python_example(daemon: Daemon) -> None:
    import sys

    script = readme_block("From Python", "python")
    env = {**os.environ, "PTYD_SOCKET": str(daemon.socket)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=60, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == ["$ echo hello from $((6*7))", "hello from 42", "$"]
    assert "stdin_read" in proc.stdout
