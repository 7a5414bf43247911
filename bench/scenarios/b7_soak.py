"""B7 soak: millions of claims streamed through dahl in flat memory without blocking the loop.

A seeded file of N claims (quick 200,000, full 5,000,000, and ``huge`` 10,000,000, run by
hand only; ``--claims N`` sets any other count; 10 per answer, written as a stream) is scored
by :func:`dahl.score_async` with ``splitter="given"``, ``checker="fake"`` and the cache off,
in a worker process (``python -m bench.scenarios.b7_soak --worker SPEC REPORT``): the fake
Checker costs almost nothing, so the engine itself (reader, pipeline, answer log, summary) is what is
soaked; an HTTP mock would dominate instead.

- Memory: the orchestrator samples the worker's ``VmRSS`` (``/proc/PID/status``) every
  ``RSS_INTERVAL_S``; figures: peak (target < 500 MiB) and growth = mean RSS over the last
  10 % of samples vs the first 10 % after start-up (samples 10-20 %: the first tenth is
  the interpreter importing and filling its pipeline). Flat memory gives a ratio near 1.
- Event-loop lag: :class:`bench.scenarios.common.LoopLag` (10 ms probe) runs inside the
  worker during ``score_async``; figure: p99 (target < 20 ms).
- Throughput: claims / the run's own elapsed seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench.scenarios.common import (
    REPO,
    Figure,
    LoopLag,
    ProgressSampler,
    ScenarioResult,
    peak_rss_mb,
    rounded,
    scenario_main,
)

NAME = "b7_soak"
#: Claims per size; ``huge`` is run by hand (``--size huge``), never by the suite.
CLAIMS = {"tiny": 20_000, "quick": 200_000, "full": 5_000_000, "huge": 10_000_000}
PER_ANSWER = 10
RSS_INTERVAL_S = 0.25
PEAK_TARGET_MB = 500.0
LAG_TARGET_MS = 20.0
SEED = 7

_TOPICS = "insulin receptor|p53 pathway|statin therapy|gut microbiome|HbA1c testing|mRNA vaccines".split("|")


def write_stream(path: Path, n_claims: int, seed: int = SEED) -> int:
    """Write ``n_claims`` unique pre-split claims as dahl JSONL, one answer at a time (flat memory).

    Returns:
        The number of claims written.
    """
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for a in range((n_claims + PER_ANSWER - 1) // PER_ANSWER):
            topic = rng.choice(_TOPICS)
            count = min(PER_ANSWER, n_claims - a * PER_ANSWER)
            claims = [f"Study {a}.{i} found that {topic} changes outcome {rng.randrange(1000)}." for i in range(count)]
            row = {
                "id": f"a{a}", "question": f"What is known about {topic}?", "response": " ".join(claims),
                "model": "soak", "claims": [{"text": c} for c in claims],
            }
            fh.write(json.dumps(row) + "\n")
    return n_claims


def vm_rss_mb(pid: int) -> float | None:
    """Resident set size of process ``pid`` in MiB (``VmRSS`` of /proc/PID/status), None if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        return None
    return None


async def _worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Score ``spec["answers"]`` with the fake Checker under the lag probe; the worker's report."""
    from dahl import AdapterSettings, RunCounters, ScoreConfig, score_async

    config = ScoreConfig(
        inputs=(Path(spec["answers"]),), out_dir=Path(spec["out_dir"]), n_boot=10, use_cache=False,
        adapters=AdapterSettings(splitter="given", checker="fake"),
    )
    counters = RunCounters()
    t0 = time.monotonic()
    async with LoopLag() as lag, ProgressSampler(lambda: counters.claims_done, interval_s=1.0) as progress:
        report = await score_async(config, counters=counters)
    run = report.summary.get("run", {})
    return {
        "claims_done": counters.claims_done,
        "claims_failed": counters.claims_failed,
        "wall_s": time.monotonic() - t0,
        "elapsed_s": run.get("elapsed_s"),
        "steady_rate": progress.steady_rate(counters.claims_done),
        "lag_samples": len(lag.samples_ms),
        "peak_rss_mb": peak_rss_mb(),
        **lag.summary(),
    }


