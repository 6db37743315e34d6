"""Why a send returned, decided by the kernel, for the programs agents really drive."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from conftest import Rpc, RpcError, Shell, latency, wait_until

needs = pytest.mark.skipif


def test_bash_prompt_is_stdin_read(shell: Shell) -> None:
    result = shell.send("echo hello\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"] == "$ echo hello\nhello\n$"
    assert result["session_status"] == {"kind": "running"}
    assert result["foreground"]["name"] == "bash"


def test_command_that_works_before_prompting(shell: Shell) -> None:
    result = shell.send("sleep 0.3; read -p 'name? ' x\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].endswith("name?")
    result = shell.send("ptyd\n")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].endswith("$")


def test_sleep_is_not_stdin_read(shell: Shell) -> None:
    result = shell.send("sleep 5\n", idle_ms=400)
    assert result["wait_reason"] == "inferred_idle"
    assert result["foreground"]["name"] == "sleep"
    shell.send("\x03")


def test_program_reading_a_pipe_is_not_stdin_read(shell: Shell) -> None:
    result = shell.send("sleep 30 | cat\n", idle_ms=400)
    assert result["wait_reason"] == "inferred_idle"
    assert shell.send("\x03")["wait_reason"] == "stdin_read"


def test_timeout_while_printing(shell: Shell) -> None:
    result = shell.send("while :; do echo tick; sleep 0.05; done\n", timeout_ms=500, idle_ms=5000)
    assert result["wait_reason"] == "timeout"
    assert "tick" in result["viewport"]
    assert shell.send("\x03")["wait_reason"] == "stdin_read"


def test_empty_input_waits_for_readiness(shell: Shell) -> None:
    result = shell.send("")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"] == "$"


@pytest.mark.parametrize(
    ("start", "prompt", "line", "answer"),
    [
        ("sh", "$", "echo $((6*7))\n", "42\n$"),
        ("python3 -q", ">>>", "6*7\n", "42\n>>>"),
        ("cat", "", "forty-two\n", "forty-two\nforty-two\n"),
        ("sqlite3", "sqlite>", "select 6*7;\n", "42\nsqlite>"),
    ],
    ids=["sh", "python-repl", "cat", "sqlite3"],
)
def test_interactive_programs(shell: Shell, start: str, prompt: str, line: str, answer: str) -> None:
    if shutil.which(start.split()[0]) is None:
        pytest.skip(f"{start.split()[0]} is not installed")
    opened = shell.send(start + "\n", idle_ms=10_000)
    assert opened["wait_reason"] == "stdin_read", opened
    assert opened["viewport"].endswith(prompt)
    result = shell.send(line, idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read", result
    assert result["viewport"].endswith(answer), result
    # End of input leaves the program: the shell's prompt, not the program's, ends the next viewport.
    result = shell.send("\x04", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].endswith("$")
    assert result["foreground"]["name"] == "bash"


def test_python_input_after_work(shell: Shell) -> None:
    result = shell.send("python3 -c 'import time; time.sleep(0.1); print(input(\"? \") * 2)'\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].endswith("?")
    result = shell.send("ab\n")
    assert result["viewport"].endswith("abab\n$")


@needs(shutil.which("node") is None, reason="node is not installed")
def test_node_repl(shell: Shell) -> None:
    opened = shell.send("node\n", idle_ms=10_000, timeout_ms=20_000)
    assert opened["wait_reason"] == "stdin_read", opened
    assert opened["viewport"].endswith(">")
    result = shell.send("6*7\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert "42" in result["viewport"]
    assert shell.send(".exit\n", idle_ms=10_000)["viewport"].endswith("$")


@needs(shutil.which("node") is None, reason="node is not installed")
def test_node_answers_at_its_prompt_and_an_await_right_after_waits_for_its_answer(shell: Shell) -> None:
    # A line node answered with its prompt settles without the event loop's quiet hold; but node arms a 15 ms timer
    # after each answer, and a look before it fired saw only that timer: the await's own timer, sent right after,
    # was not sooner than it, and the await settled at once without its answer.
    assert shell.send("node\n", idle_ms=10_000, timeout_ms=20_000)["viewport"].endswith(">")
    for expression, answer in [("6*7", "42"), ("'a'.repeat(3)", "'aaa'"), ("[1, 2].length", "2")]:
        result = shell.send(expression + "\n", idle_ms=10_000)
        assert result["wait_reason"] == "stdin_read", result
        assert result["viewport"].splitlines()[-2:] == [answer, ">"], result["viewport"]
        awaited = shell.send("await new Promise(r => setTimeout(r, 700)); 'done'\n", idle_ms=10_000)
        assert awaited["viewport"].splitlines()[-2:] == ["'done'", ">"], awaited["viewport"]
    assert shell.send(".exit\n", idle_ms=10_000)["viewport"].endswith("$")


@needs(shutil.which("node") is None, reason="node is not installed")
def test_node_given_a_block_line_by_line_settles_each_line_on_its_prompt(shell: Shell) -> None:
    # The line that opens a block is answered by node's continuation prompt, the one that closes it by its own
    # prompt after the block's answer: each settles at once, none before its answer, and an await in the block
    # is waited for.
    assert shell.send("node\n", idle_ms=10_000, timeout_ms=20_000)["viewport"].endswith(">")
    lines = [
        ("async function f(x) {", ["> async function f(x) {", "..."]),
        ("  await new Promise(r => setTimeout(r, 700));", ["...   await new Promise(r => setTimeout(r, 700));", "..."]),
        ("  return x * 2;", ["...   return x * 2;", "..."]),
        ("}", ["... }", "undefined", ">"]),
        ("await f(21)", ["> await f(21)", "42", ">"]),
        ("for (const i of [1, 2]) {", ["> for (const i of [1, 2]) {", "..."]),
        ("  console.log('item', i)", ["...   console.log('item', i)", "..."]),
        ("}", ["item 1", "item 2", "undefined", ">"]),
    ]
    for line, tail in lines:
        result = shell.send(line + "\n", idle_ms=10_000)
        assert result["wait_reason"] == "stdin_read", result
        assert result["viewport"].splitlines()[-len(tail) :] == tail, result["viewport"]
    assert shell.send(".exit\n", idle_ms=10_000)["viewport"].endswith("$")


@pytest.mark.slow
@needs(shutil.which("node") is None, reason="node is not installed")
def test_node_awaiting_a_timer_after_its_own_has_fired(shell: Shell) -> None:
    # node arms a timer of its own for 8 s after it starts. The tracker took the timer it saw then, long fired, for
    # the one a line armed later, and the await settled at once without its answer.
    assert shell.send("node\n", idle_ms=10_000, timeout_ms=20_000)["viewport"].endswith(">")
    time.sleep(9)  # past node's own timer: the condition under test, not a wait for readiness
    started = time.monotonic()
    result = shell.send("await new Promise(r => setTimeout(r, 1500)); 42\n", idle_ms=10_000)
    assert time.monotonic() - started >= 1.5, result
    assert result["viewport"].splitlines()[-2:] == ["42", ">"], result["viewport"]
    assert shell.send(".exit\n", idle_ms=10_000)["viewport"].endswith("$")


@needs(shutil.which("less") is None, reason="less is not installed")
def test_less_reads_dev_tty_and_uses_the_alternate_screen(human_shell: Shell) -> None:
    shell = human_shell
    result = shell.send("seq 1 1000 | less\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["alt_screen"] is True
    assert result["foreground"]["name"] == "less"
    assert result["viewport"].splitlines()[0] == "1"
    result = shell.send("q")
    assert result["alt_screen"] is False
    assert result["viewport"].endswith("$")
    # The pager's screen did not leak into the shell's transcript.
    assert "500" not in shell.transcript()


@needs(shutil.which("vim") is None, reason="vim is not installed")
def test_vim_as_installed_settles_after_its_terminal_queries(shell: Shell, tmp_path: Path) -> None:
    # Without a vimrc of the user's, vim loads its defaults and asks the terminal for its version and colours at
    # start, reading each answer as it comes: the last answer taken, it waits for keys.
    path = tmp_path / "defaults.txt"
    result = shell.send(f"HOME={tmp_path} vim {path}\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read", result
    assert result["alt_screen"] is True
    assert shell.send("ivia defaults\x1b:wq\n")["viewport"].endswith("$")
    assert path.read_text() == "via defaults\n"


@needs(shutil.which("vim") is None, reason="vim is not installed")
def test_vim(shell: Shell, tmp_path: Path) -> None:
    path = tmp_path / "note.txt"
    # A lone ESC makes vim wait 'ttimeoutlen' for the rest of a key code, with the screen not yet redrawn.
    result = shell.send(f"vim -u NONE -i NONE -N --cmd 'set ttimeout ttimeoutlen=20' {path}\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["alt_screen"] is True
    result = shell.send("ihello from vim")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[0] == "hello from vim"
    assert result["viewport"].endswith("-- INSERT --")
    result = shell.send("\x1b")
    assert result["wait_reason"] == "stdin_read"
    assert not result["viewport"].endswith("-- INSERT --")
    result = shell.send(":wq\n")
    assert result["alt_screen"] is False
    assert path.read_text() == "hello from vim\n"


def test_password_prompt(shell: Shell) -> None:
    result = shell.send("python3 -c 'import getpass; print(len(getpass.getpass(\"pw: \")))'\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].endswith("pw:")
    result = shell.send("hunter2\n")
    assert "hunter2" not in result["viewport"]
    assert "7" in result["viewport"].splitlines()


def test_top_level_exit_is_session_exit(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, env={"PS1": "$ "})
    result = s.send("exit 3\n")
    assert result["wait_reason"] == "session_exit"
    assert result["session_status"] == {"kind": "exited", "exit_code": 3, "signal": None}
    status = s.call("terminal_status")
    assert status["status"]["kind"] == "exited"
    s.close()


def test_foreground_child_exit_is_not_session_exit(shell: Shell) -> None:
    result = shell.send("bash -c 'exit 4'; echo $?\n")
    assert result["wait_reason"] == "stdin_read"
    assert "4" in result["viewport"].splitlines()


def test_killed_top_level_reports_the_signal(rpc: Rpc, token: str) -> None:
    s = Shell(rpc, token, type="exec", argv=["sleep", "60"], idle_ms=200)
    assert s.opened["wait_reason"] == "inferred_idle"
    delivered = s.call("terminal_signal", signal="SIGKILL")
    assert delivered["delivered"] is True
    assert delivered["signal"] == "SIGKILL"
    wait_until(lambda: s.call("terminal_status")["status"]["kind"] == "exited", message="the program's exit")
    assert s.call("terminal_status")["status"] == {"kind": "exited", "exit_code": None, "signal": "SIGKILL"}
    with pytest.raises(RpcError) as err:
        s.send("hello\n")
    assert err.value.kind == "session_exited"
    s.close()


def test_child_of_a_non_interactive_top_shares_its_group(rpc: Rpc, token: str) -> None:
    # `bash -c 'a; b'` has no job control: python runs in bash's own process group, the tty's foreground.
    s = Shell(rpc, token, type="exec", argv=["bash", "-c", "python3 -c 'print(input(\"? \"))'; echo done"])
    assert s.opened["wait_reason"] == "stdin_read"
    assert s.opened["motd"] == "?"
    assert s.opened["foreground"]["name"] == "python3"
    assert s.opened["foreground"]["pgid"] == s.opened["pid"]
    result = s.send("hi\n")
    assert result["wait_reason"] == "session_exit"
    assert result["viewport"] == "? hi\nhi\ndone\n"  # ends with the (empty) cursor line
    s.close()


# --- terminal queries and short-poll TUIs --------------------------------------------------------------------

QUERY_PROGRAM = r"""
import os, sys, termios, tty
fd = sys.stdin.fileno()
saved = termios.tcgetattr(fd)
tty.setraw(fd)
answers = []
for query, end in ((b"\x1b[6n", b"R"), (b"\x1b[c", b"c")):
    os.write(1, query)
    answer = b""
    while not answer.endswith(end):
        answer += os.read(fd, 1)
    answers.append(answer[1:].decode())
