"""B9 shards: 4 ``dahl score --shard i/4`` processes on one machine against one account's limits.

A real ``redis-server`` runs on a free loopback port (the scenario reports one skipped row when
the binary or the ``redis`` package is missing). Each run starts a fresh mock process and the 4
shard processes at once (given Splitter, openai Checker on the mock, a cache folder per shard),
and samples the mock's admitted count (``/stats``: requests - 429s - in flight) every 0.1 s.

- (a) ``coord``: the mock enforces one global 600 RPM in 1-second windows (429 + Retry-After,
  latency 200 ms); every shard runs with ``--rpm 600 --coord redis://...?run=NAME``, so only the
  shared bucket in Redis keeps the 4 together under the limit. Figures: achieved RPM (the mock's
  admitted count between 10 % and 90 % of the run's requests, per minute) ÷ 600 (target ≥ 0.90)
  and the share of requests answered 429 (target ≤ 1 %).
- (b) ``static``: the same without ``--coord``, each shard ``--rpm 600`` and pacing at its
  static share, 150 (``--shard i/4`` takes 1/4): a shard whose answers run out leaves its share unused.
- (c) ``tpm``: a TPM limit worth 600 requests per minute (1-second windows), every shard with the
  whole ``--tpm`` and ``--coord``.
- (d) single flight: every answer is the same (one set of distinct claims, ids apart), so every
  shard holds every claim; mock latency 500 ms, no limit, ``--coord``: upstream check calls =
  distinct claims (each claim checked once, by the shard that takes its lease).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench.redis_server import RedisServer, redis_missing
from bench.scenarios.b3_rate import tokens_per_request
from bench.scenarios.b5_crash import dahl_command
from bench.scenarios.common import (
    REPO,
    Figure,
    MockProcess,
    ScenarioResult,
    rounded,
    scenario_main,
    share_429,
    steady_rate,
    write_answers,
)

NAME = "b9_shards"
SHARDS = 4
RPM = 600
LATENCY_MS = 200
IN_FLIGHT = 16
#: Claims per rate-bound run (5 per answer), and (answers, claims per answer) of the single-flight run, per size.
CLAIMS = {"tiny": 40, "quick": 60, "full": 3000}
SINGLE = {"tiny": (8, 5), "quick": (40, 20), "full": (200, 50)}


def write_identical(path: Path, answers: int, per_answer: int) -> int:
    """``answers`` answers with the same question, response and ``per_answer`` claims, ids ``s0``...; distinct claims."""
    write_answers(path, per_answer, per_answer=per_answer, seed=9)
    row = json.loads(path.read_text())
    path.write_text("".join(json.dumps({**row, "id": f"s{i}"}) + "\n" for i in range(answers)))
    return per_answer


async def shard_run(answers: Path, workdir: Path, label: str, mock_args: list[str], extra: list[str],
                    coord: str | None) -> dict[str, Any]:
    """Run the 4 shards of ``answers`` at once against a fresh mock; mock counters and shard outcomes.

    Returns:
        ``{"mock", "steady_rpm", "share_429", "wall_s", "returncodes", "claims_out", "series"}``;
        ``steady_rpm`` is the mock's admitted count per minute between 10 % and 90 % of it.
    """
    run_name = f"b9-{label}-{time.time_ns()}"
    async with MockProcess(mock_args) as mock:
        outs = [workdir / f"{label}-shard{i}" for i in range(SHARDS)]
        argvs = []
        for i, out in enumerate(outs):
            argv = [*dahl_command(answers, out, workdir / f"{label}-cache{i}", mock.url), "--max-in-flight",
                    str(IN_FLIGHT), "--shard", f"{i}/{SHARDS}", *extra]
            if coord is not None:
                argv += ["--coord", f"{coord}?run={run_name}"]
            argvs.append(argv)
        series: list[tuple[float, int]] = []
        t0 = time.monotonic()
        procs = [await asyncio.create_subprocess_exec(*a, cwd=REPO, stdout=asyncio.subprocess.DEVNULL,
                                                      stderr=asyncio.subprocess.PIPE) for a in argvs]
        waits = asyncio.gather(*(p.communicate() for p in procs))
        while not waits.done():
            stats = await mock.stats()
            series.append((time.monotonic() - t0, int(stats["requests"]) - int(stats["status"].get("429", 0))
                           - int(stats["in_flight"])))
            await asyncio.wait([waits], timeout=0.1)
        errs = [err.decode(errors="replace")[-400:] for _, err in await waits]
        wall = time.monotonic() - t0
    final = mock.final
    admitted = series[-1][1] if series else 0
    rate = steady_rate(series, admitted)
    claims_out = 0
    for out in outs:
        path = out / "answers.jsonl"
        if path.exists():
            claims_out += sum(1 for line in path.read_text().splitlines()
                              for c in json.loads(line)["claims"] if c.get("label"))
    return {
        "mock": final, "steady_rpm": None if rate is None else rate * 60.0, "share_429": share_429(final),
        "wall_s": wall, "returncodes": [p.returncode for p in procs], "claims_out": claims_out,
        "stderr": [e for e, p in zip(errs, procs, strict=True) if p.returncode], "admitted": admitted,
    }


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B9 at ``size``; see the module docstring for the figures."""
    result = ScenarioResult(NAME, size)
    missing = redis_missing()
    if missing is not None:
        result.figures.append(Figure.make(f"skipped: {missing}", None))
        return result
    answers = workdir / "answers.jsonl"
    n = write_answers(answers, CLAIMS[size], per_answer=5, seed=9)
    window = ["--window-s", "1", "--latency-ms", str(LATENCY_MS)]
    cost = tokens_per_request(answers)
    tpm_limit = round(RPM * cost)
    single = workdir / "single.jsonl"
    n_answers, per_answer = SINGLE[size]
    distinct = write_identical(single, n_answers, per_answer)
    redis = await asyncio.to_thread(RedisServer, shutil.which("redis-server") or "redis-server")
    try:
        coord = await shard_run(answers, workdir, "coord", ["--rpm", str(RPM), *window], ["--rpm", str(RPM)], redis.url)
        static = await shard_run(answers, workdir, "static", ["--rpm", str(RPM), *window], ["--rpm", str(RPM)], None)
        tpm = await shard_run(answers, workdir, "tpm", ["--tpm", str(tpm_limit), *window], ["--tpm", str(tpm_limit)],
                              redis.url)
        flight = await shard_run(single, workdir, "single", ["--latency-ms", "500"], [], redis.url)
    finally:
        redis.kill()
    for r in (coord, static, tpm):
        result.claims_in += n
        result.claims_out += r["claims_out"]
    result.claims_in += n_answers * per_answer
    result.claims_out += flight["claims_out"]
    result.runs = rounded({"coord": coord, "static": static, "tpm": tpm, "single_flight": flight,
                           "tpm_limit": tpm_limit, "tokens_per_request": cost})
    result.figures += [
        Figure.make(f"(a) achieved RPM vs 600, {SHARDS} shards --coord (each --rpm 600)", coord["steady_rpm"],
                    float(RPM), ">= 0.90"),
        Figure.make("(a) share of requests answered 429", coord["share_429"], None, "<= 0.01"),
        Figure.make(f"(b) achieved RPM vs 600, {SHARDS} shards, static split (each --rpm {RPM}, paced at 1/{SHARDS})",
                    static["steady_rpm"], float(RPM)),
        Figure.make("(b) share of requests answered 429", static["share_429"], None, "<= 0.01"),
        Figure.make(f"(a/b) wall s, --coord vs static split ({n} claims)", coord["wall_s"], static["wall_s"]),
        Figure.make("(c) achieved RPM vs TPM bound (1 s windows, each shard --tpm, --coord)", tpm["steady_rpm"],
                    tpm_limit / cost, ">= 0.90"),
        Figure.make("(c) share of requests answered 429", tpm["share_429"], None, "<= 0.01"),
        Figure.make(f"(d) single flight: upstream check calls vs distinct claims ({n_answers} identical answers "
                    f"over {SHARDS} shards)", float(flight["mock"].get("requests", 0)), float(distinct), "<= 1.0"),
    ]
    result.notes.append(
        "achieved RPM = the mock's admitted requests between 10 % and 90 % of the run's admitted count, per minute; "
        f"(c) TPM limit {tpm_limit} = 600 x {cost:.1f} tokens per request."
    )
    return result


def main() -> int:
    """``python -m bench.scenarios.b9_shards --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
