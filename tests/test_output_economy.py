"""Output economy (``compact``): what an agent reads of a long output costs fewer tokens and keeps what matters,
while the transcript keeps every line. Real programs through a real daemon."""

from __future__ import annotations

from conftest import Daemon, Rpc, Shell

ERRORY = (
    'for i in $(seq 1 3000); do echo "compiling unit $i"; '
    "[ $i = 1200 ] && echo 'src/unit1200.c:7:3: error: expected ; before }'; done; echo built\n"
)


def test_identical_lines_fold_into_a_count_and_the_transcript_keeps_them(shell: Shell) -> None:
    result = shell.send("yes | head -8000\n", compact=True)
    lines = result["viewport"].splitlines()
    start = result["lines"]["start_line"]
    assert lines[1:3] == ["y", f"[... the line above 7999 more times: lines {start + 2}-{start + 8000} ...]"]
    assert lines[-1] == "$"
    assert result["compacted"] == 7999
    assert len(result["viewport"]) < 200
    plain = shell.send("yes | head -8000\n", compact=False)
    assert plain["compacted"] == 0
    assert plain["viewport"].count("\ny") > 1000  # without compact: every line as drawn, as before
    page = shell.call("terminal_read", start_line=start + 1, max_lines=5)
    assert page["lines"] == ["y"] * 5  # the transcript is untouched
    assert shell.send("yes | head -8000\n")["compacted"] == 7999  # an agent's send names nothing: compact


def test_the_operator_gets_plain_output_and_the_larger_budget(daemon: Daemon, rpc: Rpc) -> None:
    operator = (daemon.directory / "operator.token").read_text().strip()  # ptyctl's token: a person's
    s = Shell(rpc, operator, env={"PS1": "$ "})
    try:
        result = s.send("python3 -c \"print(('x' * 70 + chr(10)) * 600, end='')\"\n")  # 42.6 KB, all alike
        assert result["compacted"] == 0
        assert 30_000 < len(result["viewport"].encode()) <= 32 * 1024  # default_max_bytes, not agent_max_bytes
    finally:
        s.close()


def test_progress_lines_keep_their_final_state(shell: Shell) -> None:
    result = shell.send(
        'for p in $(seq 0 5 100); do echo "Downloading wheel: $p% (${p}0/1000 kB)"; done\n', compact=True
    )
    lines = result["viewport"].splitlines()
    assert lines[-3:] == [
        f"[... 20 lines like the next but for their numbers (progress): lines {result['lines']['start_line'] + 1}-"
        f"{result['lines']['start_line'] + 20} ...]",
        "Downloading wheel: 100% (1000/1000 kB)",
        "$",
    ]
    # A bar redrawn in place with carriage returns is one row on the rendered screen already.
    bar = shell.send(
        "for p in 10 50 100; do printf '\\r[%-10s] %d%%' $(printf '#%.0s' $(seq 1 $((p/10)))) $p; done; echo\n",
        compact=True,
    )
    assert bar["viewport"].splitlines()[1] == "[##########] 100%"


def test_a_cut_keeps_the_tail_and_the_errors_before_the_head(shell: Shell) -> None:
    compact = shell.send(ERRORY, compact=True, max_bytes=4096)
    assert compact["truncated"]
    lines = compact["viewport"].splitlines()
    assert "src/unit1200.c:7:3: error: expected ; before }" in lines
    assert lines[-2:] == ["built", "$"]
    assert len(compact["viewport"].encode()) <= 4096
    plain = shell.send(ERRORY, max_bytes=4096, compact=False)
    assert (
        "src/unit1200.c:7:3: error: expected ; before }" not in plain["viewport"].splitlines()
    )  # a plain cut loses it
    # Every marker names lines terminal_read returns.
    for line in lines:
        if line.startswith("[... ") and "omitted" in line:
            start = int(line.split("start_line=")[1].split()[0])
            count = int(line.split("max_lines=")[1].split()[0])
            page = shell.call("terminal_read", start_line=start, max_lines=count)
            assert len(page["lines"]) == count
            assert all(row.startswith("compiling unit") for row in page["lines"])


def test_background_output_is_compact_too(shell: Shell) -> None:
    shell.send("yes | head -3000; sleep 0.5; echo end\n", wait=False, compact=True)
    waited = shell.call("terminal_wait", timeout_ms=20_000)
    assert waited["done"]
    output = shell.call("terminal_output")["output"]
    assert "[... the line above" in output
    assert len(output) < 1000