termios.tcsetattr(fd, termios.TCSADRAIN, saved)
print("answers", *answers)
print("typed", input("next> "))
"""


def test_query_is_answered_before_readiness(shell: Shell, tmp_path: Path) -> None:
    program = tmp_path / "query.py"
    program.write_text(QUERY_PROGRAM)
    result = shell.send(f"python3 {program}\n")
    assert result["wait_reason"] == "stdin_read"
    lines = result["viewport"].splitlines()
    assert lines[-1] == "next>"
    assert lines[-2].startswith("answers [")
    assert lines[-2].endswith("c")
    # The next keys go to the program, not into a half-read answer.
    assert shell.send("hello\n")["viewport"].splitlines()[-2:] == ["typed hello", "$"]


UNANSWERED_QUERY_PROGRAM = r"""
import os, select, sys, termios, tty
fd = sys.stdin.fileno()
saved = termios.tcgetattr(fd)
tty.setraw(fd)
os.write(1, b"\x1b]52;c;?\x07")  # the clipboard: no terminal that guards it answers
answered = select.select([fd], [], [], 0.6)[0]
termios.tcsetattr(fd, termios.TCSADRAIN, saved)
print("answered" if answered else "no answer")
print("typed", input("next> "))
"""


def test_a_query_nothing_answers_is_waited_out_with_the_program(shell: Shell, tmp_path: Path) -> None:
    """The program polls for the answer with a timeout: that wait is not its idle refresh timer."""
    program = tmp_path / "unanswered.py"
    program.write_text(UNANSWERED_QUERY_PROGRAM)
    started = time.monotonic()
    result = shell.send(f"python3 {program}\n")
    assert time.monotonic() - started >= 0.55
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[-2:] == ["no answer", "next>"]
    assert shell.send("hi\n")["viewport"].splitlines()[-2:] == ["typed hi", "$"]


def test_htop_settles_with_its_screen_drawn(shell: Shell, tmp_path: Path) -> None:
    if shutil.which("htop") is None:
        pytest.skip("htop is not installed")
    result = shell.send(f"HOME={tmp_path} htop\n", timeout_ms=15_000)  # a fresh htoprc: list view
    assert result["wait_reason"] == "stdin_read"
    assert result["alt_screen"] is True
    assert "F5Tree" in result["viewport"].replace(" ", "")
    result = shell.send("t", timeout_ms=15_000)  # tree view: the key is handled, it redraws and polls again
    assert result["wait_reason"] == "stdin_read"
    assert "F5List" in result["viewport"].replace(" ", "")
    assert shell.send("q")["viewport"].splitlines()[-1] == "$"


ASYNCIO_APP = r"""
import asyncio, sys

