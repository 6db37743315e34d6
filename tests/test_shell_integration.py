"""In-process tests of the backends' shell integration: argv rewriting, the mark filter, the typed snippet."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ptyd.backends.shell_integration import (
    FISH_FILE,
    RC_FILE,
    Mark,
    MarkFilter,
    bash_launch,
    fish_launch,
    nested_key,
    remote_snippet,
    shell_launch,
    zsh_launch,
)

KEY = "0123456789abcdef0123456789abcdef"


def mark(body: str) -> bytes:
    return f"\x1b]6973;{body}\x07".encode()


def test_marks_are_taken_out_and_reported_in_order() -> None:
    seen: list[Mark] = []
    f = MarkFilter(KEY, seen.append)
    c, d = mark(f"{KEY};C"), mark(f"{KEY};D;3;/tmp/x y")
    out = f.feed(b"a" + c + b"b" + d + b"c")
    assert out == b"abc"
    # ``at``: where each ends in the stream as read (the answers to a program's queries written before the shell's
    # prompt mark have no asker left)
    assert seen == [Mark("C", at=1 + len(c)), Mark("D", 3, "/tmp/x y", at=2 + len(c) + len(d))]


def test_a_continuation_mark_and_a_command_mark_with_its_line_are_reported() -> None:
    seen: list[Mark] = []
    p, c = mark(f"{KEY};P"), mark(f"{KEY};C;if%20true%0Aecho%20%3B%0Aend")
    out = MarkFilter(KEY, seen.append).feed(p + b"> " + c)
    assert out == b"> "
    assert seen == [Mark("P", at=len(p)), Mark("C", command="if true\necho ;\nend", at=len(p) + 2 + len(c))]


def test_a_nested_shells_marks_carry_its_depth_and_a_near_miss_is_not_believed() -> None:
    seen: list[Mark] = []
    nested = mark(f"{nested_key(KEY, 2)};D;0;/far")
    data = nested + mark(f"{KEY}.x;D;0;/") + mark(f"{KEY}2;C") + b"ok"
    assert MarkFilter(KEY, seen.append).feed(data) == b"ok"
    assert seen == [Mark("D", 0, "/far", depth=2, at=len(nested))]


def test_marks_with_another_secret_are_removed_but_not_believed() -> None:
    seen: list[Mark] = []
    out = MarkFilter(KEY, seen.append).feed(b"x" + mark("forged;D;99;/") + b"y")
    assert (out, seen) == (b"xy", [])


@given(st.lists(st.integers(min_value=0, max_value=80), max_size=6))
def test_marks_cut_by_read_boundaries_are_reassembled(cuts: list[int]) -> None:
    c, d = mark(f"{KEY};C"), mark(f"{KEY};D;0;/")
    stream = b"before " + c + b" middle \x1b[1m " + d + b" after\x1b]69"
    seen: list[Mark] = []
    f = MarkFilter(KEY, seen.append)
    out = b""
    start = 0
    for cut in sorted(cuts):
        out += f.feed(stream[start:cut])
        start = max(start, cut)
    out += f.feed(stream[start:]) + f.feed(b"0;title\x07")
    assert out == b"before  middle \x1b[1m  after\x1b]690;title\x07"
    at_c = stream.index(c) + len(c)
    assert seen == [Mark("C", at=at_c), Mark("D", 0, "/", at=stream.index(d) + len(d))]  # wherever the reads were cut


def test_an_unterminated_mark_is_passed_through() -> None:
    data = b"\x1b]6973;" + b"x" * 9000
    out = MarkFilter(KEY, lambda _: None).feed(data)
    assert out == data


@pytest.mark.parametrize(
    ("argv", "rewritten", "rc"),
    [
        (["/bin/bash", "--noprofile", "--norc", "-i"], None, None),  # --norc: argv kept, PROMPT_COMMAND bootstrap
        (["bash"], ["bash", "--rcfile", str(RC_FILE), "-i"], "default"),
        (["bash", "-l"], ["bash", "--rcfile", str(RC_FILE), "-i"], "login"),
        (["-bash"], ["bash", "--rcfile", str(RC_FILE), "-i"], "login"),
        (["bash", "--rcfile", "/etc/my.rc"], ["bash", "--rcfile", str(RC_FILE), "-i"], "/etc/my.rc"),
    ],
)
def test_interactive_bash_gets_the_integration(argv: list[str], rewritten: list[str] | None, rc: str | None) -> None:
    launch = bash_launch(argv, KEY, {})
    assert launch is not None
    assert launch.argv == (rewritten or argv)
    assert launch.key == KEY  # on fd 6, not in the environment (/proc/PID/environ would keep it)
    assert "PTYD_SHELL_KEY" not in launch.env
    assert launch.env["PTYD_SHELL_KEY_FD"] == "6"
    assert launch.env.get("PTYD_SHELL_RC") == rc


@pytest.mark.parametrize(
    "argv", [["bash", "-c", "echo"], ["bash", "script.sh"], ["bash", "-x"], ["sh"], ["python3"], ["bash", "--rcfile"]]
)
def test_other_programs_run_as_given(argv: list[str]) -> None:
    assert bash_launch(argv, KEY, {}) is None
    assert zsh_launch(argv, KEY, {}) is None
    assert fish_launch(argv, KEY) is None


def test_fish_gets_the_integration_as_an_init_command() -> None:
    launch = shell_launch(["/usr/bin/fish", "-l"], KEY, {})
    assert launch is not None
    assert launch.argv == ["/usr/bin/fish", "-l", "--init-command", f"source '{FISH_FILE}'"]
    assert launch.env == {"PTYD_SHELL_KEY_FD": "6"}  # the secret on fd 6, as bash's and zsh's
    assert launch.key == KEY
    for argv in (["fish", "-c", "echo"], ["fish", "--no-config"], ["fish", "script.fish"]):
        assert fish_launch(argv, KEY) is None


def test_zsh_keeps_argv_and_the_users_zdotdir() -> None:
    launch = zsh_launch(["zsh", "-l"], KEY, {"ZDOTDIR": "/home/u/.config/zsh"})
    assert launch is not None
    assert launch.argv == ["zsh", "-l"]
    assert launch.env["PTYD_USER_ZDOTDIR"] == "/home/u/.config/zsh"
    assert (launch.key, launch.env["PTYD_SHELL_KEY_FD"]) == (KEY, "6")
    assert "PTYD_SHELL_KEY" not in launch.env
    assert zsh_launch(["zsh", "-f"], KEY, {}) is None


@pytest.mark.parametrize("shell", ["bash", "zsh", "sh"])
def test_the_typed_snippet_parses_in_every_shell_it_may_meet(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    line = remote_snippet(KEY, prompt_width=20, cols=80)
    assert line.endswith("\n")
    assert len(line.encode()) < 4095  # one canonical line
    subprocess.run([shell, "-n"], input=line.encode(), check=True)
