"""On CI (CI set) a skipped test fails unless its skip is expected: the claims gated on installed tools, kernel
features and cgroup controllers must run there."""

from __future__ import annotations

import pytest

from conftest import EXPECTED, missing_program_skip, on_ci, unverified_on_ci


def report(outcome: str, longrepr: object) -> pytest.TestReport:
    return pytest.TestReport("t.py::t", ("t.py", 1, "t"), {}, outcome, longrepr, "setup")  # type: ignore[arg-type]


def test_a_skip_for_a_missing_program_is_recognised() -> None:
    skipped = report("skipped", ("tests/test_relays.py", 44, "Skipped: mc is not installed"))
    assert missing_program_skip(skipped) == "Skipped: mc is not installed"


def test_other_skips_and_outcomes_are_left_alone() -> None:
    assert missing_program_skip(report("skipped", ("t.py", 1, "Skipped: Ghostty's history only"))) is None
    assert missing_program_skip(report("passed", None)) is None
    assert missing_program_skip(report("failed", "mc is not installed")) is None


def test_every_skip_but_an_expected_one_is_unverified_on_ci() -> None:
    missing = unverified_on_ci(report("skipped", ("t.py", 1, "Skipped: mc is not installed")))
    assert missing is not None
    assert "install list" in missing
    kernel = unverified_on_ci(report("skipped", ("t.py", 1, "Skipped: no writable pids controller here")))
    assert kernel is not None
    assert "skip_expected" in kernel
    assert unverified_on_ci(report("skipped", ("t.py", 1, f"Skipped: {EXPECTED}Ghostty's history only"))) is None
    assert unverified_on_ci(report("passed", None)) is None


@pytest.mark.parametrize(("value", "ci"), [("", False), ("0", False), ("false", False), ("true", True), ("1", True)])
def test_ci_is_the_ci_variable(monkeypatch: pytest.MonkeyPatch, value: str, ci: bool) -> None:
    monkeypatch.setenv("CI", value)
    assert on_ci() is ci
