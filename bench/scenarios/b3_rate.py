"""B3 rate-bound: the mock enforces RPM/TPM windows with 429 + Retry-After + x-ratelimit headers.

Mock latency 200 ms and C = 64 in flight, so in-flight / latency = 320/s is far above the
rate limits and the bound of every run is the limit itself:
bound = min(RPM, TPM / tokens per request, in-flight / latency).

- (a) ``rpm``: 600 RPM in 1-second windows (10 requests per window), the same limit
  configured on the client (issue 3: ≥ 5,000 claims in the full run, ≥ 0.90 of the limit,
  ≤ 1 % of requests answered 429);
- (b) ``tpm``: a TPM limit worth 600 requests per minute at the mock's token count of these
  requests (prompt estimate + max_tokens), configured on the client; 1-second windows in
  quick mode, 60-second windows in the full run;
- (c) ``learn``: as (a) but nothing configured on the client: limits are learnt from the
  x-ratelimit headers and 429s; target ≤ 5 % of requests answered 429.

Burst check ("no burst above one second of rate after a pause"): the orchestrator samples
the mock's admitted count every 0.1 s; the figure is the most requests admitted in any
1-second span ÷ the requests one second of the limit allows. Sampling at 0.1 s can miss
up to one sample period of a span, so the target allows 10 % over.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.mock_reply import parse_prompt
from bench.scenarios.clients import load_bodies
from bench.scenarios.common import (
    Figure,
    ScenarioResult,
    max_window_count,
    measured_run,
    rounded,
    scenario_main,
    write_answers,
)

NAME = "b3_rate"
CONCURRENCY = 64
RPM = 600
LATENCY_MS = 200
CLAIMS = {
    "rpm": {"tiny": 30, "quick": 250, "full": 5000},
    "tpm": {"tiny": 30, "quick": 150, "full": 2400},
    "learn": {"tiny": 30, "quick": 200, "full": 2000},
}


def tokens_per_request(answers: Path) -> float:
    """Mean tokens the mock charges per check request of ``answers`` (prompt estimate + max_tokens)."""
    bodies = load_bodies(answers, "http://127.0.0.1:1/v1")
    costs = [(p := parse_prompt(b)).prompt_tokens + p.max_tokens for b in bodies]
    return sum(costs) / len(costs)


def _burst(run: dict[str, Any], per_s: float, span_s: float = 1.0) -> float | None:
    """Most requests the mock admitted in any ``span_s`` seconds ÷ one second of the limit."""
    series = [(float(t), int(n)) for t, n in run.get("admitted_series", [])]
    return max_window_count(series, span_s) / per_s if series else None


def _achieved_per_min(run: dict[str, Any]) -> float | None:
    rate = run.get("steady_rate")
    return float(rate) * 60.0 if isinstance(rate, float) else None


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B3 at ``size``; see the module docstring for the figures."""
    result = ScenarioResult(NAME, size)
    per_s = RPM / 60.0
    window = ["--window-s", "1", "--latency-ms", str(LATENCY_MS)]

    answers = workdir / "rpm.jsonl"
    write_answers(answers, CLAIMS["rpm"][size], seed=5)
    rpm = await measured_run(
        "dahl", answers, ["--rpm", str(RPM), *window], concurrency=CONCURRENCY, rpm=RPM, poll=True, workdir=workdir
    )

    answers = workdir / "tpm.jsonl"
    write_answers(answers, CLAIMS["tpm"][size], seed=6)
    cost = tokens_per_request(answers)
    tpm_limit = round(RPM * cost)
    tpm_window = "60" if size == "full" else "1"
    tpm = await measured_run(
        "dahl", answers, ["--tpm", str(tpm_limit), "--window-s", tpm_window, "--latency-ms", str(LATENCY_MS)],
        concurrency=CONCURRENCY, tpm=tpm_limit, poll=True, workdir=workdir,
    )

    answers = workdir / "learn.jsonl"
    write_answers(answers, CLAIMS["learn"][size], seed=7)
    learn = await measured_run(
        "dahl", answers, ["--rpm", str(RPM), *window], concurrency=CONCURRENCY, poll=True, workdir=workdir
    )

    for r in (rpm, tpm, learn):
        result.add_dahl_run(r)
    tpm_bound = tpm_limit / cost  # requests per minute
    result.runs = rounded({"rpm": rpm, "tpm": tpm, "learn": learn, "tpm_limit": tpm_limit, "tokens_per_request": cost})
    result.figures += [
        Figure.make("(a) achieved RPM vs 600 RPM (1 s windows, client rpm=600)", _achieved_per_min(rpm), float(RPM), ">= 0.90"),
        Figure.make("(a) share of requests answered 429", rpm.get("share_429"), None, "<= 0.01"),
        Figure.make("(a) max admitted in any 1 s / 1 s of rate", _burst(rpm, per_s), None, "<= 1.1"),
        Figure.make(f"(b) achieved RPM vs TPM bound ({tpm_window} s windows, client tpm)", _achieved_per_min(tpm), tpm_bound, ">= 0.90"),
        Figure.make("(b) share of requests answered 429", tpm.get("share_429"), None, "<= 0.01"),
        Figure.make("(c) achieved RPM vs 600 RPM, limits learnt from headers", _achieved_per_min(learn), float(RPM)),
        Figure.make("(c) share of requests answered 429 while learning", learn.get("share_429"), None, "<= 0.05"),
        Figure.make("(c) max admitted in any 1 s / 1 s of rate (after 429 pauses)", _burst(learn, per_s), None, "<= 1.1"),
        Figure.make("(a) max admitted in any 0.2 s / 1 s of rate (burst size)", _burst(rpm, per_s, 0.2), None, "<= 1.1"),
        Figure.make("(c) max admitted in any 0.2 s / 1 s of rate (burst size)", _burst(learn, per_s, 0.2), None, "<= 1.1"),
    ]
    result.notes.append(
        f"(b) TPM limit {tpm_limit} tokens/min = 600 requests/min x {cost:.1f} tokens per request "
        f"(mock count: ceil(chars/4) + max_tokens); bound = TPM / tokens per request = {tpm_bound:.0f} RPM."
    )
    result.notes.append("achieved rate = claims done between 10 % and 90 % of the run, per minute (warm-up and drain excluded).")
    return result


def main() -> int:
    """``python -m bench.scenarios.b3_rate --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
