"""Every bound and default of the daemon, in one place, each with the reason for its value.

A TOML file (``--config``, default ``$XDG_CONFIG_HOME/ptyd/config.toml``) may override any field; unknown keys
are an error so that a typo is never silently ignored. SIGHUP re-reads the file.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

PositiveMs = Annotated[int, Meta(ge=1, le=86_400_000)]
Size = Annotated[int, Meta(ge=1)]
ProfileName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class SandboxProfile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a session's programs may reach (docs/sandbox.md). Each field defaults to its loosest value."""

    # "full": no filesystem sandbox; "workspace": everything read-only but the session's cwd, ``writable`` and a
    # private /tmp; "readonly": everything read-only but ``writable`` and a private /tmp.
    filesystem: Literal["full", "workspace", "readonly"] = "full"
    # Absolute paths writable besides the workspace (caches such as ~/.cache/pip); ignored by "full".
    writable: tuple[Annotated[str, Meta(pattern=r"^/")], ...] = ()
    # Paths the session must not even read, replaced by empty ones ("~/.ssh", "~/.aws"); "~" is the daemon user's
    # home. Any filesystem mode but "full".
    hidden: tuple[Annotated[str, Meta(pattern=r"^[/~]")], ...] = ()
    # False: a network namespace of its own (only a loopback nothing outside listens on).
    network: bool = True
    # Per-session resource limits; None: unlimited. Enforced by cgroups (docs/sandbox.md says which).
    memory_mib: Annotated[int, Meta(ge=16)] | None = None
    pids_max: Annotated[int, Meta(ge=8)] | None = None
    cpu_percent: Annotated[int, Meta(ge=1, le=100_000)] | None = None  # 100: one whole CPU
    # True: a limit above that no cgroup hierarchy here can enforce refuses the session (sandbox_unavailable).
    # False (the built-in sandboxed profiles' default limits): such a limit is left out, and SessionInfo.limits
    # and daemon_info.limits say which ones hold.
    limits_required: bool = True
    # Limits of all the agent's sessions together, however many it opens; None: unlimited. Each session also keeps
    # its own limits above. Read from the agent's own profile (sandbox_agents, sandbox_default): a stricter profile
    # asked for at open brings its per-session limits, never other aggregate ones. Set when the agent's first
    # limited session opens, kept until its last is gone (docs/sandbox.md).
    agent_memory_mib: Annotated[int, Meta(ge=16)] | None = None
    agent_pids_max: Annotated[int, Meta(ge=8)] | None = None
    agent_cpu_percent: Annotated[int, Meta(ge=1, le=100_000)] | None = None

    @property
    def contained(self) -> bool:
        """Whether the session runs in a sandbox at all (a profile of limits only does not)."""
        return self.filesystem != "full" or not self.network


# The default limits of the built-in sandboxed profiles, enforced wherever a cgroup hierarchy can (elsewhere left
# out, and said): a fork bomb stops at 4,096 processes (threads count: a JVM or a parallel build stays far below),
# a memory hog at 8 GiB (a large link or test run fits; what it writes to its /tmp counts too). Profiles of the
# config set their own.
WORKSPACE_PIDS_MAX = 4096
WORKSPACE_MEMORY_MIB = 8192
_WORKSPACE_LIMITS = {"pids_max": WORKSPACE_PIDS_MAX, "memory_mib": WORKSPACE_MEMORY_MIB, "limits_required": False}

# sandbox_default's (and sandbox_agents') "auto": AUTO_SANDBOXED where a sandbox can be made, else "none", said.
AUTO_PROFILE = "auto"
AUTO_SANDBOXED = "workspace"

