"""A handover that fails after the listener stopped accepting, with anything but the exec's OSError (an engine's
dump, encoding the state): the daemon lets its sessions' channels go, accepts again, keeps its housekeeping, and
says so in the log and in daemon_info.

The daemon runs in the test's own process (its loop, its signal handlers), so the failure can be injected where
a real one happens: after the sessions were held for the exec.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import uvloop

from conftest import Rpc, wait_until
from ptyd.config import Config
from ptyd.continuity import handover
from ptyd.daemon import app as daemon_module


def test_a_handover_failing_after_the_sessions_were_held_serves_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path.chmod(0o700)
    socket_path = tmp_path / "ptyd.sock"

    async def no_preflight(*_: Any) -> None:
        return None

    def exec_fails(*_: Any) -> None:
        raise RuntimeError("the state could not be encoded")  # what msgspec or an engine's dump might raise

    monkeypatch.setattr(handover, "preflight", no_preflight)
    monkeypatch.setattr(handover, "exec_next", exec_fails)

    def client() -> dict[str, Any]:
        wait_until(socket_path.exists, message="the socket")
        with Rpc(socket_path, timeout=20) as rpc:
            token = rpc.call("agent_register", name="t")["token"]
            sid = rpc.call("terminal_open", token=token, argv=["/bin/sh"], env={"PS1": "$ "})["session_id"]
        os.kill(os.getpid(), signal.SIGUSR2)

        def failed() -> bool:
            try:
                with Rpc(socket_path, timeout=5) as rpc:
                    return rpc.call("daemon_info")["handover_error"] is not None
            except OSError:
                return False  # not accepting during the attempt

        wait_until(failed, timeout=20, message="the failed handover")
        with Rpc(socket_path, timeout=20) as rpc:  # accepted again, and the session's channel was let go
            result = rpc.call("terminal_send", token=token, session_id=sid, input="echo still here\n")
            info = rpc.call("daemon_info")
        os.kill(os.getpid(), signal.SIGTERM)
        return {"result": result, "info": info}

    async def main() -> tuple[int, dict[str, Any]]:
        served = asyncio.ensure_future(daemon_module.Daemon(Config(containment="subreaper"), None, socket_path).run())
        try:
            seen = await asyncio.to_thread(client)
        except BaseException:
            os.kill(os.getpid(), signal.SIGTERM)
            raise
        return await asyncio.wait_for(served, 30), seen

    with caplog.at_level(logging.INFO, logger="ptyd"), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        code, seen = runner.run(main())
    assert code == 0
    assert seen["result"]["wait_reason"] == "stdin_read"
    assert "still here" in seen["result"]["viewport"].splitlines()
    error = seen["info"]["handover_error"]
    assert error.startswith("internal error (incident ")
    incident = error.removeprefix("internal error (incident ").rstrip(")")
    logged = [r for r in caplog.records if f"incident {incident}: handover failed" in r.getMessage()]
    assert logged
    assert logged[0].exc_info is not None
