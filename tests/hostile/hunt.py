"""Hunt for output that crashes or hangs an engine, and minimise what it finds (not a test: a tool).

    .venv/bin/python tests/hostile/hunt.py --mode engine --seconds 300 [--first-seed 0]

Each seed is a soup (``soup.py``) cut into a few chunks, each written at one of the sizes below (a resize between
two chunks of different sizes), through a probe process (``probe.py``). A crashing case is minimised by delta
debugging (whole pieces first, then bytes, then fewer steps and smaller sizes) while it still hits the same thing,
and printed as a ``Case`` for ``cases.py``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]

from hostile.probe import Outcome, Runner, Step  # noqa: E402
from hostile.soup import PIECES, piece  # noqa: E402

SIZES = ((160, 40), (80, 24), (500, 100), (1, 1), (2, 500))
T = TypeVar("T")


def seeded_case(
    seed: int, pieces: int = 30, sizes: Sequence[tuple[int, int]] = SIZES
) -> list[tuple[int, int, list[bytes]]]:
    """Steps of pieces: the size of each step, and its pieces (kept apart so that minimising drops whole ones)."""
    rng = random.Random(seed)
    size = rng.choice(sizes)
    steps: list[tuple[int, int, list[bytes]]] = [(*size, [])]
    for _ in range(pieces):
        if rng.random() < 0.15:
            size = rng.choice(sizes)
            steps.append((*size, []))
        steps[-1][2].append(piece(rng.randrange(len(PIECES)), rng.getrandbits(32)))
    return steps


def flat(steps: Sequence[tuple[int, int, Sequence[bytes]]]) -> list[Step]:
    return [(c, r, b"".join(parts)) for c, r, parts in steps]


def ddmin(items: list[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """Zeller's delta debugging: a 1-minimal sublist of ``items`` that still ``fails``."""
    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        subsets = [items[i : i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for i in range(len(subsets)):
            complement = [x for j, s in enumerate(subsets) if j != i for x in s]
            if fails(complement):
                items, n, reduced = complement, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    return items


def minimise(runner: Runner, pieces: list[tuple[int, int, list[bytes]]], hit: str) -> list[Step]:
    kind = hit.split(":")[0] + ":" + hit.split(":")[1] if hit.startswith("panic") else hit.split(":")[0]

    def fails(candidate: list[Step]) -> bool:
        if not candidate or not any(d for _, _, d in candidate):
            return False
        outcome = runner.run(candidate)
        return outcome.hit is not None and outcome.hit.startswith(kind)

    atoms = [(i, p) for i, (_, _, parts) in enumerate(pieces) for p in parts]

    def build(kept: list[tuple[int, bytes]]) -> list[Step]:
        return [(c, r, b"".join(p for j, p in kept if j == i)) for i, (c, r, _) in enumerate(pieces)]

    steps = build(ddmin(atoms, lambda kept: fails(build(kept))))  # whole pieces
    steps = ddmin(steps, fails)  # whole steps (and their resizes)
    for i in range(len(steps)):  # the bytes of each step
        data = ddmin(
            list(steps[i][2]), lambda b, i=i: fails([*steps[:i], (steps[i][0], steps[i][1], bytes(b)), *steps[i + 1 :]])
        )
        steps[i] = (steps[i][0], steps[i][1], bytes(data))
    steps = [s for s in steps if s[2]] if fails([s for s in steps if s[2]]) else steps
    for i in range(len(steps)):  # a smaller size where one still hits it
        for cols, rows in sorted(
            {(steps[i][0], steps[i][1]), *SIZES, (80, 24), (40, 10), (10, 3)}, key=lambda s: s[0] * s[1]
        ):
            trial = [*steps[:i], (cols, rows, steps[i][2]), *steps[i + 1 :]]
            if cols * rows < steps[i][0] * steps[i][1] and fails(trial):
                steps = trial
                break
    return steps


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="engine", choices=["raw", "engine", "pyte"])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--pieces", type=int, default=30)
    parser.add_argument("--sizes", default="", help="e.g. 160x40,80x24 (default: all five, with resizes)")
    args = parser.parse_args()
    sizes = [tuple(map(int, s.split("x"))) for s in args.sizes.split(",")] if args.sizes else SIZES
    runner = Runner(args.mode)
    deadline = time.monotonic() + args.seconds
    seed, found, slowest = args.first_seed, 0, Outcome(None, 0.0)
    hits: dict[str, int] = {}
    try:
        while time.monotonic() < deadline:
            pieces = seeded_case(seed, args.pieces, sizes)  # type: ignore[arg-type]
            steps = flat(pieces)
            outcome = runner.run(steps)
            if outcome.seconds > slowest.seconds:
                slowest = outcome
                print(f"# seed {seed}: slowest so far {outcome.seconds:.2f} s", flush=True)
            if outcome.hit is not None:
                found += 1
                hits[outcome.hit] = hits.get(outcome.hit, 0) + 1
                small = minimise(runner, pieces, outcome.hit)
                again = runner.run(small)
                print(f"# seed {seed}: {outcome.hit} -> minimal: {again.hit}", flush=True)
                print(f"Case({f'seed{seed}'!r}, {again.hit!r}, {small!r}),", flush=True)
            seed += 1
    finally:
        runner.close()
    print(f"# {seed - args.first_seed} seeds, {found} hits: {hits}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