# The profiles every daemon has; config's sandbox_profiles adds others (it may not redefine these).
BUILTIN_PROFILES: dict[str, SandboxProfile] = {
    "none": SandboxProfile(),
    # Edit the project, install packages: the network stays, the rest of the machine is read-only.
    "workspace": SandboxProfile(filesystem="workspace", **_WORKSPACE_LIMITS),  # type: ignore[arg-type]
    "workspace-offline": SandboxProfile(filesystem="workspace", network=False, **_WORKSPACE_LIMITS),  # type: ignore[arg-type]
    # Look, never touch: nothing writable but a private /tmp, and no network.
    "readonly": SandboxProfile(filesystem="readonly", network=False, **_WORKSPACE_LIMITS),  # type: ignore[arg-type]
}


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # --- wire ---
    # One frame may carry a large paste; 4 MiB keeps a hostile line from costing more than that per connection.
    max_frame_bytes: Size = 4 * 1024 * 1024
    # A batch is dispatched concurrently; cap it so one frame cannot start thousands of tasks.
    max_batch: Size = 64
    # Requests in flight per connection before the daemon stops reading that connection (backpressure).
    max_inflight_per_connection: Size = 64
    # A client that does not read its responses is dropped once this much output is queued for it.
    max_connection_write_buffer: Size = 16 * 1024 * 1024
    # Open connections at once; one past it is closed unanswered, so a connection leak cannot exhaust fds.
    max_connections: Size = 1024
    # Pending connections the kernel queues before accept: a burst of clients must not see EAGAIN.
    listen_backlog: Size = 1024
    # Connections are the one thing a client gets without a token, so they are what a leaking or hostile process
    # would hoard (1,024 idle ones used to lock every client out, ptyctl included). One process (SO_PEERCRED's
    # pid) may hold this many at once: a quarter of max_connections, far more than any client needs.
    max_connections_per_peer: Size = 256
    # A connection that has made no call with a valid token this long after it opened is closed, and at
    # max_connections the oldest such one makes room for a newcomer. A client presents its token in its first
    # call; ten seconds covers a client that connects early on a loaded machine. ptyctl status needs no token.
    unauthenticated_connection_ms: PositiveMs = 10_000

    # --- agents and sessions ---
    # Registered agents at once (each holds a token and its sessions); registration past it is limit_exceeded.
    max_agents: Size = 1024
    # Live sessions across all agents: each is a process tree, a PTY and up to scrollback_bytes of memory.
    max_sessions: Size = 1024
    # Live sessions of one agent, so a runaway agent cannot take every slot from the others.
    max_sessions_per_agent: Size = 128
    # Abandoned agents are released after this long without a call, so their shells do not live forever.
    agent_idle_timeout_ms: PositiveMs = 24 * 3_600_000
    # Event subscriptions one connection may hold at once: every event is offered to every subscription, so a
    # client subscribing in a loop would make each event cost thousands; past it terminal_subscribe is
    # limit_exceeded. A client needs one per session it watches, or one for all of them.
    max_subscriptions_per_connection: Size = 256
    # Closed session ids an agent may close again as a no-op.
    closed_ids_remembered: Size = 1024
    # request_key values remembered per session for idempotent retries.
    request_keys_remembered: Size = 64
    # Input written to a session that its program has not read yet, held by the daemon (the kernel's own queue
    # holds ~4 KiB): two full frames. Past it a send is refused (limit_exceeded, reason "input_pending") and
    # answers to terminal queries are dropped (logged), so a program that prints queries and never reads, or
    # sends that time out one after another, cannot grow the daemon without end.
    max_pending_input_bytes: Size = 8 * 1024 * 1024

    # --- terminal ---
    # The terminal emulator: "ghostty" (libghostty-vt via pyghostty: native, ~100x faster, reflows on resize),
    # "pyte" (pure Python, the fallback), or "auto": ghostty wherever it imports (Linux x86_64 and aarch64).
    emulator: Literal["auto", "ghostty", "pyte"] = "auto"
    # Where the emulator runs: "worker" (engine worker processes: output that crashes the native engine costs a
    # worker, which is replaced, never the daemon; and the parse uses every core), or "daemon" (in the daemon's
    # own process: the reference the benchmarks compare against, and the fallback).
    engine_process: Literal["worker", "daemon"] = "worker"
    # Engine worker processes; 0: one per core (a worker renders on one core, the daemon reads on another).
    engine_workers: Annotated[int, Meta(ge=0, le=256)] = 0
    # A worker with output outstanding that sends back no frame at all for this long hangs (libghostty-vt can
    # spend seconds, even a minute, in one write): it is killed, and that is a crash (its sessions rebuilt, the
    # one whose output hangs it again moved to pyte). A worker acknowledges every 50 ms between pieces of at
    # most ~50 ms of pyte's work, so a legit batch stays far below it even on a loaded machine; every session on
    # that worker waits this long when one hangs it, twice for the stalling one. A worker kept off the cores by the
    # load (it waits on a run queue and runs little) is not hung: it is judged again after as long.
    engine_worker_stall_ms: Annotated[int, Meta(ge=100, le=600_000)] = 2000
    # A worker whose resident memory passes this many MiB is replaced between frames, its sessions rebuilt in a
    # new one (what a worker holds beyond its sessions' terminals is given back as sessions close, so this bounds
    # what nothing else does). A worker ~25 MiB idle; a session's terminal ~0.1-0.5 MiB. 0: no ceiling.
    engine_worker_rss_mb: Annotated[int, Meta(ge=0, le=1 << 20)] = 1024
    # Terminal size of terminal_open when the caller gives none: wide enough that tool output rarely wraps.
    default_cols: Annotated[int, Meta(ge=2, le=1000)] = 160
    # Rows of that default terminal: a screenful an agent can read in one viewport.
    default_rows: Annotated[int, Meta(ge=2, le=500)] = 40
    # Retained rendered scrollback per session: lines, and the memory they take (text at up to 4 bytes a
    # character plus each line's object); the oldest lines are dropped first.
    scrollback_lines: Size = 10_000
    scrollback_bytes: Size = 4 * 1024 * 1024
    # Raw output not yet rendered; above it the daemon stops reading the PTY until the renderer catches up,
    # so memory stays bounded whatever a program prints. The native engine renders 1 MiB in 10-40 ms, so only
    # floods paced against each other (or on pyte, ~1 s a MiB of non-plain output) ever reach it.
    max_render_backlog_bytes: Size = 1024 * 1024
    # An answer to a terminal query (cursor position, device attributes) is written once the program that asked
    # waits on the terminal for it, and dropped if it has not within this long or another program took the
    # terminal: a program that prints queries and never reads them (a binary dump) must not leave the answers in
    # the input of the shell after it, which would run them as commands. Askers wait at once, in microseconds.
    answer_hold_ms: PositiveMs = 2_000
    # Viewport bound of a send result when the caller gives none; the tail is kept, it matters most.
    default_max_bytes: Annotated[int, Meta(ge=256)] = 32 * 1024
    # What an agent's send gets when it names no bound or economy (a person at ptyctl gets the two above): about
    # 4,000 tokens, and compact output, which keeps a 20,000-line build log's one error line where a plain cut of
    # 32 KiB dropped it (docs/output-economy.md). A harness asks for more with max_bytes and compact=false.
    agent_max_bytes: Annotated[int, Meta(ge=256)] = 16 * 1024
    agent_compact: bool = True
    # Lines in one terminal_read page at most; a longer transcript is read in pages.
    max_read_lines: Size = 10_000
    # Bytes of text in one terminal_read page, so one answer stays a reasonable frame.
    max_read_bytes: Size = 1024 * 1024
    # A terminal_read page when the caller gives no bounds: the last screenfuls, small enough for a model's context.
    default_read_lines: Size = 200
    default_read_bytes: Size = 256 * 1024

    # --- readiness ---
    # A send returns after this long even if the program is still busy (wait_reason timeout; output is kept).
    default_timeout_ms: PositiveMs = 30_000
    # A send with no provable readiness returns after this long without output (wait_reason inferred_idle).
    default_idle_ms: PositiveMs = 3_000
    # Probe cadence after a write: fast at first (most programs answer within a millisecond), backing off
    # to the slowest interval so an idle wait costs little CPU.
    probe_min_interval_ms: Annotated[float, Meta(gt=0)] = 0.25
    probe_max_interval_ms: Annotated[float, Meta(gt=0)] = 50.0
    # terminal_open waits this long for the new program to be ready before returning its first screen.
    open_timeout_ms: PositiveMs = 10_000
    # Behind an opaque relay (ssh, docker exec) nothing local says whether the far side waits: a send settles once
    # the far side drew a prompt and stayed quiet this long. Long enough for a command's output to start over a
    # slow link, short enough that a prompt comes back well before default_idle_ms.
    relay_quiet_ms: PositiveMs = 300
    # Start interactive bash sessions with ptyd's prompt marks (exit_code, cwd, prompts through relays).
    shell_integration: bool = True

    # --- teardown ---
    # close: SIGHUP, wait, SIGTERM, wait, SIGKILL. Shells exit on SIGHUP at once; the waits only cost time for
    # programs that ignore it.
    close_hup_grace_ms: PositiveMs = 500
    close_term_grace_ms: PositiveMs = 1_500
    # Daemon shutdown waits this long for all closes before giving up on the rest.
    shutdown_grace_ms: PositiveMs = 10_000
    # At shutdown, after the sessions closed, requests still in flight get this long to send their answers
    # (a send settled by the close, say) before their connections are cut.
    shutdown_drain_ms: PositiveMs = 1_000
    # Without systemd's fd store, keep the PTY masters in a `ptyd keeper` process too, so that the sessions
    # outlive a crash of the daemon (SIGKILL, an OOM kill, a native crash) and the next one adopts them: ptyd
    # exists so that sessions outlive what is around them. Off, a crash in the foreground ends every session.
    fd_keeper: bool = True
    # How long the keeper waits for a next daemon before it lets the sessions go (they get their hangup).
    fd_keeper_grace_ms: PositiveMs = 60_000

    # --- recordings ---
    # Agent names whose sessions are recorded from their start (asciicast v2); "*" records every agent's. A
    # terminal_open's `record` overrides it either way, and terminal_record starts or stops one on a live session.
    record_agents: tuple[str, ...] = ()
    # Where recordings go; empty: $XDG_STATE_HOME/ptyd/recordings (~/.local/state/ptyd/recordings).
    recording_dir: str = ""
    # A recording's part is closed past this size and the next one started (each part plays on its own), so
    # one flood cannot grow a file without bound...
    recording_max_file_bytes: Annotated[int, Meta(ge=4096)] = 16 * 1024 * 1024
    # ...and the oldest parts past this many per session are deleted: a session keeps at most their product.
    recording_files_kept: Size = 4
    # Events queued for the writer thread at most (bytes, all sessions together). Past it events are dropped and
    # a marker says so: the event loop never waits for a disk, and a flood cannot grow the daemon's memory.
    recording_queue_bytes: Annotated[int, Meta(ge=65536)] = 32 * 1024 * 1024

    # --- screenshots (terminal_screenshot, `ptyctl screenshot`, GIF export; the extra ptyd[screenshot]) ---
    # TrueType fonts tried in order for the cells before the one ptyd ships, DejaVu Sans Mono (Latin, Greek,
    # Cyrillic, box drawing, block elements), which is drawn with when none is named (the default: a screenshot
    # looks the same on every machine); the first that exists is drawn with, its "-Bold" sibling for bold.
    screenshot_fonts: tuple[str, ...] = ()
    # Fonts for the characters the font above lacks, tried in order: GNU Unifont (Debian: fonts-unifont) has every
    # character of the BMP, CJK among them, and its "upper" file the emoji, in one colour.
    screenshot_fallback_fonts: tuple[str, ...] = (
        "/usr/share/fonts/opentype/unifont/unifont.otf",
        "/usr/share/fonts/opentype/unifont/unifont_upper.otf",
        "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
    )
    # Pixels per em: 14 makes an 80x24 screen about 680x410, legible in a PR and small in a model's context.
    screenshot_font_size: Annotated[int, Meta(ge=6, le=64)] = 14
    # A recording exported as an animated GIF (`ptyctl replay ID --gif FILE`): a frame at most this often (10 per
    # second: typing and progress bars read as motion, and the file stays small)...
    gif_frame_ms: Annotated[int, Meta(ge=20, le=10_000)] = 100
    # ...pauses cut to this (a recording of an agent is mostly waiting), the last screen held this long...
    gif_idle_limit_ms: Annotated[int, Meta(ge=20)] = 2_000
    gif_end_hold_ms: Annotated[int, Meta(ge=20)] = 3_000
    # ...and frames at most (each is kept until the file is written, ~0.3 MB at 80x24): a longer recording ends
    # early, and says so.
    gif_max_frames: Annotated[int, Meta(ge=2, le=100_000)] = 1_200

    # --- processes ---
    # "auto" uses a cgroup v2 leaf per session when the hierarchy is writable, else a subreaper and a marker;
    # "cgroup" refuses to start without one. A typo ("cgroups") is an error, not a quiet subreaper.
    containment: Literal["auto", "cgroup", "subreaper"] = "auto"
    # The `shell` type's program. Without the user's startup files, so prompts, aliases and traps are the same
    # for every agent; ["/bin/bash", "-i"] reads ~/.bashrc.
    shell_argv: tuple[str, ...] = ("/bin/bash", "--noprofile", "--norc", "-i")
    # TERM of every session: what the emulator understands, and what programs expect of a modern terminal.
    term: str = "xterm-256color"

    # --- sandbox ---
    # The profile of an agent the mapping below does not name. "auto": "workspace" where bubblewrap can make a
    # sandbox, else "none", said at start (a warning), in daemon_info (sandbox_warning), in every such open's
    # result (sandbox_note) and by ptyctl status, never silently; an agent's open re-probes while none is found.
    # A profile's name ("workspace") is that profile or a refusal (sandbox_unavailable); "none": no sandbox
    # (the default before protocol 6). The operator's sessions (ptyctl) follow sandbox_operator, not this.
    sandbox_default: ProfileName = "auto"
    # The profile of the operator's sessions (ptyctl, the operator token): "none", you at a terminal, unless you
    # want your own sessions sandboxed too ("auto" as above). Like an agent, the operator may then ask an open for
    # a stricter profile, never a looser one.
    sandbox_operator: ProfileName = "none"
    # Agent name -> profile (the name given to agent_register, e.g. ptyd-mcp's --agent); "auto" as above.
    sandbox_agents: dict[Annotated[str, Meta(max_length=128)], ProfileName] = {}
    # Operator-defined profiles, besides the built-in none, workspace, workspace-offline and readonly.
    sandbox_profiles: dict[ProfileName, SandboxProfile] = {}
    # How a sandbox is made: "auto" (bubblewrap, the only one so far) or "bwrap"; a session that needs one and
    # cannot get it is refused (sandbox_unavailable), never started unsandboxed (sandbox_default "auto" resolves
    # to "none" there before the open, and says so).
    sandbox: Literal["auto", "bwrap"] = "auto"
    # The bubblewrap program (looked up on PATH).
    bwrap_program: str = "bwrap"
    # Where a sandboxed session may write (docs/sandbox.md): its cwd, only if the cwd lies under one of these roots
    # ("~" is the daemon user's home). The operator grants them, not the agent: an agent that names any other cwd
    # (or none: ptyd-mcp passes none) works there read-only and writes only its scratch directory. Empty: every
    # sandboxed session writes only its scratch directory. Never granted whatever the roots: the home directory or
    # one holding it, a dot-directory of the home (~/.config, ~/.ssh, ~/.local), ptyd's own directories, another
    # agent's workspace (refused: workspace_refused).
    sandbox_roots: tuple[Annotated[str, Meta(pattern=r"^[/~]")], ...] = ()
    # Agent name -> its roots, in place of sandbox_roots (an agent with a registration key: only once it proves it).
    sandbox_agent_roots: dict[
        Annotated[str, Meta(max_length=128)], tuple[Annotated[str, Meta(pattern=r"^[/~]")], ...]
    ] = {}
    # The network of a sandboxed session whose profile has one: "pasta" gives each its own namespace with outbound
    # access through pasta (Debian's passt), the machine's loopback ports and abstract Unix sockets out of reach
    # (X11's, a dev database's, ptyd-mcp's --http-port); refused (sandbox_unavailable) where pasta cannot. "host"
    # shares the machine's network namespace, all of that reachable. "auto": "pasta" where it works, else "host",
    # said at start (a warning), in daemon_info (sandbox_warning) and in each such open's sandbox_note.
    sandbox_network: Literal["auto", "host", "pasta"] = "auto"
    # Namespaces made ahead (pasta connected), so that an open takes one rather than waiting ~50 ms for pasta;
    # each costs a sleeping holder and a pasta (~2 MiB). Only with cgroup containment (docs/sandbox.md). 0: none.
    sandbox_network_spares: Annotated[int, Meta(ge=0, le=16)] = 2
    # The pasta program (looked up on PATH).
    pasta_program: str = "pasta"
    # The size of a sandbox's private /tmp: a tmpfs, in memory, that is otherwise half the machine's RAM for each
    # session (a session's own memory limit, where it has one, also counts what it writes there).
    sandbox_tmp_mib: Annotated[int, Meta(ge=1, le=1_048_576)] = 1024
    # Agent name -> the SHA-256 of its registration key ("sha256:HEX"; `ptyd agent-key NAME` makes a key and
    # prints the line). A profile (sandbox_agents) looser than sandbox_default, and roots (sandbox_agent_roots)
    # beyond sandbox_roots, are given only to an agent that proves its name: a name listed here by giving its key
    # to agent_register, a name not listed never. A registration under a listed name without its key is anonymous
    # (the defaults; its sessions, caps and aggregate limits its own, not the named agent's). Digests only: the
    # config file is readable inside sandboxes.
    agent_keys: dict[Annotated[str, Meta(max_length=128)], Annotated[str, Meta(pattern=r"^sha256:[0-9a-f]{64}$")]] = {}
    # The workspaces one agent (identity) may have used since the daemon started: each stays hidden, by a mount,
    # from every other agent's sandbox, so their number bounds the daemon's memory and every sandbox's mounts.
    # Past it, an open that would add one is refused (limit_exceeded); those it used already stay open to it.
    sandbox_workspaces_per_agent: Size = 256
    # Each agent's scratch directory is made under this one (0700, kept across restarts so its work is there the
    # next time; hidden from every other agent's sessions). Empty: $XDG_DATA_HOME/ptyd/workspaces
    # (~/.local/share/ptyd/workspaces).
    sandbox_scratch_dir: str = ""

    def __post_init__(self) -> None:
        if redefined := sorted(self.sandbox_profiles.keys() & {*BUILTIN_PROFILES, AUTO_PROFILE}):
            raise ValueError(f"sandbox_profiles may not redefine the built-in {', '.join(redefined)}")
        known = {**self.profiles(), AUTO_PROFILE: None}
        agents = [(f"sandbox_agents.{agent}", name) for agent, name in self.sandbox_agents.items()]
        defaults = [("sandbox_default", self.sandbox_default), ("sandbox_operator", self.sandbox_operator)]
        for where, name in [*defaults, *agents]:
            if name not in known:
                raise ValueError(f"{where}: unknown sandbox profile {name!r} (known: {', '.join(sorted(known))})")

    def profiles(self) -> dict[str, SandboxProfile]:
        return {**BUILTIN_PROFILES, **self.sandbox_profiles}


