"""B10 client CPU per request: dahl vs the bare aiohttp loop against a zero-latency mock on a core of its own.

The mock (no latency, no limits) is pinned to one CPU with ``os.sched_setaffinity`` and the
client worker to another (this orchestrator pins itself there and the worker inherits it),
so each has one core and neither takes the other's. The clients are B1's: dahl's
``score_async`` and the bare loop, C = 64 in flight, the same request bodies, runs
interleaved (dahl, bare, dahl, bare...). Figures:

- client CPU ms per request (user + system CPU seconds of the worker during the run, from
  its own ``getrusage``, ÷ requests the mock received), dahl ÷ bare, target ≤ 1.3; the
  lowest of each client's runs (contention only adds CPU);
- each client's core busy share (client CPU s ÷ wall s): near 1.0 means the client bounds
  the rate; and the mock's (mock CPU s ÷ wall s): near 1.0 means the mock does, and a
  client waiting for replies spends more CPU per request than a saturated one.

On a machine with one CPU nothing is pinned (stated in the notes).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from bench.scenarios.b1_overhead import CONCURRENCY, cpu_ms_per_request
from bench.scenarios.common import (
    Figure,
    ScenarioResult,
    measured_run,
    rounded,
    scenario_main,
    write_answers,
)

NAME = "b10_cpu"
REPEATS = {"tiny": 1, "quick": 2, "full": 3}
CLAIMS = {"tiny": 300, "quick": 5000, "full": 30000}


def _cores() -> tuple[set[int], set[int]] | None:
    """(mock CPUs, client CPUs): the first and the last CPU this process may use; None on one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    return ({cpus[0]}, {cpus[-1]}) if len(cpus) >= 2 else None


def _share(cpu: Any, wall: Any) -> float | None:
    return cpu / wall if isinstance(cpu, float) and isinstance(wall, float) and wall > 0 else None


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B10 at ``size``; see the module docstring for the figures."""
    answers = workdir / "answers.jsonl"
    write_answers(answers, CLAIMS[size], seed=1)
    result = ScenarioResult(NAME, size)
    cores = _cores()
    before = os.sched_getaffinity(0)
    runs: dict[str, list[dict[str, Any]]] = {"dahl": [], "bare": []}
    try:
        if cores is not None:
            os.sched_setaffinity(0, cores[1])
        for _ in range(REPEATS[size]):
            for kind, reports in runs.items():
                reports.append(await measured_run(
                    kind, answers, [], concurrency=CONCURRENCY, workdir=workdir,
                    mock_cpus=None if cores is None else cores[0],
                ))
    finally:
        os.sched_setaffinity(0, before)
    for r in runs["dahl"]:
        result.add_dahl_run(r)
    best = {kind: min(reports, key=lambda r: cpu_ms_per_request(r) or float("inf")) for kind, reports in runs.items()}
    result.runs = rounded({**best, "dahl_all": runs["dahl"], "bare_all": runs["bare"]})
    result.notes.append(
        f"lowest CPU ms/request of {REPEATS[size]} interleaved runs per client; "
        + (f"mock pinned to CPU {min(cores[0])}, client to CPU {min(cores[1])}." if cores else "one CPU: nothing pinned.")
    )
    result.figures.append(Figure.make(
        "client CPU ms per request, dahl vs bare aiohttp loop",
        cpu_ms_per_request(best["dahl"]), cpu_ms_per_request(best["bare"]), "<= 1.3",
    ))
    for kind, r in best.items():
        result.figures += [
            Figure.make(f"client core busy share during {kind} run", _share(r.get("cpu_s"), r.get("wall_s"))),
            Figure.make(f"mock core busy share during {kind} run", _share(r.get("mock_cpu_s"), r.get("wall_s"))),
        ]
    result.figures.append(Figure.make("req/s, dahl vs bare (pinned)", best["dahl"].get("requests_per_s"), best["bare"].get("requests_per_s")))
    return result


def main() -> int:
    """``python -m bench.scenarios.b10_cpu --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
