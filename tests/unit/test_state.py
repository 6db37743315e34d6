"""A session's state round trip, in-process: LocalSession -> SessionState -> the versioned document (bytes) ->
a LocalSession the next daemon would build on the same PTY. What the session says about itself survives."""

from __future__ import annotations

import asyncio

import msgspec

from ptyd import protocol as p
from ptyd.backends.base import SendRequest
from ptyd.backends.session.local import LocalBackend
from ptyd.backends.session.session import LocalSession
from ptyd.continuity.document import DaemonState, decode, encode

from .conftest import TOKEN, local_service, run, send_params

FOLLOW = SendRequest(input="", timeout_s=1.0, idle_s=1.0, max_bytes=4096, request_key=None)


def test_a_session_survives_its_state_document() -> None:
    async def main() -> dict[str, object]:
        async with local_service(shell_integration=True) as service:
            agent, _ = service.register("t")
            opened = await service.open(
                agent, p.TerminalOpenParams(token=TOKEN, name="build", env={"PS1": "$ "}, idle_ms=3_000)
            )
            assert isinstance(opened, LocalSession)
            sid = opened.session_id
            await service.send(agent, send_params(sid, "cd /tmp; echo one\n")).result()
            keyed = await service.send(agent, send_params(sid, "false\n", request_key="k-1")).result()
            before = opened.to_state(agent.agent_id, "saved")
            transcript = (await opened.read(0, 1000, 1 << 20)).lines
            screen = await opened.screen()

            state = opened.to_state(agent.agent_id, "handover")  # holds the channel, as before an exec
            document = encode(DaemonState(daemon_pid=0, sessions={sid: state}))
            back = decode(document).sessions[sid]
            backend = service.backends["shell"]
            assert isinstance(backend, LocalBackend)
            restored = backend.adopt(back, back.master_fd, back.slave_fd, child=True)
            service.entry(agent, sid).session = restored  # the next daemon's session, on the same PTY

            after = restored.to_state(agent.agent_id, "saved")
            seen: dict[str, object] = {
                "same_state": msgspec.structs.asdict(after) == msgspec.structs.asdict(before),
                "diff": {
                    k: (v, getattr(after, k))
                    for k, v in msgspec.structs.asdict(before).items()
                    if getattr(after, k) != v
                },
                "transcript": (await restored.read(0, 1000, 1 << 20)).lines == transcript,
                "screen": await restored.screen() == screen,
                "info": restored.info(agent.agent_id, agent.name) == opened.info(agent.agent_id, agent.name),
                "waited": (await restored.wait(0, FOLLOW, keyed.operation_id)).result == keyed,
                # A repeated request_key is answered with the original operation, not typed again.
                "replayed": await service.send(agent, send_params(sid, "false\n", request_key="k-1")).result() == keyed,
            }
            nxt = await service.send(agent, send_params(sid, "echo two\n")).result()
            seen["next"] = (nxt.wait_reason, nxt.cwd, nxt.exit_code, nxt.viewport.splitlines()[-2:])
            return seen

    seen = run(main)
    assert seen["diff"] == {}
    assert seen["same_state"] is True
    assert seen["transcript"] is True
    assert seen["screen"] is True
    assert seen["info"] is True
    assert seen["waited"] is True
    assert seen["replayed"] is True
    # The shell integration's state came along: the next send knows the cwd and the exit code.
    assert seen["next"] == ("stdin_read", "/tmp", 0, ["two", "$"])


def test_a_send_that_failed_is_not_handed_over_and_breaks_no_save() -> None:
    """A send whose result is an error (an internal one: an incident) has nothing to hand over; saving the session
    raised it, which ended the state saver and so the daemon's crash continuity, and its shutdown with code 1."""

    async def main() -> tuple[bool, object]:
        async with local_service() as service:
            agent, _ = service.register("t")
            opened = await service.open(agent, p.TerminalOpenParams(token=TOKEN, env={"PS1": "$ "}))
            assert isinstance(opened, LocalSession)
            await service.send(agent, send_params(opened.session_id, "true\n")).result()
            last = opened.sends.last_op
            assert last is not None
            assert last.settled
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(RuntimeError("an incident"))
            last.future = failed
            return last.settled, opened.to_state(agent.agent_id, "saved").last

    settled, last = run(main)
    assert not settled
    assert last is None
