"""The method table: each RPC method's params type, result type and handler, binding the protocol to PtyService.

Handlers only authenticate and hand the typed params to the service, which builds requests and applies defaults.
Their documentation comes from the params Structs (``ptyd.protocol``), where the protocol docs and the OpenRPC
document read it.
"""

from __future__ import annotations

import inspect
from typing import Any

from ptyd import protocol as p
from ptyd.errors import InvalidArgument
from ptyd.rpc.dispatch import Method, notification
from ptyd.rpc.server import Peer
from ptyd.service.service import PtyService, env_profile

# Methods a client may send again when the connection dropped before their answer arrived: they read, or doing
# them twice is doing them once. Not terminal_send (a repeat types the input again, unless it carries the same
# request_key: the clients rely on that, see their retry code), terminal_output (it consumes: a lost answer lost
# its chunk), terminal_open/agent_register (they create), terminal_signal/terminal_cancel (they signal),
# terminal_integrate (it types), agent_release, and the subscriptions (they belong to the connection).
RETRY_SAFE = frozenset(
    {
        "agent_list",
        "daemon_info",
        "terminal_list",
        "terminal_status",
        "terminal_screen",
        "terminal_screenshot",
        "terminal_read",
        "terminal_wait",
        "terminal_resize",
        "terminal_close",
        "terminal_record",  # a start while recording, or a stop while not, changes nothing
        "terminal_recordings",
    }
)


