"""Answers to a program's terminal queries go to that program, never to what is in front after it.

A raw-mode binary dump full of queries (device attributes, cursor position, status) that exits at once used to
leave the answers, rendered after it had gone, in the shell's input: ``bash: 22cecho: command not found``.
"""

from __future__ import annotations

import pytest

from conftest import Daemon, Shell

pytestmark = pytest.mark.usefixtures("unharmed")

# Raw mode, every query the emulator answers, many times, then gone without reading one answer.
DUMP = (
    "import sys, tty; tty.setraw(0); "
    "sys.stdout.write(chr(27) + '[c' + chr(27) + '[6n' + chr(27) + '[5n' + chr(27) + '[>c' + 'x' * 200); "
    "sys.stdout.write((chr(27) + '[c' + chr(27) + '[6n') * 3000); sys.stdout.flush()"
)


@pytest.mark.parametrize("attempt", range(3))
def test_a_dump_of_queries_leaves_the_next_command_intact(module_daemon: Daemon, attempt: int) -> None:
    with module_daemon.rpc() as rpc:
        shell = Shell(rpc, rpc.call("agent_register", name=f"dump-{attempt}")["token"], env={"PS1": "$ "})
        shell.send(f'python3 -c "{DUMP}"; stty sane\n', idle_ms=1_000)
        result = shell.send("echo intact\n")
        assert result["viewport"].splitlines()[-2:] == ["intact", "$"], result["viewport"]
        assert "command not found" not in "\n".join(shell.transcript())
        shell.close()
