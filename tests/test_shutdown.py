"""One way out: SIGTERM closes the listener, the sessions, lets the requests in flight answer, then stops, with a
clean log; signals during shutdown start nothing."""

from __future__ import annotations

import signal

from conftest import Daemon, Rpc, wait_until


def test_sigterm_with_clients_connected_logs_no_error(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    idle = fresh_daemon.rpc()  # a connection that sends nothing
    busy = fresh_daemon.rpc()
    token = busy.call("agent_register", name="t")["token"]
    opened = busy.call("terminal_open", token=token, argv=["/bin/sh"], env={"PS1": "$ "})
    started = busy.call("terminal_send", token=token, session_id=opened["session_id"], input="sleep 60\n", wait=False)
    waiting = busy.request("terminal_wait", {"token": token, "session_id": opened["session_id"], "timeout_ms": 60_000})
    wait_until(lambda: "sleep" in str(busy_status(fresh_daemon, token, opened["session_id"])), message="the sleep")
    assert fresh_daemon.stop(signal.SIGTERM) == 0
    # The wait in flight was answered (the close settled its send) before the connection ended.
    result = busy.response(waiting)
    assert result["operation_id"] == started["operation_id"]
    assert result["result"]["wait_reason"] == "session_exit"
    log = fresh_daemon.log()
    assert "ERROR" not in log, log
    assert "Traceback" not in log, log
    assert "stopped" in log
    idle.close()
    busy.close()


def busy_status(daemon: Daemon, token: str, session_id: str) -> object:
    with daemon.rpc() as rpc:
        return rpc.call("terminal_status", token=token, session_id=session_id)["foreground"]


def test_sigusr2_after_sigterm_starts_no_handover(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        token = rpc.call("agent_register", name="t")["token"]
        rpc.call("terminal_open", token=token, argv=["/bin/sh"])
    proc = fresh_daemon.proc
    assert proc is not None
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGUSR2)
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(30) == 0
    log = fresh_daemon.log()
    assert "handing" not in log, log
    assert "took over" not in log, log
    assert "Traceback" not in log, log
    assert log.count("serving") == 1, log  # no second daemon was exec'd


def test_a_connection_is_served_until_shutdown_and_refused_after(fresh_daemon: Daemon) -> None:
    fresh_daemon.start()
    with fresh_daemon.rpc() as rpc:
        assert rpc.call("daemon_info")["sessions"] == 0
    assert fresh_daemon.stop() == 0
    assert not fresh_daemon.socket.exists()
    try:
        Rpc(fresh_daemon.socket, timeout=1)
    except OSError:
        return
    raise AssertionError("the socket still accepts connections")
