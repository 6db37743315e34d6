"""A real OpenSSH server on a loopback port, for tests that reach ptyd the way another machine would.

``sshd`` (session-scoped) starts ``/usr/sbin/sshd -D -e`` as the current user on 127.0.0.1 with a fresh host key
and client key in a private directory, and writes an ssh client config in which the alias ``testhost`` reaches
it with strict host-key checking and no prompts: ``ssh -F <sshd.client_config> testhost CMD``.

The session's environment: PATH starts with this interpreter's bin directory, so the ``ptyd`` installed beside
it is found the way a user's installed ``ptyd`` is (the user's shell startup files may still prepend to it);
``PTYD_*`` variables of the client are passed through (``SendEnv``/``AcceptEnv``), so a test can point the
remote side at its own daemon with ``PTYD_SOCKET``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
HOST_ALIAS = "testhost"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Sshd:
    """One running sshd and the client-side files that reach it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.host_key = directory / "ssh_host_ed25519_key"
        self.client_key = directory / "id_ed25519"
        self.server_config = directory / "sshd_config"
        self.client_config = directory / "ssh_config"
        self.known_hosts = directory / "known_hosts"
        self.log_path = directory / "sshd.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.session_env: dict[str, str] = {}  # more variables every ssh session gets (SetEnv)
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)], check=True)
        (directory / "authorized_keys").write_bytes(self.client_key.with_suffix(".pub").read_bytes())

    @property
    def ssh(self) -> list[str]:
        """The ssh command line that reaches ``testhost`` (append the host alias and a command)."""
        return ["ssh", "-F", str(self.client_config)]

    def run(self, *command: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*self.ssh, HOST_ALIAS, *command], **kwargs)  # type: ignore[call-overload,no-any-return]

    def _write_configs(self) -> None:
        bin_dir = Path(sys.executable).parent
        path = f"{bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        set_env = " ".join(f"{name}={value}" for name, value in {"PATH": path, **self.session_env}.items())
        root = os.getuid() == 0
        self.server_config.write_text(
            f"ListenAddress 127.0.0.1\nPort {self.port}\nHostKey {self.host_key}\n"
            f"AuthorizedKeysFile {self.directory}/authorized_keys\nStrictModes no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            # PAM only as root: it needs privileges, and without it sshd refuses an account whose password is
            # locked ("!"), which a CI container's root may have.
            f"UsePAM {'yes' if root else 'no'}\nPermitRootLogin prohibit-password\nPidFile none\n"
            f"AcceptEnv PTYD_*\nSetEnv {set_env}\nLogLevel VERBOSE\n"
        )
        self.known_hosts.write_text(
            f"[127.0.0.1]:{self.port} {self.host_key.with_suffix('.pub').read_text().strip()}\n"
        )
        self.client_config.write_text(
            f"Host {HOST_ALIAS}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
            f"  IdentityFile {self.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {self.known_hosts}\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n  SendEnv PTYD_*\n"
        )

    def start(self, attempts: int = 5) -> None:
        """Start sshd on a free port; ready once it logs that it listens (a lost port race is retried)."""
        if os.getuid() == 0:
            # The privilege-separation directory: created by the package's service unit, absent in a container.
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        for _ in range(attempts):
            self.port = _free_port()
            self._write_configs()
            log = open(self.log_path, "ab")  # noqa: SIM115 - sshd's stderr after startup goes here
            proc = subprocess.Popen(
                [str(SSHD), "-D", "-e", "-f", str(self.server_config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.PIPE,
            )
            log.close()
            assert proc.stderr is not None
            startup = b""
            for line in proc.stderr:
                startup += line
                if b"Server listening on" in line:
                    # From here on sshd logs to the file; the pipe is handed to a drain that never blocks it.
                    self.proc = proc
                    self._drain(proc)
                    return
            proc.wait()
            with open(self.log_path, "ab") as f:
                f.write(startup)
            if b"Address already in use" not in startup:
                raise RuntimeError(f"sshd did not start ({proc.returncode}):\n{startup.decode(errors='replace')}")
        raise RuntimeError(f"sshd found no free port in {attempts} attempts")

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        """Copy sshd's later log lines into the log file, so the pipe never fills and blocks sshd."""
        stderr = proc.stderr
        assert stderr is not None

        def copy() -> None:
            with stderr, open(self.log_path, "ab") as log:
                for line in stderr:
                    log.write(line)
                    log.flush()

        threading.Thread(target=copy, name="sshd-log", daemon=True).start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _missing() -> str | None:
    if not SSHD.exists():
        return f"{SSHD} is not installed (Debian: openssh-server; .ci/run installs it)"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: openssh-client; .ci/run installs it)"
    return None


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A loopback OpenSSH server; ``ssh -F sshd.client_config testhost CMD`` runs CMD as this user."""
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("sshd")
    directory.chmod(0o700)
    server = Sshd(directory)
    server.start()
    # The whole path (key exchange, auth, a session) must work before any test relies on it.
    done = server.run("true", capture_output=True, timeout=30)
    if done.returncode != 0:
        server.stop()
        raise AssertionError(f"ssh to the loopback sshd failed:\n{done.stderr.decode()}\n{server.log()}")
    yield server
    server.stop()


def try_it() -> int:
    """``make try-ssh``: a throwaway loopback sshd to try ``ptyctl --host ssh://`` with, until Ctrl-C."""
    import signal
    import tempfile

    reason = _missing()
    if reason is not None:
        print(f"try-ssh: {reason}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="ptyd-try-ssh-") as directory:
        os.chmod(directory, 0o700)
        server = Sshd(Path(directory))
        # The far side finds the same default socket as a `make run` started from this environment.
        server.session_env = {k: os.environ[k] for k in ("XDG_RUNTIME_DIR",) if k in os.environ}
        server.start()
        try:
            done = server.run("true", capture_output=True, timeout=30)
            if done.returncode != 0:
                print(f"try-ssh: ssh to the loopback sshd failed:\n{done.stderr.decode()}", file=sys.stderr)
                return 1
            print(f"An sshd for {server.user} listens on 127.0.0.1:{server.port} (keys in {directory}).")
            print("With `make run` in another terminal, try from a third one:\n")
            print(f'  export PTYD_SSH_COMMAND="ssh -F {server.client_config}"')
            print(f"  ptyctl --host ssh://{HOST_ALIAS} status\n")
            print("Ctrl-C stops the sshd and deletes its keys.", flush=True)
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            assert server.proc is not None
            server.proc.wait()
            print("try-ssh: sshd exited", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 0
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(try_it())
