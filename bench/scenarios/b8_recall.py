"""B8 recall: coverage of N answers × 20 reference facts by the LLM judge against the mock at 1 s latency.

Steps (one mock process with fixed 1 s latency for all runs, so the base URL, part of
every coverage cache key, stays the same; requests per run are ``/stats`` differences):

1. Write N seeded answers with given, labelled claims (replayed: no check requests) and
   a refs.jsonl of 20 facts per question (quick 2,000 answers, full 10,000).
2. ``dahl score --splitter given --checker replay --refs refs.jsonl --coverage openai``
   with C = 200 requests in flight. Every answer's 20 facts fit one call (≤ 30), so the
   requests must equal the unique (answer, fact batch) pairs = N. Throughput: coverage
   calls/s between 10 % and 90 % of the calls (the mock's ``cover`` count sampled every
   0.1 s), against the bound C / latency = 200/s (Little's law, as B2); target ≥ 0.90.
3. Edit the response of every 100th answer (1 %) and re-score into a fresh output folder
   with the same cache: the requests must equal the edited answers exactly (every other
   answer's facts are coverage-cache hits).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench.scenarios.common import (
    Figure,
    MockProcess,
    ScenarioResult,
    rounded,
    scenario_main,
    steady_rate,
)

NAME = "b8_recall"
ANSWERS = {"tiny": 300, "quick": 2_000, "full": 10_000}
FACTS = 20
CLAIMS = 5
IN_FLIGHT = 200
LATENCY_MS = 1000.0
EDIT_EVERY = 100
SEED = 8


def write_inputs(answers: Path, refs: Path, n: int, *, edit_every: int = 0) -> int:
    """Write ``n`` answers (5 supported given claims each) and 20 facts per question; return answers edited."""
    from dahl.records import content_id

    rng = random.Random(SEED)
    edited = 0
    with answers.open("w", encoding="utf-8") as fa, refs.open("w", encoding="utf-8") as fr:
        for a in range(n):
            topic = f"the {rng.choice(('river', 'archive', 'canal', 'museum'))} no. {a}"
            question = f"Tell me about {topic}."
            claims = [f"{topic.capitalize()} was built in {1500 + rng.randrange(500)} (claim {a}.{i})."
                      for i in range(CLAIMS)]
            response = " ".join(claims)
            if edit_every and a % edit_every == 0:
                response += " It was restored recently."
                edited += 1
            fa.write(json.dumps({"id": f"a{a}", "question": question, "response": response, "model": "bench",
                                 "claims": [{"text": c, "label": "supported"} for c in claims]}) + "\n")
            facts = [{"id": str(j), "text": f"{topic.capitalize()} has property {j}.",
                      "relevance": 1 + (j % 5), "salience": 1 + ((j * 3) % 5)} for j in range(FACTS)]
            fr.write(json.dumps({"question_id": content_id(question), "question": question, "facts": facts}) + "\n")
    return edited


def _command(answers: Path, refs: Path, out: Path, cache: Path, url: str) -> list[str]:
    return [
        sys.executable, "-c", "import sys; from dahl.cli import main; sys.exit(main())",
        "score", str(answers), "-o", str(out), "--splitter", "given", "--checker", "replay",
        "--refs", str(refs), "--coverage", "openai", "--base-url", url, "--model", "mock", "--api-key-env", "",
        "--cache-dir", str(cache), "--max-in-flight", str(IN_FLIGHT), "--no-progress",
    ]


async def _run(mock: MockProcess, argv: list[str], expected: int) -> dict[str, Any]:
    """Run ``dahl score`` while sampling the mock's coverage count; the run's figures."""
    before = int((await mock.stats()).get("cover", 0))
    series: list[tuple[float, int]] = []
    in_flight: list[int] = []
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.PIPE)

    async def sample() -> None:
        while True:
            stats = await mock.stats()
            series.append((time.monotonic() - t0, int(stats.get("cover", 0)) - before))
            in_flight.append(int(stats.get("in_flight", 0)))
            await asyncio.sleep(0.1)

    poller = asyncio.get_running_loop().create_task(sample())
    try:
        _, err = await proc.communicate()
    finally:
        poller.cancel()
        try:
            await poller
        except asyncio.CancelledError:
            pass
    wall = time.monotonic() - t0
    requests = int((await mock.stats()).get("cover", 0)) - before
    return {"returncode": proc.returncode, "stderr": err.decode()[-2000:] if proc.returncode else "",
            "wall_s": wall, "requests": requests, "expected_requests": expected,
            "steady_rate": steady_rate(series, requests) if requests >= 20 else None,
            "in_flight_mean": _steady_mean(series, in_flight, requests)}


def _steady_mean(series: list[tuple[float, int]], values: list[int], total: int) -> float | None:
    """Mean of ``values`` over the samples taken between 10 % and 90 % of ``total`` calls (context for the rate)."""
    kept = [v for (_, done), v in zip(series, values, strict=True) if 0.1 * total <= done <= 0.9 * total]
    return sum(kept) / len(kept) if kept else None


def _recall_rows(out: Path) -> tuple[int, int, int]:
    """(answers in answers.jsonl, answers with a defined recall, claims with a label)."""
    rows = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    return (len(rows), sum(1 for r in rows if r.get("recall", {}).get("recall") is not None),
            sum(len(r["claims"]) for r in rows))


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B8 at ``size``; see the module docstring for the figures."""
    result = ScenarioResult(NAME, size)
    n = ANSWERS[size]
    answers, refs, edited_answers = workdir / "answers.jsonl", workdir / "refs.jsonl", workdir / "edited.jsonl"
    write_inputs(answers, refs, n)
    edited = write_inputs(edited_answers, workdir / "refs_same.jsonl", n, edit_every=EDIT_EVERY)
    cache = workdir / "cache"
    batches = n * math.ceil(FACTS / 30)
    async with MockProcess(["--latency-ms", f"{LATENCY_MS:g}"]) as mock:
        first = await _run(mock, _command(answers, refs, workdir / "out1", cache, mock.url), batches)
        rescore = await _run(mock, _command(edited_answers, refs, workdir / "out2", cache, mock.url), edited)
    for report, out in ((first, workdir / "out1"), (rescore, workdir / "out2")):
        result.claims_in += n * CLAIMS
        if report["returncode"] == 0:
            report["answers_out"], report["answers_with_recall"], claims = _recall_rows(out)
            result.claims_out += claims
    result.runs = rounded({"first": first, "rescore": rescore})
    bound = IN_FLIGHT / (LATENCY_MS / 1000.0)
    result.figures += [
        Figure.make("steady coverage calls/s, fixed 1 s, C=200 vs C/L", first.get("steady_rate"), bound, ">= 0.90"),
        Figure.make("coverage requests / unique (answer, fact batch) pairs", float(first["requests"]),
                    float(batches), ">= 1.0"),
        Figure.make("re-score requests / edited answers (1 %)", float(rescore["requests"]), float(edited), ">= 1.0"),
        Figure.make("answers with recall, first run", float(first.get("answers_with_recall", 0)), float(n), ">= 1.0"),
    ]
    result.notes.append(
        f"{n} answers x {FACTS} facts (one call each, <= 30 facts per call); bound = C / latency = "
        f"{IN_FLIGHT} / {LATENCY_MS / 1000:g} s = {bound:g} calls/s; re-score edits {edited} responses."
    )
    if first["requests"] != batches or rescore["requests"] != edited:
        result.notes.append("request counts differ from the expected ones (the ratio figures show by how much)")
    return result


def main() -> int:
    """``python -m bench.scenarios.b8_recall --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