async def main():
    loop = asyncio.get_running_loop()
    lines = asyncio.Queue()
    loop.add_reader(sys.stdin, lambda: lines.put_nowait(sys.stdin.readline()))  # beside asyncio's self-pipe
    print("app> ", end="", flush=True)
    while True:
        try:  # a refresh timer: the loop waits on the tty with up to this timeout
            line = (await asyncio.wait_for(lines.get(), 1.9)).strip()
        except asyncio.TimeoutError:
            print("tick", flush=True)
            continue
        if line == "quit":
            return
        print("got", line, flush=True)
        print("app> ", end="", flush=True)

asyncio.run(main())
"""


def test_asyncio_app_is_probed_not_taken_for_a_relay(shell: Shell, tmp_path: Path) -> None:
    # Its epoll set holds the tty and the loop's own socket pair (the wake-up pipe), which leads nowhere; and its
    # wait has the timer's timeout, which after an answer on screen is its idle wait, not a short poll.
    program = tmp_path / "app.py"
    program.write_text(ASYNCIO_APP)
    result = shell.send(f"python3 {program}\n", idle_ms=10_000)
    assert result["viewport"].splitlines()[-1] == "app>"
    result = shell.send("hello\n", idle_ms=10_000)
    assert result["wait_reason"] == "stdin_read"
    assert result["ready_basis"] == "kernel"
    assert result["relay"] is None
    assert result["viewport"].splitlines()[-2:] == ["got hello", "app>"]  # settled before its tick, 1.9 s on
    assert shell.send("quit\n")["viewport"].endswith("$")


SHORT_POLLERS = r"""
import select, sys, time
busy = sys.argv[1] == "busy"
print("polling", flush=True)
end = time.monotonic() + (1.5 if busy else 60)
while time.monotonic() < end:
    if busy:
        spin = time.monotonic() + 0.05
        while time.monotonic() < spin:
            pass
    if select.select([sys.stdin], [], [], 0.1)[0]:
        sys.stdin.readline()
        break
