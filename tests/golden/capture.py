"""Capture golden screens from real programs, rendered by an independent terminal emulator: tmux.

Each scenario runs a real program in a tmux pane of a fixed size, with TERM=xterm-256color as ptyd sets it, and
records the raw bytes the program wrote with ``tmux pipe-pane``. The program only starts once the pipe is open, so
nothing it writes is missed. At each snapshot point it saves

- ``NAME.input``: the bytes written up to that point, exactly as the PTY delivered them;
- ``NAME.screen``: a header (cursor position, alternate screen on or off, size), then tmux's visible rows as the
  text they display (``capture-pane -p -e`` without its SGR, DEC line-drawing cells as their box characters).

A snapshot is kept only if replaying its ``.input`` into a fresh pane of the same size reproduces the same screen
and cursor, so each pair is self-consistent whatever the timing of the capture. The goldens were recorded with
tmux 3.3a; tests/test_golden.py lists where ptyd renders otherwise, for that version. Run by hand, commit the
output:

    .venv/bin/python tests/golden/capture.py              # every scenario, at both sizes
    .venv/bin/python tests/golden/capture.py vim less     # some of them
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = ((80, 24), (160, 40))
TMUX_CONF = """\
set -g status off
set -g default-terminal xterm-256color
set -g escape-time 0
set -g history-limit 10000
set -s exit-empty off
"""
ENV = {
    "TERM": "xterm-256color",
    "LANG": "C.UTF-8",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PS1": "$ ",
    "HISTFILE": "/dev/null",
    "LESSHISTFILE": "-",
}
BASH = ["bash", "--norc", "--noprofile", "-i"]
HEADER = "cursor #{cursor_x} #{cursor_y} alt #{alternate_on} size #{pane_width}x#{pane_height}"
SETTLE_S = 0.4  # output and screen unchanged this long: the program is waiting
DEADLINE_S = 20.0


@dataclass(frozen=True)
class Step:
    """``type`` text (a trailing newline is Enter), press ``key``, ``wait`` for a regex on screen, wait for the
    shell's next ``prompt``, or ``snap``."""

    kind: str
    arg: str


def type_(text: str) -> Step:
    return Step("type", text)


def key(name: str) -> Step:
    return Step("key", name)


def wait(pattern: str) -> Step:
    return Step("wait", pattern)


def snap(name: str) -> Step:
    return Step("snap", name)


# The shell printed its next prompt: bash runs PROMPT_COMMAND (which counts prompts in a file, not on the
# screen) before each one, so a wait cannot mistake the previous prompt for the next.
PROMPT = Step("prompt", "")


@dataclass(frozen=True)
class Scenario:
    name: str
    argv: list[str]
    steps: list[Step]


SCENARIOS = [
    Scenario(
        "bash",
        BASH,
        [
            PROMPT,
            type_("echo hello world\n"),
            PROMPT,
            type_("printf 'a\\tb\\tc\\n1\\t22\\t333\\n'\n"),
            PROMPT,
            type_("echo $(seq -s ' ' 1 60)\n"),
            PROMPT,
            type_("echo tpyo"),
            wait("tpyo$"),
            key("BSpace"),
            key("BSpace"),
            key("BSpace"),
            type_("ypo fixed\n"),
            PROMPT,
            type_("echo -n 'no newline'; echo -e '\\e[1mbold\\e[0m \\e[31mred\\e[0m'\n"),
            PROMPT,
            snap("bash"),
        ],
    ),
    Scenario(
        "ls",
        BASH,
        [
            PROMPT,
            type_("ls --color=always\n"),
            PROMPT,
            type_("ls -l --color=always | head -12\n"),
            PROMPT,
            snap("ls_color"),
        ],
    ),
    Scenario(
        "vim",
        BASH,
        [
            PROMPT,
            type_("echo before vim\n"),
            PROMPT,
            type_("vim --clean notes.py\n"),
            wait(r'"notes.py" \d+L'),
            type_("30G"),
            type_("o"),
            wait("-- INSERT --"),
            type_("    # edited in the golden capture ✔ 中文"),
            wait("中文"),
            snap("vim"),
            key("Escape"),
            type_(":wq\n"),
            PROMPT,
            type_("grep -n golden notes.py\n"),
            PROMPT,
            snap("vim_exit"),
        ],
    ),
    Scenario(
        "less",
        BASH,
        [
            PROMPT,
            type_("echo before less\n"),
            PROMPT,
            type_("less paged.txt\n"),
            wait("line 1 of the paged file"),
            key("Space"),
            type_("/line 1.0 of\n"),
            wait(r"line 1.0 of"),
            snap("less"),
            type_("q"),
            PROMPT,
            type_("echo after less\n"),
            PROMPT,
            snap("less_exit"),
        ],
    ),
    Scenario("top_batch", BASH, [PROMPT, type_("top -b -n1 | head -60\n"), PROMPT, snap("top_batch")]),
    Scenario(
        "top",
        BASH,
        [
            PROMPT,
            type_("top -d 30\n"),
            wait(r"PID\s+USER"),
            snap("top"),
            type_("q"),
            PROMPT,
            snap("top_exit"),
        ],
    ),
    Scenario("progress", BASH, [PROMPT, type_("python3 progress.py\n"), PROMPT, snap("progress")]),
    Scenario("unicode", BASH, [PROMPT, type_("cat unicode.txt\n"), PROMPT, snap("unicode")]),
    Scenario(
        "clear",
        BASH,
        [
            PROMPT,
            type_("seq 1 50\n"),
            PROMPT,
            type_("clear\n"),
            PROMPT,
            type_("echo after clear\n"),
            PROMPT,
            snap("clear"),
        ],
    ),
    Scenario(
        "burst",
        BASH,
        [
            PROMPT,
            type_("seq 1 3000; base64 random.bin; python3 colors.py; echo burst done\n"),
            PROMPT,
            snap("burst"),
        ],
    ),
    Scenario(
        "curses",
        BASH,
        [
            PROMPT,
            type_("python3 curses_box.py\n"),
            wait("press q"),
            snap("curses"),
            type_("q"),
            PROMPT,
            snap("curses_exit"),
        ],
    ),
]

