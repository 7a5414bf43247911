"""B1 engine overhead: dahl vs a bare aiohttp worker loop on a zero-latency mock.

Both clients send the same check request bodies (``check_request_body``) with the same
connector limits (``limit = limit_per_host = C``, C = 64 in flight), each in a fresh
process against a fresh mock process. Figures (issue 5):

- dahl req/s ÷ bare req/s (requests the mock received ÷ client wall seconds), target ≥ 0.85;
- CPU seconds per 1,000 requests of each client process (``getrusage``), informational;
- how busy the mock's core was (mock CPU seconds ÷ client wall seconds): near 1.0 means the
  mock, not the client, bounds the rate.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.scenarios.common import Figure, ScenarioResult, measured_run, rounded, scenario_main, write_answers

NAME = "b1_overhead"
CONCURRENCY = 64
REPEATS = {"tiny": 1, "quick": 2, "full": 3}
CLAIMS = {"tiny": 300, "quick": 5000, "full": 50000}


def cpu_ms_per_request(run: dict[str, object]) -> float | None:
    """Client CPU ms per request the mock received (= CPU s per 1,000 requests); None without requests."""
    requests = int(run["mock"]["requests"]) if isinstance(run.get("mock"), dict) else 0  # type: ignore[index]
    cpu = run.get("cpu_s")
    return 1000.0 * float(cpu) / requests if requests and isinstance(cpu, float) else None


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B1 at ``size``; see the module docstring for the figures."""
    answers = workdir / "answers.jsonl"
    write_answers(answers, CLAIMS[size], seed=1)
    result = ScenarioResult(NAME, size)
    # Interleaved repeats, best of each: the machine may be shared, and noise only slows runs.
    dahls: list[dict[str, Any]] = []
    bares: list[dict[str, Any]] = []
    for _ in range(REPEATS[size]):
        dahls.append(await measured_run("dahl", answers, [], concurrency=CONCURRENCY, workdir=workdir))
        bares.append(await measured_run("bare", answers, [], concurrency=CONCURRENCY, workdir=workdir))
    for r in dahls:
        result.add_dahl_run(r)
    dahl = max(dahls, key=lambda r: r.get("requests_per_s") or 0.0)
    bare = max(bares, key=lambda r: r.get("requests_per_s") or 0.0)
    result.runs = rounded({"dahl": dahl, "bare": bare, "dahl_all": dahls, "bare_all": bares})
    result.notes.append(f"best of {REPEATS[size]} interleaved runs per client (req/s of every run under runs.*_all).")
    result.figures += [
        Figure.make("req/s, dahl vs bare aiohttp loop", dahl.get("requests_per_s"), bare.get("requests_per_s"), ">= 0.85"),
        Figure.make("steady claims/s (10-90 %), dahl vs bare", dahl.get("steady_rate"), bare.get("steady_rate")),
        Figure.make("CPU s per 1k requests, dahl vs bare", cpu_ms_per_request(dahl), cpu_ms_per_request(bare)),
        Figure.make("peak RSS MiB, dahl vs bare", dahl.get("peak_rss_mb"), bare.get("peak_rss_mb")),
        Figure.make("event-loop lag p99 ms, dahl", dahl.get("lag_p99_ms")),
    ]
    for name, r in (("dahl", dahl), ("bare", bare)):
        wall, mock_cpu = r.get("wall_s"), r.get("mock_cpu_s")
        if isinstance(wall, float) and isinstance(mock_cpu, float) and wall > 0:
            busy = mock_cpu / wall
            result.figures.append(Figure.make(f"mock CPU busy share during {name} run", busy))
            verdict = "the mock is the bottleneck" if busy >= 0.9 else "the mock is not saturated"
            result.notes.append(f"{name} run: mock process used {busy:.0%} of one core ({verdict}).")
    return result


def main() -> int:
    """``python -m bench.scenarios.b1_overhead --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