class Api:
    def __init__(self, service: PtyService) -> None:
        self.service = service
        self._hooked: set[int] = set()  # connections whose close ends their subscriptions

    # --- agents ----------------------------------------------------------------------------------------

    async def agent_register(self, _: Any, params: p.AgentRegisterParams) -> p.AgentRegisterResult:
        agent, token = self.service.register(params.name, key=params.key)
        return p.AgentRegisterResult(agent_id=agent.agent_id, token=token, proven=agent.proven)

    async def agent_release(self, _: Any, params: p.AgentReleaseParams) -> p.AgentReleaseResult:
        caller = self.service.authenticate(params.token)
        agent = caller if params.agent_id is None else self.service.agent(caller, params.agent_id)
        return p.AgentReleaseResult(closed_sessions=await self.service.release(agent))

    async def agent_list(self, _: Any, params: p.AgentListParams) -> p.AgentListResult:
        return p.AgentListResult(agents=self.service.list_agents(self.service.authenticate(params.token)))

    # --- sessions --------------------------------------------------------------------------------------

    async def terminal_open(self, _: Any, params: p.TerminalOpenParams) -> p.TerminalOpenResult:
        agent = self.service.authenticate(params.token)
        session = await self.service.open(agent, params)
        info = session.info(agent.agent_id, agent.name)
        return p.TerminalOpenResult(
            session_id=info.session_id,
            name=info.name,
            type=info.type,
            pid=info.pid,
            motd=session.motd,
            status=info.status,
            cols=info.cols,
            rows=info.rows,
            wait_reason=session.open_wait_reason,
            alt_screen=info.alt_screen,
            foreground=info.foreground,
            sandbox=info.sandbox,
            sandbox_note=session.sandbox_note,
            env_profile=env_profile(agent, params),
        )

    async def terminal_send(self, _: Any, params: p.TerminalSendParams) -> p.SendResult | p.SendStarted:
        agent = self.service.authenticate(params.token)
        op = self.service.send(agent, params)
        if not params.wait:
            return p.SendStarted(operation_id=op.id)
        with agent.calling():  # a long send is not the agent's idleness
            return await op.result()

    async def terminal_output(self, _: Any, params: p.TerminalOutputParams) -> p.TerminalOutputResult:
        return await self.service.output(self.service.authenticate(params.token), params)

    async def terminal_wait(self, _: Any, params: p.TerminalWaitParams) -> p.TerminalWaitResult:
        return await self.service.wait(self.service.authenticate(params.token), params)

    async def terminal_cancel(self, _: Any, params: p.TerminalCancelParams) -> p.TerminalCancelResult:
        return self.service.cancel(self.service.authenticate(params.token), params)

    async def terminal_integrate(self, _: Any, params: p.TerminalIntegrateParams) -> p.SendResult:
        return await self.service.integrate(self.service.authenticate(params.token), params).result()

    async def terminal_subscribe(self, peer: Peer, params: p.TerminalSubscribeParams) -> p.TerminalSubscribeResult:
        agent = self.service.authenticate(params.token)
        connection = peer.connection
        if connection is None:
            raise InvalidArgument("events need a connection that stays open", reason="no_connection")

        def sink(event: p.TerminalEvent) -> None:
            connection.notify(notification("terminal_event", event))

        sub_id = self.service.subscribe(
            agent, params.session_id, params.output, sink, peer.connection_id, screen=params.screen
        )
        if peer.connection_id not in self._hooked:  # one hook per connection, however often it subscribes
            self._hooked.add(peer.connection_id)

            def end(connection_id: int = peer.connection_id) -> None:
                self._hooked.discard(connection_id)
                self.service.drop_connection(connection_id)

            connection.on_close(end)
        return p.TerminalSubscribeResult(subscription_id=sub_id)

    async def terminal_unsubscribe(self, _: Any, params: p.TerminalUnsubscribeParams) -> p.TerminalUnsubscribeResult:
        agent = self.service.authenticate(params.token)
        return p.TerminalUnsubscribeResult(unsubscribed=self.service.unsubscribe(agent, params.subscription_id))

    async def terminal_read(self, _: Any, params: p.TerminalReadParams) -> p.TerminalReadResult:
        return await self.service.read(self.service.authenticate(params.token), params)

    async def terminal_screen(self, _: Any, params: p.TerminalScreenParams) -> p.TerminalScreenResult:
        return await self.service.screen(self.service.authenticate(params.token), params)

    async def terminal_screenshot(self, _: Any, params: p.TerminalScreenshotParams) -> p.TerminalScreenshotResult:
        agent = self.service.authenticate(params.token)
        return await self.service.screenshot(agent, params)

    async def terminal_signal(self, _: Any, params: p.TerminalSignalParams) -> p.TerminalSignalResult:
        return self.service.signal(self.service.authenticate(params.token), params)

    async def terminal_resize(self, _: Any, params: p.TerminalResizeParams) -> p.SessionInfo:
        return self.service.resize(self.service.authenticate(params.token), params)

    async def terminal_status(self, _: Any, params: p.TerminalStatusParams) -> p.SessionInfo:
        agent = self.service.authenticate(params.token)
        return self.service.describe(agent, params.session_id)

    async def terminal_list(self, _: Any, params: p.TerminalListParams) -> p.TerminalListResult:
        agent = self.service.authenticate(params.token)
        return p.TerminalListResult(sessions=self.service.list(agent))

    async def terminal_close(self, _: Any, params: p.TerminalCloseParams) -> p.TerminalCloseResult:
        agent = self.service.authenticate(params.token)
        closed, killed = await self.service.close(agent, params.session_id, params.reason)
        return p.TerminalCloseResult(closed=closed, killed=killed)

    async def terminal_record(self, _: Any, params: p.TerminalRecordParams) -> p.TerminalRecordResult:
        return await self.service.record(self.service.authenticate(params.token), params)

    async def terminal_recordings(self, _: Any, params: p.TerminalRecordingsParams) -> p.TerminalRecordingsResult:
        return self.service.list_recordings(self.service.authenticate(params.token))

    async def daemon_info(self, _: Any, params: p.DaemonInfoParams) -> p.DaemonInfoResult:
        if params.token is not None:
            self.service.authenticate(params.token)
        return self.service.info()

    def methods(self) -> list[Method]:
        table: list[tuple[str, type[Any], Any, Any]] = [
            ("agent_register", p.AgentRegisterParams, p.AgentRegisterResult, self.agent_register),
            ("agent_release", p.AgentReleaseParams, p.AgentReleaseResult, self.agent_release),
            ("agent_list", p.AgentListParams, p.AgentListResult, self.agent_list),
            ("terminal_open", p.TerminalOpenParams, p.TerminalOpenResult, self.terminal_open),
            ("terminal_send", p.TerminalSendParams, p.SendResult | p.SendStarted, self.terminal_send),
            ("terminal_output", p.TerminalOutputParams, p.TerminalOutputResult, self.terminal_output),
            ("terminal_wait", p.TerminalWaitParams, p.TerminalWaitResult, self.terminal_wait),
            ("terminal_cancel", p.TerminalCancelParams, p.TerminalCancelResult, self.terminal_cancel),
            ("terminal_read", p.TerminalReadParams, p.TerminalReadResult, self.terminal_read),
            ("terminal_screen", p.TerminalScreenParams, p.TerminalScreenResult, self.terminal_screen),
            (
                "terminal_screenshot",
                p.TerminalScreenshotParams,
                p.TerminalScreenshotResult,
                self.terminal_screenshot,
            ),
            ("terminal_signal", p.TerminalSignalParams, p.TerminalSignalResult, self.terminal_signal),
            ("terminal_resize", p.TerminalResizeParams, p.SessionInfo, self.terminal_resize),
            ("terminal_status", p.TerminalStatusParams, p.SessionInfo, self.terminal_status),
            ("terminal_list", p.TerminalListParams, p.TerminalListResult, self.terminal_list),
            ("terminal_close", p.TerminalCloseParams, p.TerminalCloseResult, self.terminal_close),
            ("terminal_integrate", p.TerminalIntegrateParams, p.SendResult, self.terminal_integrate),
            ("terminal_subscribe", p.TerminalSubscribeParams, p.TerminalSubscribeResult, self.terminal_subscribe),
            (
                "terminal_unsubscribe",
                p.TerminalUnsubscribeParams,
                p.TerminalUnsubscribeResult,
                self.terminal_unsubscribe,
            ),
            ("terminal_record", p.TerminalRecordParams, p.TerminalRecordResult, self.terminal_record),
            (
                "terminal_recordings",
                p.TerminalRecordingsParams,
                p.TerminalRecordingsResult,
                self.terminal_recordings,
            ),
            ("daemon_info", p.DaemonInfoParams, p.DaemonInfoResult, self.daemon_info),
        ]
        return [
            Method(name, params, result, handler, inspect.cleandoc(params.__doc__ or ""), name in RETRY_SAFE)
            for name, params, result, handler in table
        ]