# vttest's menu and its first test, "cursor movements": the border screen (CUP, IND, NEL, RI, DECALN), C0
# controls inside escape sequences, leading zeros in parameters. The test's other screens are passed, not saved:
# the border again and autowrap in 132-column mode, and autowrap at 80 columns, which vttest clears with DECCOLM
# alone, a mode ptyd ignores (as xterm does unless allowed to switch to 132 columns) and tmux takes as a clear.
VTTEST_SCREENS = ["vttest_border", "", "", "", "vttest_controls", "vttest_zeros"]
SCENARIOS.append(
    Scenario(
        "vttest",
        ["vttest"],
        [
            wait("Enter choice number"),
            snap("vttest_menu"),
            type_("1\n"),
            *(
                step
                for name in VTTEST_SCREENS
                for step in (wait("Push <RETURN>"), *([snap(name)] if name else []), type_("\n"))
            ),
            wait("Enter choice number"),
        ],
    )
)

PROGRESS_PY = r"""
import sys
out = sys.stdout
for i in range(0, 101, 5):
    bar = "#" * (i * 40 // 100)
    out.write(f"\rdownloading [{bar:<40}] {i:3d}%\x1b[K")
    out.flush()
out.write("\n")
# Two status lines rewritten in place, as docker pull and pip do.
for i in range(6):
    if i:
        out.write("\x1b[2A")
    out.write(f"\x1b[2Klayer a: {'=' * i}>\n\x1b[2Klayer b: {i * 20}%\n")
    out.flush()
for c in "|/-\\|/-\\":
    out.write(c + "\b")
    out.flush()
out.write("done \n")
out.write("overwritten by CR\rOVER\n")
"""

COLORS_PY = r"""
for i in range(300):
    print(f"\x1b[3{i % 8}mline {i}\x1b[0m plain \x1b[1;4{i % 8}mbold on colour\x1b[0m")
for i in range(60):
    print(f"long {i:03d} " + "abcdefghij" * (7 + i % 17))
"""

CURSES_PY = r"""
import curses

def main(stdscr):
    curses.curs_set(0)
    curses.use_default_colors()
    curses.init_pair(1, curses.COLOR_GREEN, -1)
    stdscr.box()
    stdscr.addstr(1, 2, "curses box: press q", curses.A_REVERSE)
    stdscr.addstr(2, 2, "状态: ok ✔")
    stdscr.hline(4, 1, curses.ACS_HLINE, 20)
    stdscr.addch(4, 22, curses.ACS_DIAMOND)
    stdscr.refresh()
    win = curses.newwin(5, 30, 6, 4)
    win.box()
    win.addstr(2, 2, "inner window", curses.color_pair(1) | curses.A_BOLD)
    win.refresh()
    while stdscr.getch() != ord("q"):
        pass

curses.wrapper(main)
"""

# Where the following text lands reveals each cluster's width: "[", the cluster, "]abcdefgh", then a "#" written
# at column 6 over whichever cell is there (for width 1 the "d", for width 2 the "c").
WIDTH_PROBES = ["✔️", "⚠️", "❤️", "✔", "👨\u200d👩\u200d👧", "👍🏽", "🇫🇷", "😀", "中", "e\u0301", "ｱ", "a\u200bb"]

