"""B2 latency-bound: C = 200 requests in flight, no rate limit, slow replies.

Two runs, each a fresh dahl worker process against a fresh mock:

- lognormal latency, median 1 s, sigma 0.5: the bound is C / mean latency by Little's law,
  mean = median·exp(σ²/2) = 1.133 s, so 200 / 1.133 = 176.5 claims/s (the issue's
  C / median = 200/s would ask for more than physically possible); target ≥ 0.95;
- fixed 1 s latency (issue 3 acceptance): bound 200 claims/s, target ≥ 0.90.

Throughput is measured after warm-up: claims done between 10 % and 90 % of the run
(in-process progress samples every 0.1 s), which also drops the drain at the end.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from bench.scenarios.common import Figure, ScenarioResult, measured_run, rounded, scenario_main, write_answers

NAME = "b2_latency"
CONCURRENCY = 200
MEDIAN_MS = 1000.0
SIGMA = 0.5
CLAIMS = {"tiny": 300, "quick": 2000, "full": 20000}
FIXED_CLAIMS = {"tiny": 300, "quick": 2000, "full": 10000}


def lognormal_mean_s(median_ms: float, sigma: float) -> float:
    """Mean of a lognormal with this median (ms) and shape, seconds: median·exp(σ²/2)."""
    return median_ms / 1000.0 * math.exp(sigma * sigma / 2.0)


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B2 at ``size``; see the module docstring for the figures."""
    result = ScenarioResult(NAME, size)
    answers = workdir / "answers.jsonl"
    write_answers(answers, CLAIMS[size], seed=2)
    lognormal = await measured_run(
        "dahl", answers, ["--latency", f"lognormal:{MEDIAN_MS:g}:{SIGMA:g}", "--seed", "2"],
        concurrency=CONCURRENCY, workdir=workdir,
    )
    fixed_answers = workdir / "answers_fixed.jsonl"
    write_answers(fixed_answers, FIXED_CLAIMS[size], seed=3)
    fixed = await measured_run(
        "dahl", fixed_answers, ["--latency-ms", f"{MEDIAN_MS:g}"], concurrency=CONCURRENCY, workdir=workdir
    )
    for r in (lognormal, fixed):
        result.add_dahl_run(r)
    bound = CONCURRENCY / lognormal_mean_s(MEDIAN_MS, SIGMA)
    result.runs = rounded({"lognormal": lognormal, "fixed": fixed, "lognormal_bound_per_s": bound})
    result.figures += [
        Figure.make("steady claims/s, lognormal 1 s, C=200 vs C/mean", lognormal.get("steady_rate"), bound, ">= 0.95"),
        Figure.make("steady claims/s, fixed 1 s, C=200 vs 200/s", fixed.get("steady_rate"), CONCURRENCY / 1.0, ">= 0.90"),
        Figure.make("end-to-end claims/s, lognormal (incl. warm-up, drain)", lognormal.get("claims_per_s"), bound),
        Figure.make("event-loop lag p99 ms, dahl (lognormal run)", lognormal.get("lag_p99_ms")),
        Figure.make("peak in flight at the mock (lognormal run)", float(lognormal["mock"].get("in_flight_max", 0)), float(CONCURRENCY)),
    ]
    result.notes.append(
        f"bound = C / mean latency = {CONCURRENCY} / {lognormal_mean_s(MEDIAN_MS, SIGMA):.3f} s = {bound:.1f}/s "
        f"(lognormal mean = median·exp(σ²/2), σ = {SIGMA})."
    )
    return result


def main() -> int:
    """``python -m bench.scenarios.b2_latency --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