print("done", flush=True)
"""


def test_short_poller_that_works_between_polls_is_not_ready(shell: Shell, tmp_path: Path) -> None:
    program = tmp_path / "poll.py"
    program.write_text(SHORT_POLLERS)
    started = time.monotonic()
    result = shell.send(f"python3 {program} busy\n")
    assert time.monotonic() - started >= 1.4  # it computes between its polls: wait for it to finish
    assert result["viewport"].splitlines()[-2:] == ["done", "$"]


def test_short_poller_that_only_waits_is_ready(shell: Shell, tmp_path: Path) -> None:
    program = tmp_path / "poll.py"
    program.write_text(SHORT_POLLERS)
    started = time.monotonic()
    result = shell.send(f"python3 {program} idle\n")
    # Before idle_ms (3 s by default): it settled on the poller's wait, not on the silence.
    latency(time.monotonic() - started, tight=1.2, fallback=3.0, what="a poller that only waits")
    assert result["wait_reason"] == "stdin_read"
    assert result["viewport"].splitlines()[-1] == "polling"
    assert shell.send("\n")["viewport"].splitlines()[-2:] == ["done", "$"]


def test_a_background_writer_does_not_hold_sends(shell: Shell) -> None:
    # A dev server or `ping &` printing into the terminal while the shell waits at its prompt: each send still
    # settles on the shell's wait, long before its timeout, with its own output on screen.
    shell.send("(while :; do echo tick; sleep 0.01; done) &\n")
    for word in ("alpha", "beta", "gamma"):
        started = time.monotonic()
        result = shell.send(f"echo {word}\n", timeout_ms=10_000)
        assert result["wait_reason"] == "stdin_read", result
        latency(time.monotonic() - started, tight=5.0, fallback=10.0, what="a send beside a background writer")
        assert word in result["viewport"].splitlines()
    shell.send("kill %1\n")


HELPED_READER = """
import os, select, sys, threading, time

