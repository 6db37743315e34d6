"""ptyd-mcp's defaults and bounds, each once with its reason. Standard library only: the command line reads it
before the MCP SDK is loaded."""

from __future__ import annotations

DEFAULT_AGENT = "mcp"
PROFILES = ("ptyd", "codex")  # the tool sets --tools names (ptyd_mcp.tools, ptyd_mcp.codex)

# A viewport a model reads whole (~2k tokens), where the daemon's default (32 KiB) is sized for programs: the cut
# keeps the tail and the errors, and terminal_read has the rest. --max-bytes changes it.
DEFAULT_MAX_BYTES = 8 * 1024
# What a model reads: output economy and logical lines (see docs/output-economy.md); a model may turn either off.
# The tools' schemas declare these as the defaults (ptyd_mcp.tools), the daemon's own being false.
READ_DEFAULTS = {"join_wrapped": True}
SEND_DEFAULTS = {"compact": True, "join_wrapped": True}
WAIT_STEP_MS = 500  # one terminal_wait round: how often a long send reports progress
CANCEL_GRACE_S = 5.0  # bound of the terminal_cancel sent after an MCP cancellation

# --- the codex tool set: Codex's unified exec numbers (docs: /work/shared/research/codex-unified-exec.md) ---
CODEX_EXEC_YIELD_MS = 10_000  # exec_command waits this long for the command unless it ends (Codex's default)
CODEX_WRITE_YIELD_MS = 250  # write_stdin after a non-empty write (Codex's default)
CODEX_POLL_YIELD_MS = 5_000  # write_stdin with empty chars: a poll may wait longer (recent Codex)
CODEX_MIN_YIELD_MS = 250  # Codex clamps every wait to at least this
CODEX_MAX_YIELD_MS = 30_000  # ... and at most this, for exec_command and a write
CODEX_MAX_POLL_YIELD_MS = 300_000  # ... and this for an empty poll
CODEX_MAX_OUTPUT_TOKENS = 10_000  # the output budget when the model gives none (Codex's default)
CODEX_BYTES_PER_TOKEN = 4  # Codex's own estimate of a token, for the budget and "Original token count"
CODEX_SHELL = "/bin/bash"  # the shell a command runs in when the model names none (Codex's default)
CODEX_READ_PAGE_LINES = 10_000  # terminal_read page when collecting a call's output
CODEX_OUTPUT_MAX_BYTES = 1024 * 1024  # one call's output read whole, then the tail (Codex retains 1 MiB a session)
CODEX_SESSION_IDS = (1000, 100_000)  # numeric session ids drawn from this range, as Codex's are

# --- streamable HTTP: resumable streams (SEP-1699) ---
# How long a host waits before reconnecting a dropped stream (the SSE `retry` of each priming event): a send's
# answer is kept meanwhile, so reconnecting soon only gets it sooner.
HTTP_RETRY_MS = 1_000
# Events kept for replay with Last-Event-ID, all streams together: the oldest streams' go first. A tool result is
# one event, so this is many hosts' worth of calls in flight; the bytes bound keeps a run of screenshots in check.
HTTP_EVENTS_KEPT = 4_096
# An answer for a stream a host is resuming waits at most this long for the SDK to make that stream live, so that
# it is forwarded rather than lost between the replay and the live tail (``events.SessionEvents``).
HTTP_RESUME_LIVE_WAIT_S = 1.0
HTTP_EVENT_BYTES_KEPT = 64 * 1024 * 1024
