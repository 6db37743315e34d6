"""The daemon's life: runtime directory, lock, socket, recovery after a crash, serving, reload, handover and
shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import hashlib
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

from ptyd import __version__
from ptyd import protocol as p
from ptyd.backends.os.containment import (
    Containment,
    ContainmentUnavailable,
    select_containment,
    set_subreaper,
)
from ptyd.backends.os.containment.reaper import ChildReaper
from ptyd.backends.os.pacing import FLOOD_ENDS
from ptyd.backends.os.sandbox import select_sandbox
from ptyd.backends.os.sandbox.bwrap import PACKAGE_DIR
from ptyd.backends.os.sandbox.limits import Limiter
from ptyd.backends.os.sandbox.netpool import NetworkPool, Programs
from ptyd.backends.os.sandbox.workspace import state_directories
from ptyd.backends.os.spawn import raise_fd_limit
from ptyd.backends.session import live_record
from ptyd.backends.session.local import Confinement, build_registry
from ptyd.config import (
    AUTO_PROFILE,
    OPERATOR_TOKEN_FILE,
    Config,
    ConfigError,
    default_config_path,
    default_socket_path,
    load_config,
)
from ptyd.continuity import adoption, handover
from ptyd.continuity.document import StateFile, remove_leftover_cgroups
from ptyd.continuity.keeper_link import Keeper
from ptyd.daemon import blocking, systemd
from ptyd.daemon.runtime import StartupError, acquire_lock, activated_path, bind_socket, prepare_runtime_dir
from ptyd.rpc.dispatch import Dispatcher
from ptyd.rpc.methods import Api
from ptyd.rpc.openrpc import discover_method
from ptyd.rpc.server import RpcServer
from ptyd.service.service import PtyService
from ptyd.terminal.engines import engine_name
from ptyd.terminal.workers.memory import give_back, rss_bytes
from ptyd.terminal.workers.pool import pool_info, shared_pool

log = logging.getLogger("ptyd")

MAINTENANCE_INTERVAL_S = 1.0
# A daemon's life, in this order (tests/test_handover.py::test_a_daemon_lives_its_phases_in_order): what a dead
# daemon left is killed before anything is built on its cgroups; the long-lived objects exist and are frozen out of
# the collector before any session does; the sessions a handover or a crash left are taken over before the socket is
# bound (where it is not inherited). "hand over" comes only on SIGUSR2, and returns to "serve" if the exec fails.
PHASES = ("recover", "build", "take over", "serve", "hand over", "stop")
# Closed sessions' memory is given back once closes pause this long, or after this many closes (issue 28: three
# rounds of 50 floods closed left the daemon 82 -> 121 -> 119 MiB; see give_back_memory).
GIVE_BACK_QUIET_S = 1.0
GIVE_BACK_CLOSES = 100


def write_operator_token(directory: Path, service: PtyService) -> None:
    """Mint the operator token (every agent's sessions, for ptyctl) into a 0600 file beside the socket.

    A new token each start: a stale file from a previous daemon never works against this one.
    """
    _, token = service.register("operator", operator=True)
    path = directory / OPERATOR_TOKEN_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)


class Daemon:
    def __init__(self, config: Config, config_path: Path | None, socket_path: Path | None) -> None:
        self.config = config
        self.config_path = config_path
        self._explicit_socket = socket_path
        self.socket_path = socket_path or default_socket_path()
        self._stop = asyncio.Event()
        self._stored: dict[str, int] = {}  # PTY masters systemd kept for a daemon that crashed, by session id
        self.phases: list[str] = []  # the phases entered so far (PHASES)

    def _phase(self, name: str) -> None:
        self.phases.append(name)
        log.debug("phase: %s", name)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        blocking.install(loop)
        handed = handover.received()
        if handed is not None:
            # The previous daemon exec'd this one: its lock, socket and sessions are ours already.
            listener = socket.socket(fileno=handed.listen_fd)
            self.socket_path = Path(listener.getsockname())
            sock: socket.socket | None = listener
            lock_fd, activated = handed.lock_fd, handed.socket_activated
        else:
            passed = systemd.activation()
            sock, self._stored = passed.listener, passed.stored
            activated = sock is not None
            if sock is not None:
                self.socket_path = activated_path(sock, self._explicit_socket)
            prepare_runtime_dir(self.socket_path.parent)
            lock_fd = acquire_lock(self.socket_path.parent)
        # Off the loop: starting a keeper polls for its socket for up to seconds, and taking the masters back waits
        # for its replies.
        keeper = await asyncio.to_thread(self._attach_keeper, handed is not None)
        try:
            return await self._serve(loop, sock, lock_fd, activated, handed, keeper)
        finally:
            with contextlib.suppress(OSError):
                os.close(lock_fd)

    def _attach_keeper(self, handed: bool) -> Keeper | None:
        """The fd keeper (``fd_keeper``, without systemd's fd store): connect or start it, and take back the masters
        it kept for a daemon that died. After a handover the daemon has its masters already."""
        if not self.config.fd_keeper or systemd.fd_store_enabled():
            return None
        directory, grace_ms = self.socket_path.parent, self.config.fd_keeper_grace_ms
        try:
            keeper = Keeper.attach(directory, grace_ms)
            taken = keeper.take()
        except OSError as exc:
            log.warning("no fd keeper, so a crash of this daemon ends its sessions until one runs: %s", exc)
            return Keeper.failed(directory, grace_ms, str(exc))
        if handed or self._stored:
            for fd in taken.values():
                os.close(fd)
        else:
            self._stored = taken
        return keeper

    async def _serve(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket | None,
        lock_fd: int,
        activated: bool,
        handed: handover.DaemonState | None,
        keeper: Keeper | None,
    ) -> int:
        directory = self.socket_path.parent
        self._phase("recover")
        containment, confinement, state_file, saved, crashed_fds = await self._recover(directory, handed)
        self._phase("build")
        reaper, records, service, saver, emulator = self._build(
            loop, directory, containment, confinement, state_file, keeper, handed=handed is not None
        )
        self._phase("take over")
        self._take_over(directory, service, handed, saved, crashed_fds, keeper, records)
        await service.sweep_scratch()  # unnamed agents' that a restart revoked
        self._phase("serve")
        if sock is None:  # bound once the dead daemon's leftovers are gone
            sock = bind_socket(self.socket_path, self.config.listen_backlog)
        inherited = handover.Inherited(sock.fileno(), lock_fd, activated)
        methods = Api(service).methods()
        methods.append(discover_method(methods, __version__))
        server = RpcServer(Dispatcher(methods, self.config.max_batch), self.config)
        # asyncio closes the socket it serves when it stops: it gets a duplicate, and the listening socket itself
        # stays open (and listening) across a handover.
        await server.start(socket.socket(fileno=os.dup(sock.fileno())))

        def reload() -> None:
            try:
                config = load_config(self.config_path)
            except ConfigError as exc:
                log.error("reload failed, keeping the running configuration: %s", exc)
                return
            self.config = config
            confinement.sandbox.reset(config.sandbox, config.bwrap_program)  # probed again: one installed since
            if confinement.networks is not None:
                confinement.networks.reset(config.sandbox_network_spares)
            service.reconfigure(config, build_registry(config, reaper, containment, confinement, records))
            server.reconfigure(config)
            _say_sandbox(service)
            log.info("configuration reloaded; %d live sessions untouched", service.session_count)

        maintenance = loop.create_task(self._maintain(service, reaper, saver))
        upgrading: set[asyncio.Task[None]] = set()

        async def hand_over() -> None:
            nonlocal maintenance
            argv = handover.next_argv()
            handover.pause_floods(service)
            try:
                sample = handover.snapshot(service, inherited, "saved")
                await handover.preflight(argv, handover.encode(sample), reaper)
            except handover.HandoverRefused as exc:
                handover.release(service)
                service.handover_error = str(exc)
                log.error("handover refused, still serving: %s", exc)
                return
            except BaseException:  # cancelled by a shutdown, or a bug: the sessions must not stay paused
                handover.release(service)
                raise
            self._phase("hand over")
            log.info("handing %d sessions over to %s", service.session_count, " ".join(argv))
            systemd.notify("RELOADING=1\nSTATUS=handing over")
            maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await maintenance
            server.stop_accepting()  # connections are left to the exec, which closes them: clients reconnect
            await handover.quiesce(service)  # engine workers render what was read and send their snapshots
            if confinement.networks is not None:  # spares are no session's: nothing would end them after the exec
                confinement.networks.close()
            try:
                state = handover.snapshot(service, inherited, "handover")  # from here on nothing may await
                handover.exec_next(argv, state, handover.kept_fds(state))
            except Exception as exc:  # the exec, or anything before it (an engine's dump, encoding the state)
                # Whatever failed, the daemon must not stay alive but deaf: every channel is let go, connections
                # are accepted again and the housekeeping resumes.
                if isinstance(exc, OSError):
                    service.handover_error = f"cannot exec {argv[0]}: {exc.strerror}"
                    log.error("handover failed, still serving: %s", service.handover_error)
                else:
                    incident = secrets.token_hex(4)
                    service.handover_error = f"internal error (incident {incident})"
                    log.exception("incident %s: handover failed, still serving", incident)
                handover.release(service)
                await server.start(socket.socket(fileno=os.dup(sock.fileno())))
                maintenance = loop.create_task(self._maintain(service, reaper, saver))
                self._phase("serve")
                systemd.notify("READY=1\nSTATUS=serving")

        def upgrade() -> None:
            if not upgrading:
                task = loop.create_task(hand_over(), name="handover")
                upgrading.add(task)
                task.add_done_callback(upgrading.discard)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, reload)
        loop.add_signal_handler(signal.SIGUSR2, upgrade)
        log.info(
            "ptyd %s serving %s (pid %d, containment %s, emulator %s)",
            __version__,
            self.socket_path,
            os.getpid(),
            containment.name,
            emulator,
        )
        systemd.notify(f"READY=1\nSTATUS=serving, {service.session_count} sessions\nMAINPID={os.getpid()}")
        try:
            await self._stop.wait()
        finally:
            self._phase("stop")
            # One way out, also when the wait itself is cancelled: no signal starts anything any more (a SIGUSR2
            # after SIGTERM would hand over sessions being closed, a SIGHUP swap the backends under the closes), and
            # a handover under way is cancelled and awaited.
            for sig in (signal.SIGHUP, signal.SIGUSR2):  # kept handled: their default action ends the process
                loop.add_signal_handler(sig, log.info, "ignoring %s: shutting down", sig.name)
            for task in list(upgrading):
                task.cancel()
            if upgrading:
                await asyncio.wait(upgrading)
            await self._shutdown(service, server, saver, maintenance)

        if keeper is not None:
            await keeper.bye()
        if confinement.networks is not None:
            confinement.networks.close()
        reaper.reap()
        reaper.close()
        containment.close()
        confinement.limiter.close()
        with contextlib.suppress(FileNotFoundError):
            (directory / OPERATOR_TOKEN_FILE).unlink()
        if not inherited.socket_activated:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        sock.close()
        log.info("stopped")
        return 0

    async def _recover(
        self, directory: Path, handed: handover.DaemonState | None
    ) -> tuple[Containment, Confinement, StateFile, handover.DaemonState, dict[str, tuple[int, int]]]:
        """Recover: the containment and confinement this machine allows, and, after a crash, what the dead daemon
        left killed (but the sessions kept for adoption) and its cgroups removed."""
        log.debug("fd limit %d", raise_fd_limit())
        if not set_subreaper():
            log.warning("could not become a child subreaper; orphaned session processes go to init")
        instance = hashlib.sha256(str(self.socket_path.resolve()).encode()).hexdigest()[:12]
        try:
            containment = select_containment(self.config.containment, instance)
        except ContainmentUnavailable as exc:
            raise StartupError(str(exc)) from None
        confinement = self._confinement(directory, instance, containment)
        state_file = StateFile(directory)
        saved = handover.DaemonState(daemon_pid=0)
        crashed_fds: dict[str, tuple[int, int]] = {}
        if handed is None:
            saved, crashed_fds = adoption.survivors(state_file.read() if self._stored else None, self._stored)
            keep = {s.cgroup for s in saved.sessions.values() if s.cgroup is not None}
            if state_file.recover(containment, keep=set(saved.sessions)):
                await asyncio.sleep(0.05)  # let the killed trees leave their cgroups before removing them
            remove_leftover_cgroups(containment, keep=keep)
            confinement.limiter.sweep(keep=set(saved.sessions))
        return containment, confinement, state_file, saved, crashed_fds

    def _build(
        self,
        loop: asyncio.AbstractEventLoop,
        directory: Path,
        containment: Containment,
        confinement: Confinement,
        state_file: StateFile,
        keeper: Keeper | None,
        *,
        handed: bool,
    ) -> tuple[ChildReaper, Path, PtyService, adoption.StateSaver, str]:
        """Build: the service and what it lives on (reaper, backends, state saver, engine workers), then frozen
        out of the collector before any session exists. ``handed``: a handover brought sessions, which wait
        unserved until this daemon serves."""
        reaper = ChildReaper(loop)
        records = live_record.records_directory(directory)
        service = PtyService(
            self.config,
            build_registry(self.config, reaper, containment, confinement, records),
            containment.name,
            sandbox_name=confinement.sandbox.describe,
            limits_name=confinement.limiter.describe(),
        )
        service.sandbox_unavailable = confinement.sandbox.unavailable
        service.network_warning = lambda: self._network_warning(confinement)
        service.sandbox_network = lambda: self._network_info(confinement)
        _say_sandbox(service)
        store = systemd.FdStore(set(self._stored)) if systemd.fd_store_enabled() else keeper
        saver = adoption.StateSaver(state_file, service, store, MAINTENANCE_INTERVAL_S)
        service.on_change = saver.changed
        if keeper is not None:  # a keeper that dies is started again and handed every master
            keeper.supervise(lambda: {sid: entry.session.master_fd for sid, entry in service.entries()})
        service.crash_continuity = self._continuity(keeper)
        # In-daemon, the native engine is imported now, not at the first open; with workers, only they load it.
        emulator = engine_name(self.config.emulator, load=self.config.engine_process == "daemon")
        if self.config.engine_process == "worker":
            # The workers' interpreters start beside the daemon's.
            pool = shared_pool(
                self.config.engine_workers, self.config.engine_worker_stall_ms, self.config.engine_worker_rss_mb
            )
            pool.reaped = reaper.exit_of  # a worker's end, when the reaper collected it before the pool looked
            pool.warm(handed=handed)
            service.engine_workers = engine_workers_info
        # What exists now (modules, classes, the engine's parsed C declarations: ~25,000 objects) lives as long as
        # the daemon: out of the collector's full passes, which otherwise scan it again and again while sessions
        # print (a pass took 20-70 ms on a busy 2-core machine, the worst send latencies beside floods). Frozen
        # before any session exists, so a closed session's garbage is never kept.
        gc.freeze()
        return reaper, records, service, saver, emulator

    def _take_over(
        self,
        directory: Path,
        service: PtyService,
        handed: handover.DaemonState | None,
        saved: handover.DaemonState,
        crashed_fds: dict[str, tuple[int, int]],
        keeper: Keeper | None,
        records: Path,
    ) -> None:
        """Take over: the sessions a handover brought, or those kept through a crash; the operator token."""
        if handed is not None:
            count = handover.take_over(handed, service, child=True)
            log.info(
                "took over %d sessions from ptyd pid %d (handover %d)", count, handed.daemon_pid, service.handovers
            )
        elif self._stored:
            count = handover.take_over(saved, service, child=False, fds=crashed_fds)
            held = len(self._stored)
            holder = "the fd keeper" if keeper is not None else "systemd"
            log.warning("adopted %d of the %d sessions %s kept for a daemon that died", count, held, holder)
        self._stored = {}
        live_record.sweep(records, keep={sid for sid, _ in service.entries()})
        service.on_change()
        if not any(agent.operator for agent in service.agents):
            write_operator_token(directory, service)

    async def _shutdown(
        self,
        service: PtyService,
        server: RpcServer,
        saver: adoption.StateSaver,
        maintenance: asyncio.Task[None],
    ) -> None:
        """Close the listener, close the sessions within ``shutdown_grace_ms`` (killing what is left), save the
        state, then let the requests in flight answer for ``shutdown_drain_ms`` and cancel the rest."""
        grace_us = (self.config.shutdown_grace_ms + 5_000) * 1000
        systemd.notify(f"STOPPING=1\nSTATUS=closing {service.session_count} sessions\nEXTEND_TIMEOUT_USEC={grace_us}")
        log.info("shutting down: closing %d sessions", service.session_count)
        maintenance.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await maintenance
        server.stop_accepting()
        try:
            await asyncio.wait_for(service.shutdown(), self.config.shutdown_grace_ms / 1000)
        except TimeoutError:
            log.error("sessions did not close within %d ms; killing what is left", self.config.shutdown_grace_ms)
            for _, entry in service.entries():  # systemd leaves them (KillMode=process, so a crash spares them)
                entry.session.kill_now()
        saver.tick()  # the closes' last write, if it was put off
        await saver.flush()
        await server.close(self.config.shutdown_drain_ms / 1000)

    def _continuity(self, keeper: Keeper | None) -> Callable[[], str | None]:
        """daemon_info's crash_continuity: what would keep the sessions' terminals if this daemon crashed now."""
        if systemd.fd_store_enabled():
            return lambda: "systemd"
        if keeper is not None:
            return keeper.describe
        reason = "none: fd_keeper = false" if not self.config.fd_keeper else "none: no fd store or keeper"
        return lambda: reason

    def _confinement(self, directory: Path, instance: str, containment: Containment) -> Confinement:
        """How sessions are sandboxed and limited here (bubblewrap is probed at the first sandboxed open)."""
        sandbox = select_sandbox(self.config.sandbox, self.config.bwrap_program)
        limiter = Limiter.detect(instance, containment.leaf_parent)
        private = [str(directory), *state_directories(self.config)]
        if os.environ.get("XDG_RUNTIME_DIR"):  # the user's bus, agent sockets, systemd --user: ways out
            private.append(os.environ["XDG_RUNTIME_DIR"])
        log.info("resource limits: %s", limiter.describe())
        config_dir = str((self.config_path or default_config_path()).resolve().parent)
        networks = NetworkPool(containment, self._network_programs, self.config.sandbox_network_spares)
        return Confinement(sandbox, limiter, tuple(private), (config_dir, PACKAGE_DIR), networks)

    def _network_warning(self, confinement: Confinement) -> str | None:
        """With sandbox_network "auto", why sandboxes with network get the machine's (None: they get their own)."""
        if self.config.sandbox_network != "auto" or confinement.networks is None:
            return None
        programs = confinement.networks.programs()
        if programs.bwrap is None:  # no sandbox at all: the sandbox's own warning says so
            return None
        why = programs.missing() or confinement.networks.failure
        if why is None:
            return None
        return f"sandboxed sessions share the machine's network (its loopback ports reachable): {why}; install passt"

    def _network_info(self, confinement: Confinement) -> p.SandboxNetworkInfo:
        pool = confinement.networks
        host = self.config.sandbox_network == "host" or self._network_warning(confinement) is not None
        counts = {"spares": pool.ready, "taken": pool.taken, "made_ahead": pool.made_ahead} if pool else {}
        return p.SandboxNetworkInfo(mode="host" if host else "pasta", **counts)

    def _network_programs(self) -> Programs:
        return Programs.find(self.config.bwrap_program, self.config.pasta_program)

    async def _maintain(self, service: PtyService, reaper: ChildReaper, saver: adoption.StateSaver) -> None:
        """Slow housekeeping: reap orphans handed to the subreaper, save the screens, release idle agents,
        report status."""
        next_sweep = 0.0
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            reaper.reap()
            saver.tick()
            now = asyncio.get_running_loop().time()
            if service.closed_since_trim and (
                now - service.last_close >= GIVE_BACK_QUIET_S or service.closed_since_trim >= GIVE_BACK_CLOSES
            ):
                closed, service.closed_since_trim = service.closed_since_trim, 0
                before = rss_bytes(os.getpid()) or 0
                give_back_memory()
                after = rss_bytes(os.getpid()) or 0
                log.info("gave back what %d closed sessions held: %d -> %d MiB", closed, before >> 20, after >> 20)
            elif (FLOOD_ENDS.count or saver.large_saved) and (
                time.monotonic() - max(FLOOD_ENDS.last, saver.large_saved) >= GIVE_BACK_QUIET_S
            ):
                # A trim costs ~15 ms with a fragmented heap, the loop's allocations waiting meanwhile: once floods
                # and large state saves pause, not after each.
                floods, FLOOD_ENDS.count, saver.large_saved = FLOOD_ENDS.count, 0, 0.0
                before = rss_bytes(os.getpid()) or 0
                give_back()  # a flood's objects are freed as it goes: no collector pass, only the allocator's
                after = rss_bytes(os.getpid()) or 0
                log.debug(
                    "gave back what %d floods and the state saves left free: %d -> %d MiB",
                    floods,
                    before >> 20,
                    after >> 20,
                )
            if now >= next_sweep:
                # Often enough that an idle agent outlives its timeout by at most a quarter of it.
                next_sweep = now + min(30.0, self.config.agent_idle_timeout_ms / 4000)
                await service.release_idle()
                systemd.notify(f"STATUS=serving, {service.session_count} sessions")


def _say_sandbox(service: PtyService) -> None:
    """With sandbox_default "auto", what agents' sessions get here (bubblewrap probed now): never silently none;
    with sandbox_network "auto", never silently the machine's network."""
    if (network := service.network_warning()) is not None:
        log.warning("sandbox: %s", network)
    if service.config.sandbox_default != AUTO_PROFILE:
        return
    default, warning = service.default_sandbox()
    if warning is not None:
        log.warning("sandbox: %s", warning)
    else:
        log.info("sandbox: agents' sessions run in %s (sandbox_default auto)", default)


def give_back_memory() -> None:
    """What closed sessions held, back to the system. Measured after rounds of 50 floods closed: ~26 MiB of
    their objects (scrollback lines, journals) sat in reference cycles that only the collector's full pass frees,
    which the frozen startup heap and its 25% rule make rare; ~11 MiB more stayed in glibc's arenas, free but not
    returned. A full pass here scans only what lives since startup (``gc.freeze``), between closes, not while
    sessions print."""
    gc.collect()
    give_back()


def engine_workers_info() -> p.EngineWorkersInfo | None:
    """daemon_info's engine_workers: the pool's record."""
    info = pool_info()
    return None if info is None else p.EngineWorkersInfo(**dataclasses.asdict(info))
