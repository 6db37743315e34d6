"""The shells a scenario drives, one per way of knowing that a command is done.

- :class:`PtydShell`: a ptyd session; ``terminal_send`` returns when the kernel says the program reads the tty.
- :class:`RawShell`: the floor. bash on a PTY this process owns, read until the prompt (whose text it knows,
  command number included) reappears; nothing but the kernel in between.
- :class:`TmuxShell`: how tmux-based harnesses do it (a private server): ``send-keys``, then ``capture-pane`` every
  ``TMUX_POLL_S`` until the last non-empty line is a new prompt (or the expected text).
- :class:`FixedWaitShell`: how idle-timeout harnesses do it: the raw PTY, returning after ``IDLE_S`` of silence.

Every shell runs the same bash (``--noprofile --norc -i``) with the same prompt at the same size, 160x40.
``run(command, expect)`` types ``command`` plus Enter and returns when it is done, ``expect`` being the text
the program ends its output with when it is not the shell's next prompt (a program's own prompt).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any, Protocol, final

from bench.client import Caller
from bench.harness import shell_env

COLS, ROWS = 160, 40
SHELL_ARGV = ("/bin/bash", "--noprofile", "--norc", "-i")
IDLE_S = 0.5  # what fixed-wait harnesses use
TMUX_POLL_S = 0.01  # a fast harness; common ones poll every 100-500 ms
TAIL_BYTES = 16384
_RAW_PROMPT = re.compile(rb"\[(\d+)\]bench\$ $")
_PANE_PROMPT = re.compile(r"^\[(\d+)\]bench\$$")


class Done(Exception):
    """The shell did not become ready within the deadline (reported as a failure, never hidden)."""


class BenchShell(Protocol):
    name: str

    def run(self, command: str, expect: str | None = None, timeout: float = 120.0) -> str: ...

    def close(self) -> None: ...


@final
class PtydShell:
    name = "ptyd"

    def __init__(self, caller: Caller, token: str, env: dict[str, str] | None = None, **open_params: Any) -> None:
        self.caller = caller
        self.token = token
        opened = caller.call(
            "terminal_open", token=token, env=shell_env(**(env or {})), cols=COLS, rows=ROWS, **open_params
        )
        self.id: str = opened["session_id"]
        self.pid: int = opened["pid"]
        self.last: dict[str, Any] = {}

    def send(self, text: str, timeout: float = 120.0, **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.caller.call(
            "terminal_send", token=self.token, session_id=self.id, input=text, timeout_ms=int(timeout * 1000), **params
        )
        return result

    def run(self, command: str, expect: str | None = None, timeout: float = 120.0) -> str:
        self.last = self.send(command + "\n", timeout)
        if self.last["wait_reason"] != "stdin_read":
            raise Done(f"ptyd settled with {self.last['wait_reason']} on {command!r}")
        return str(self.last["viewport"])

    def call(self, method: str, **params: Any) -> Any:
        return self.caller.call(method, token=self.token, session_id=self.id, **params)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("terminal_close")


class RawShell:
    """bash on a PTY of this process; the same work with no daemon, no socket and no emulator."""

    name = "raw"

    def __init__(self, env: dict[str, str] | None = None) -> None:
        environ = {**os.environ, "TERM": "xterm-256color", **shell_env(**(env or {}))}
        pid, fd = os.forkpty()
        if pid == 0:  # child: only exec, no Python machinery between fork and exec
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
                os.execve(SHELL_ARGV[0], list(SHELL_ARGV), environ)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.prompt_number = 0
        self.received = 0  # bytes read by the last run
        self.tail = b""
        self._wait_prompt(time.monotonic() + 20)

    def write(self, data: bytes) -> None:
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def _read(self, timeout: float) -> bytes:
        readable, _, _ = select.select([self.fd], [], [], max(timeout, 0.0))
        if not readable:
            return b""
        try:
            return os.read(self.fd, 65536)
        except OSError as exc:
            raise Done("the raw shell's PTY closed") from exc

    def _wait_prompt(self, deadline: float, expect: bytes | None = None) -> None:
        tail = b""
        received = 0
        while True:
            data = self._read(deadline - time.monotonic())
            if not data:
                if time.monotonic() >= deadline:
                    raise Done(f"raw shell: no prompt by the deadline; tail {tail[-200:]!r}")
                continue
            received += len(data)
            tail = (tail + data)[-TAIL_BYTES:]
            if expect is not None:
                if tail.endswith(expect):
                    break
                continue
            match = _RAW_PROMPT.search(tail[-64:])
            if match and int(match.group(1)) > self.prompt_number:
                self.prompt_number = int(match.group(1))
                break
        self.received, self.tail = received, tail

    def run(self, command: str, expect: str | None = None, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        self.write(command.encode() + b"\n")
        self._wait_prompt(deadline, expect.encode() if expect is not None else None)
        return self.tail.decode(errors="replace")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


@final
class FixedWaitShell(RawShell):
    name = "fixed_wait"

    def run(self, command: str, expect: str | None = None, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        self.write(command.encode() + b"\n")
        tail = b""
        while time.monotonic() < deadline:
            data = self._read(IDLE_S)
            if not data:
                self.tail = tail
                return tail.decode(errors="replace")
            tail = (tail + data)[-TAIL_BYTES:]
        raise Done("fixed wait: output never went quiet")


@final
class TmuxShell:
    name = "tmux"

    def __init__(self, directory: Path, env: dict[str, str] | None = None) -> None:
        # A socket of its own in the run's private directory (not -L in the shared /tmp/tmux-UID): never the
        # user's server, and nothing left behind (tmux 3.3 does not remove its socket on kill-server).
        self.socket = directory / f"tmux-{os.getpid()}-{id(self)}.sock"
        conf = directory / "tmux.conf"
        conf.write_text("set -g status off\nset -g history-limit 10000\n")
        variables = [arg for k, v in shell_env(**(env or {})).items() for arg in ("-e", f"{k}={v}")]
        self._tmux(
            "-f", str(conf), "new-session", "-d", "-s", "bench", "-x", str(COLS), "-y", str(ROWS), *variables,
            *SHELL_ARGV,
        )  # fmt: skip
        self.prompt_number = 0
        self._wait(time.monotonic() + 20, None)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise Done(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def capture(self, history: int = 0) -> list[str]:
        args = ["capture-pane", "-p", "-t", "bench"] + (["-S", str(-history)] if history else [])
        lines = self._tmux(*args).split("\n")
        while lines and not lines[-1].strip():
            lines.pop()
        return lines

    def _wait(self, deadline: float, expect: str | None) -> list[str]:
        while True:
            lines = self.capture()
            last = lines[-1] if lines else ""
            if expect is not None:
                if last.endswith(expect.rstrip()):
                    return lines
            else:
                match = _PANE_PROMPT.match(last)
                if match and int(match.group(1)) > self.prompt_number:
                    self.prompt_number = int(match.group(1))
                    return lines
            if time.monotonic() >= deadline:
                raise Done(f"tmux: no prompt by the deadline; last line {last!r}")
            time.sleep(TMUX_POLL_S)

    def run(self, command: str, expect: str | None = None, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        # One client call, as harnesses do (a word that is no key name is typed as text).
        self._tmux("send-keys", "-t", "bench", *([command] if command else []), "Enter")
        return "\n".join(self._wait(deadline, expect))

    def spawn(self, command: str) -> None:
        """A window of this server running ``command``, beside the one ``run`` types into (load for scale)."""
        self._tmux("new-window", "-d", "-t", "bench", command)

    def close(self) -> None:
        with contextlib.suppress(Done):
            self._tmux("kill-server")
        self.socket.unlink(missing_ok=True)