UNICODE_TXT = "".join(
    line + "\n"
    for line in [
        "CJK: 中文字符 日本語のテキスト 한국어 텍스트",
        "emoji: 😀 🎉 🚀 👍🏽 done",
        "check ✔️ done, warning ⚠️ careful, heart ❤️ love",
        "family: 👨\u200d👩\u200d👧 end",
        "combining: e\u0301 n\u0303 a\u0308 cafe\u0301",
        "zero width: ab\u200bcd ef\u2060gh ij\u200ckl rest of line",
        "fullwidth: \uff21\uff22\uff23\uff11\uff12\uff13 halfwidth: ｱｲｳ",
        "box: ┌──┐│  │└──┘",
        "x" * 79 + "中文 after the last column of 80",
        "x" * 159 + "中文 after the last column of 160",
        "a" + "中" * 100,
        *(f"[{probe}]abcdefgh\r\x1b[6C#" for probe in WIDTH_PROBES),
        "end of unicode",
    ]
)


def write_fixtures(home: Path) -> None:
    """The files the scenarios open; generated, so the capture is reproducible."""
    (home / "progress.py").write_text(PROGRESS_PY)
    (home / "colors.py").write_text(COLORS_PY)
    (home / "curses_box.py").write_text(CURSES_PY)
    (home / "unicode.txt").write_text(UNICODE_TXT)
    (home / "paged.txt").write_text("".join(f"line {i} of the paged file\n" for i in range(1, 301)))
    (home / "random.bin").write_bytes(bytes((i * 7919 + (i >> 3) * 104729) % 251 for i in range(45_000)))
    body = [f"def function_{i}(x):\n    return x * {i}  # line {i}\n" for i in range(40)]
    (home / "notes.py").write_text('"""Notes."""\n\n' + "\n".join(body))
    for name in ["src", "docs", "build", "tests"]:
        (home / name).mkdir()
    for name in ["run.sh", "setup.py"]:
        (home / name).write_text("#!/bin/sh\n")
        (home / name).chmod(0o755)
    for i in range(36):
        (home / f"data_{i:02d}.csv").write_text("a,b\n")
    for name in ["archive.tar.gz", "image.png", "with space.txt", "café.txt", "日本語.txt", "README.md"]:
        (home / name).write_text("x\n")
    (home / "link").symlink_to("README.md")
    (home / "broken").symlink_to("missing")


