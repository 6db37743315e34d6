"""The regression cases are what they say: each panic case still hits its panic in pyghostty 0.1.3 (pinned), in a
process of its own, so the daemon's tests in ``test_hostile_output.py`` drive output that does crash the native
engine. ptyd's own engine bugs found the same way stay fixed. (The stall case is timed, so it is only a daemon
regression case.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hostile.cases import CASES, PANIC, Case, daemon_steps
from hostile.probe import Runner
from ptyd.terminal.emulator import native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="the native engine does not import here")
PANICS = [case for case in CASES if case.hit == PANIC]
FIXED = [case for case in CASES if case.hit.startswith("exit")]


@pytest.fixture(scope="module", params=["raw"])
def runner(request: pytest.FixtureRequest) -> Iterator[Runner]:
    r = Runner(request.param)
    yield r
    r.close()


@pytest.mark.parametrize("case", PANICS, ids=[case.name for case in PANICS])
def test_cases_still_hit_what_they_hit(runner: Runner, case: Case) -> None:
    outcome = runner.run(daemon_steps(case))
    assert outcome.hit == case.hit, f"{case.name} no longer crashes {runner.mode}: update docs/hostile-output.md"


@pytest.mark.parametrize("case", FIXED, ids=[case.name for case in FIXED])
def test_ptyd_engine_bugs_stay_fixed(case: Case) -> None:
    r = Runner("engine")
    try:
        assert r.run(daemon_steps(case)).hit is None
    finally:
        r.close()