def worker_main(argv: list[str]) -> int:
    """``--worker SPEC.json REPORT.json``: run :func:`_worker` and write its JSON report."""
    spec: dict[str, Any] = json.loads(Path(argv[0]).read_text())
    report = asyncio.run(_worker(spec))
    Path(argv[1]).write_text(json.dumps(report))
    return 0


def _labelled(path: Path) -> int:
    """Claims with a label in ``answers.jsonl`` (streamed)."""
    with path.open(encoding="utf-8") as fh:
        return sum(line.count('"label":') for line in fh)


async def run(size: str, workdir: Path, claims: int | None = None) -> ScenarioResult:
    """Run B7 at ``size`` (``claims`` claims instead when given); see the module docstring for the figures."""
    result = ScenarioResult(NAME, size)
    n = CLAIMS[size] if claims is None else claims
    answers = workdir / "answers.jsonl"
    await asyncio.to_thread(write_stream, answers, n)
    spec_path, report_path, out_dir = workdir / "spec.json", workdir / "report.json", workdir / "out"
    spec_path.write_text(json.dumps({"answers": str(answers), "out_dir": str(out_dir)}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.scenarios.b7_soak", "--worker", str(spec_path), str(report_path),
        cwd=REPO, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()
    while proc.returncode is None:
        now_mb = vm_rss_mb(proc.pid)
        if now_mb is not None:
            samples.append((time.monotonic() - t0, now_mb))
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), RSS_INTERVAL_S)
        except TimeoutError:
            pass
    _, err = await proc.communicate()
    if proc.returncode != 0 or not report_path.exists():
        raise RuntimeError(f"B7 worker failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    report: dict[str, Any] = json.loads(report_path.read_text())
    result.claims_in = n
    result.claims_out = await asyncio.to_thread(_labelled, out_dir / "answers.jsonl")

    rss = [r for _, r in samples]
    tenth = max(1, len(rss) // 10)
    # "First 10 %" = the second tenth of the samples: the first tenth is interpreter start-up.
    early = rss[tenth : 2 * tenth] or rss[:tenth]
    first, last = sum(early) / len(early), sum(rss[-tenth:]) / tenth
    peak = max(rss, default=None)
    elapsed = report.get("elapsed_s") or report["wall_s"]
    result.figures += [
        Figure.make("peak RSS MiB (VmRSS samples) vs 500 MiB", peak, PEAK_TARGET_MB, "<= 1.0"),
        Figure.make("RSS growth: mean of last 10 % vs 10-20 % of samples (MiB)", last, first),
        Figure.make("event-loop lag p99 ms vs 20 ms", report.get("lag_p99_ms"), LAG_TARGET_MS, "<= 1.0"),
        Figure.make("event-loop lag max ms", report.get("lag_max_ms")),
        Figure.make("claims/s (fake Checker, cache off)", report["claims_done"] / elapsed if elapsed else None),
        Figure.make("peak RSS MiB (worker VmHWM)", report.get("peak_rss_mb")),
    ]
    result.runs = rounded({
        "worker": report, "rss_samples": len(rss), "rss_first_mb": first, "rss_last_mb": last,
        # A thinned series (≤ 200 points) to see the shape: [seconds, MiB].
        "rss_series": [[round(t, 2), round(r, 1)] for t, r in samples[:: max(1, len(samples) // 200)]],
    })
    result.notes.append(f"{n:,} claims, {PER_ANSWER} per answer; RSS sampled every {RSS_INTERVAL_S} s.")
    return result


def main() -> int:
    """``python -m bench.scenarios.b7_soak --size quick [--claims N] --json out.json`` (or ``--worker SPEC REPORT``)."""
    if sys.argv[1:2] == ["--worker"]:
        return worker_main(sys.argv[2:4])
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--claims", type=int, help="claims to score instead of the size's count")
    known, rest = extra.parse_known_args()
    return scenario_main(NAME, functools.partial(run, claims=known.claims), rest, sizes=tuple(CLAIMS))


if __name__ == "__main__":
    sys.exit(main())