done_r, done_w = os.pipe()


def highlight():
    end = time.thread_time() + 0.02  # CPU time: a busy machine makes it longer, never shorter
    while time.thread_time() < end:
        pass
    os.write(done_w, b"x")

"""
HELPED_LOOP = """
print("> ", end="", flush=True)
while True:
    ready = select.select([0, done_r], [], [])[0]
    if done_r in ready:
        os.read(done_r, 1)
        print("highlighted\\n> ", end="", flush=True)
    if 0 in ready:
        os.read(0, 1024)
        threading.Thread(target=highlight).start()
"""  # a reader that draws what its helper thread (``highlight``) finished, as fish does


DISK_HELPED_READER = """
import ctypes, os, select, sys, tempfile, threading

libc = ctypes.CDLL(None, use_errno=True)
done_r, done_w = os.pipe()
fifo = os.path.join(tempfile.mkdtemp(), "disk")
os.mkfifo(fifo)


def highlight():
    # Work in disk sleep (state D), as fish's highlighter stats directories on a cold cache: the thread waits in
    # a vfork (posix_spawn) whose child opens a FIFO, until another thread opens its other end 0.1 s on.
    threading.Timer(0.1, lambda: os.close(os.open(fifo, os.O_WRONLY))).start()
    actions = ctypes.create_string_buffer(256)  # posix_spawn_file_actions_t
    libc.posix_spawn_file_actions_init(actions)
    libc.posix_spawn_file_actions_addopen(actions, 3, fifo.encode(), os.O_RDONLY, 0)
    pid = ctypes.c_int()
    argv = (ctypes.c_char_p * 2)(b"true", None)
    assert libc.posix_spawn(ctypes.byref(pid), b"/bin/true", actions, None, argv, None) == 0
    os.waitpid(pid.value, 0)
    os.write(done_w, b"x")