AGENT_PROFILE_ENV: dict[str, str] = {
    # Keep tools from paging or opening editors: an agent cannot drive a pager it does not know it is in.
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "",
    "LESS": "-FRX",
    "GIT_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_MERGE_AUTOEDIT": "no",
    "DEBIAN_FRONTEND": "noninteractive",
    "PIP_NO_INPUT": "1",
    "NPM_CONFIG_YES": "true",
}


OPERATOR_TOKEN_FILE = "operator.token"  # noqa: S105 - a file name, not a secret; it lives beside the socket


def default_socket_path() -> Path:
    """``$PTYD_SOCKET``, else ``$XDG_RUNTIME_DIR/ptyd/ptyd.sock``, else ``/tmp/ptyd-$UID/ptyd.sock``."""
    if os.environ.get("PTYD_SOCKET"):
        return Path(os.environ["PTYD_SOCKET"])
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "ptyd" / "ptyd.sock"
    return Path(f"/tmp/ptyd-{os.getuid()}") / "ptyd.sock"


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ptyd" / "config.toml"


class ConfigError(Exception):
    """The config file exists but cannot be used; the message says why."""


def load_config(path: Path | None, *, required: bool = False) -> Config:
    """Read the TOML file at ``path`` (or the default path); a missing optional file gives the defaults."""
    target = path or default_config_path()
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        if required:
            raise ConfigError(f"config file {target} does not exist") from None
        return Config()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {target}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode())
        if isinstance(data.get("ptyd"), dict):
            # The keys may also sit in a [ptyd] table; one key given both ways is ambiguous.
            table = data.pop("ptyd")
            if both := sorted(table.keys() & data.keys()):
                raise ConfigError(f"config file {target}: {', '.join(both)} given both at the top and in [ptyd]")
            data.update(table)
        return msgspec.convert(data, Config)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, msgspec.ValidationError) as exc:
        raise ConfigError(f"config file {target}: {exc}") from None
