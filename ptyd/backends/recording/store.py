"""Where recordings live (``$XDG_STATE_HOME/ptyd/recordings``, 0700, files 0600) and what is there.

A session's recording is a series of parts, ``<session id>.<n>.cast``, each a whole asciicast v2 file with its own
header, so that any part plays on its own; the oldest parts past ``recording_files_kept`` are deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import final

from ptyd.backends.recording.recorder import Recording
from ptyd.backends.recording.writer import Header, RecordingWriter
from ptyd.config import Config

HEADER_MAX_BYTES = 65536  # a header longer than this is not one of ours


def default_directory() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ptyd" / "recordings"


@dataclass(frozen=True, slots=True)
class RecordingFile:
    session_id: str
    part: int
    path: Path
    size: int
    started_at_ms: int
    cols: int
    rows: int
    title: str


def read_header(path: Path) -> dict[str, object] | None:
    with contextlib.suppress(OSError, ValueError), path.open("rb") as f:
        header = json.loads(f.readline(HEADER_MAX_BYTES))
        if isinstance(header, dict) and header.get("version") == 2:
            return header
    return None


@final
class RecordingStore:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.directory = Path(config.recording_dir) if config.recording_dir else default_directory()
        self.writer = RecordingWriter(config.recording_queue_bytes)

    def required(self, agent_name: str | None) -> bool:
        """The config records this agent's sessions: the operator's choice, which the agent cannot undo."""
        names = self.config.record_agents
        return "*" in names or (agent_name is not None and agent_name in names)

    def wanted(self, agent_name: str | None, asked: bool | None) -> bool:
        """Whether a new session is recorded: as the config says for its agent, or as terminal_open asked."""
        return self.required(agent_name) or asked is True

    def start(self, session_id: str, title: str, cols: int, rows: int) -> Recording:
        self._prepare()
        header = Header(
            cols=cols,
            rows=rows,
            title=title,
            env={"TERM": self.config.term, "SHELL": self.config.shell_argv[0] if self.config.shell_argv else ""},
            session_id=session_id,
        )
        cfg = self.config
        return Recording(
            self.writer, self.directory / session_id, header, cfg.recording_max_file_bytes, cfg.recording_files_kept
        )

    def _prepare(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.chmod(0o700)  # an existing directory too: these files hold everything a session showed

    def files(self) -> list[RecordingFile]:
        """Every part on disk, by session then part."""
        found = []
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.directory):
                stem, dot, ext = entry.name.rpartition(".")
                session_id, _, number = stem.rpartition(".")
                if ext != "cast" or not dot or not number.isdigit() or not session_id:
                    continue
                path = Path(entry.path)
                header = read_header(path)
                if header is None:
                    continue
                found.append(
                    RecordingFile(
                        session_id=session_id,
                        part=int(number),
                        path=path,
                        size=entry.stat().st_size,
                        started_at_ms=int(_number(header.get("timestamp")) * 1000),
                        cols=int(_number(header.get("width"))),
                        rows=int(_number(header.get("height"))),
                        title=str(header.get("title", "")),
                    )
                )
        return sorted(found, key=lambda f: (f.started_at_ms, f.session_id, f.part))

    def close(self) -> None:
        self.writer.close()


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