"""


@pytest.mark.parametrize("helper", [HELPED_READER, DISK_HELPED_READER], ids=["running", "disk_sleep"])
def test_a_wait_counts_once_the_thread_working_for_it_rests(shell: Shell, tmp_path: Path, helper: str) -> None:
    # fish polls the terminal while a helper thread highlights the line just typed, then wakes to draw it; a Ctrl-C
    # sent before it polls again is lost. The send returns once the helper's work is drawn, whether the helper runs
    # or sleeps on the disk (fish's highlighter stats directories: on a cold cache, state D).
    program = tmp_path / "helped.py"
    program.write_text(helper + HELPED_LOOP)
    assert shell.send(f"python3 {program}\n")["viewport"].endswith(">")
    for n in range(4):
        result = shell.send(f"line {n}\n")
        assert result["wait_reason"] == "stdin_read", result
        assert result["viewport"].splitlines()[-2:] == ["highlighted", ">"], result["viewport"]
    shell.send("\x03")


READER_THREAD_REPL = """
import os, queue, threading, time

lines = queue.Queue()


def reader():
    while data := os.read(0, 1024):
        lines.put(data)


threading.Thread(target=reader, daemon=True).start()
print("calc> ", end="", flush=True)
while True:
    line = lines.get().decode().strip()
    time.sleep(0.3)  # its work on the line, while the reader thread is back in its read
    print(eval(line), flush=True)
    print("calc> ", end="", flush=True)
"""


def test_a_reader_threads_wait_is_not_the_answer_to_its_line(shell: Shell, tmp_path: Path) -> None:
    # jline in a JVM (jshell), a Go program's goroutine: a thread of its own reads the terminal all along while the
    # program works on a line elsewhere. The line is answered by its prompt drawn again.
    program = tmp_path / "repl.py"
    program.write_text(READER_THREAD_REPL)
    assert shell.send(f"python3 {program}\n")["viewport"].endswith("calc>")
    for expression, value in (("6*7", "42"), ("2**10", "1024")):
        result = shell.send(f"{expression}\n")
        assert result["wait_reason"] == "stdin_read", result
        assert result["viewport"].splitlines()[-3:] == [f"calc> {expression}", value, "calc>"], result["viewport"]
    shell.send("\x03")


@needs(shutil.which("jshell") is None, reason="jshell is not installed")
def test_jshell_answers_each_snippet_before_the_send_returns(shell: Shell) -> None:
    opened = shell.send("jshell\n", timeout_ms=60_000, idle_ms=60_000)  # a JVM's start prints nothing for seconds
    assert opened["viewport"].endswith("jshell>"), opened
    result = shell.send("int x = 6 * 7;\n", timeout_ms=60_000)
    assert result["viewport"].splitlines()[-4:] == ["jshell> int x = 6 * 7;", "x ==> 42", "", "jshell>"], result
    started = time.monotonic()
    result = shell.send("Thread.sleep(1000)\n", timeout_ms=60_000)
    assert time.monotonic() - started >= 1.0, result  # it waited for the snippet, not for jline's reader thread
    assert result["viewport"].splitlines()[-3:] == ["jshell> Thread.sleep(1000)", "", "jshell>"], result
    # A cancel presses Ctrl-C, which jline reads as a key (VINTR disabled, ISIG on): jshell stops the snippet. A
    # SIGINT to the group ended its execution engine, and every definition with it.
    assert shell.send("Thread.sleep(60000)\n", timeout_ms=1_000)["wait_reason"] == "timeout"
    assert shell.call("terminal_cancel")["key"] == "C-c"
    result = shell.send("x\n", timeout_ms=60_000)
    assert result["viewport"].splitlines()[-3:] == ["x ==> 42", "", "jshell>"], result
    assert shell.send("/exit\n", timeout_ms=60_000)["viewport"].endswith("$")