class Tmux:
    """A private tmux server (its own socket and config), killed when done."""

    def __init__(self, root: Path) -> None:
        self.socket = root / "tmux.sock"
        self.conf = root / "tmux.conf"
        self.conf.write_text(TMUX_CONF)

    def run(self, *args: str) -> str:
        argv = ["tmux", "-S", str(self.socket), "-f", str(self.conf), *args]
        done = subprocess.run(argv, capture_output=True, text=True, env=ENV, check=False)
        if done.returncode:
            raise RuntimeError(f"{shlex.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def kill_server(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True, check=False)

    def new_session(self, name: str, cols: int, rows: int, command: str) -> None:
        self.run("new-session", "-d", "-s", name, "-x", str(cols), "-y", str(rows), command)

    def screen(self, target: str) -> tuple[list[str], str]:
        """Visible rows, and the header: cursor, alternate screen and size."""
        rows = visible_text(self.run("capture-pane", "-p", "-e", "-t", target).split("\n")[:-1])
        header = self.run("display", "-p", "-t", target, HEADER).strip()
        return rows, header


# capture-pane shows a DEC line-drawing cell as its ASCII code (``q`` for ─); with -e it brackets such cells
# in SO/SI, so they can be shown as the glyphs the terminal displays.
DEC_GRAPHICS = dict(zip("`afgjklmnopqrstuvwxyz{|}~", "◆▒°±┘┐┌└┼⎺⎻─⎼⎽├┤┴┬│≤≥π≠£·", strict=True))
ESCAPES = re.compile(r"\x1b\[[0-9;:]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]")


def visible_text(rows: list[str]) -> list[str]:
    """``capture-pane -e`` rows as the text they display: no SGR, line-drawing cells as their glyphs. tmux emits
    SO/SI only where the state changes from the previous cell, previous rows included."""
    out: list[str] = []
    graphics = False
    for row in rows:
        text: list[str] = []
        for part in re.split("([\\x0e\\x0f])", ESCAPES.sub("", row)):
            if part in ("\x0e", "\x0f"):
                graphics = part == "\x0e"
            else:
                text.append("".join(DEC_GRAPHICS.get(c, c) for c in part) if graphics else part)
        out.append("".join(text).rstrip())
    return out


def poll(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def settle(tmux: Tmux, target: str, output: Path) -> tuple[list[str], str, int]:
    """Wait until neither the recorded output nor the screen has changed for SETTLE_S; return them."""
    last: tuple[list[str], str, int] | None = None
    since = time.monotonic()
    deadline = since + DEADLINE_S
    while True:
        rows, header = tmux.screen(target)
        state = (rows, header, output.stat().st_size if output.exists() else 0)
        if state != last:
            last, since = state, time.monotonic()
        elif time.monotonic() - since >= SETTLE_S:
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"{target} never settled")
        time.sleep(0.05)


def launcher(path: Path, gate: Path, prompts: Path, argv: list[str]) -> Path:
    """A script that starts ``argv`` in a clean environment once ``gate`` exists (the pipe is open by then)."""
    env = [f"{k}={v}" for k, v in ENV.items()]
    program = shlex.join(["env", "-i", *env, f"PROMPT_COMMAND=echo >> {prompts}", *argv])
    path.write_text(f"while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.02; done\nexec {program}\n")
    return path


def run_scenario(tmux: Tmux, work: Path, scenario: Scenario, cols: int, rows: int) -> list[tuple[str, bytes, str]]:
    target = f"{scenario.name}-{cols}x{rows}"
    output = work / f"{target}.out"
    gate = work / f"{target}.go"
    prompts = work / f"{target}.prompts"
    script = launcher(work / f"{target}.sh", gate, prompts, scenario.argv)
    tmux.new_session(target, cols, rows, shlex.join(["sh", "-c", f"cd {work / 'home'} && exec sh {script}"]))
    tmux.run("pipe-pane", "-o", "-t", target, f"cat >> {shlex.quote(str(output))}")
    poll("pipe open", lambda: tmux.run("display", "-p", "-t", target, "#{pane_pipe}").strip() == "1")
    gate.touch()
    snaps: list[tuple[str, bytes, str]] = []
    prompts_seen = 0
    try:
        for step in scenario.steps:
            if step.kind == "type":
                text, enter = (step.arg[:-1], True) if step.arg.endswith("\n") else (step.arg, False)
                if text:
                    tmux.run("send-keys", "-t", target, "-l", text)
                if enter:
                    tmux.run("send-keys", "-t", target, "Enter")
            elif step.kind == "key":
                tmux.run("send-keys", "-t", target, step.arg)
            elif step.kind == "prompt":
                prompts_seen += 1
                poll(f"{target}: prompt {prompts_seen}", lambda n=prompts_seen: count_lines(prompts) >= n)
            elif step.kind == "wait":
                pattern = re.compile(step.arg, re.MULTILINE)
                poll(f"{target}: {step.arg}", lambda p=pattern: bool(p.search(screen_text(tmux, target))))
            else:
                screen, header, size = settle(tmux, target, output)
                data = output.read_bytes()[:size]
                snaps.append((f"{step.arg}.{cols}x{rows}", data, "\n".join([header, *screen]) + "\n"))
    finally:
        tmux.run("kill-session", "-t", target)
    return snaps


def count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def screen_text(tmux: Tmux, target: str) -> str:
    return "\n".join(tmux.screen(target)[0]).rstrip("\n")


def replay(tmux: Tmux, work: Path, name: str, data: bytes, cols: int, rows: int) -> str:
    """The screen tmux renders from ``data`` alone, written to a raw tty (no output processing)."""
    source = work / f"{name}.replay"
    source.write_bytes(data)
    done = work / f"{name}.replayed"
    target = f"replay-{name}".replace(".", "-")
    tmux.new_session(target, cols, rows, f"sh -c 'stty raw -echo -opost; cat {source}; touch {done}; exec sleep 600'")
    try:
        poll(f"replay {name}", done.exists)
        screen, header, _ = settle(tmux, target, source)
    finally:
        tmux.run("kill-session", "-t", target)
    return "\n".join([header, *screen]) + "\n"


def main(names: list[str]) -> int:
    chosen = [s for s in SCENARIOS if not names or s.name in names]
    failed = 0
    version = subprocess.run(["tmux", "-V"], capture_output=True, text=True, check=True).stdout.strip()
    if version != "tmux 3.3a":
        print(f"{version}: the known differences in tests/test_golden.py are for tmux 3.3a", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ptyd-golden-") as tmp:
        work = Path(tmp)
        (work / "home").mkdir()
        write_fixtures(work / "home")
        tmux = Tmux(work)
        try:
            for scenario in chosen:
                for cols, rows in SIZES:
                    for name, data, screen in run_scenario(tmux, work, scenario, cols, rows):
                        if replay(tmux, work, name, data, cols, rows) != screen:
                            print(f"{name}: replaying the bytes gives another screen; not saved", file=sys.stderr)
                            failed += 1
                            continue
                        (HERE / f"{name}.input").write_bytes(data)
                        (HERE / f"{name}.screen").write_text(screen)
                        print(f"{name}: {len(data)} bytes")
        finally:
            tmux.kill_server()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
