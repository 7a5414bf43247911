"""B4 faults: the engine issue's fault mix; every claim must come back labelled.

Mock faults per admitted request: 500 5 %, 503 5 %, connection reset 2 %, malformed JSON
2 %, off-format content 2 % (10 % 500/503 in total), zero latency, C = 64. Checked from
dahl's own output: claims in = claims out (every claim of ``answers.jsonl`` has a label;
failures are labelled ``error`` and carry an error text), error counts by class from
``summary.json`` (``run.errors``), and the run ends (retries are bounded).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.scenarios.common import Figure, ScenarioResult, measured_run, rounded, scenario_main, write_answers

NAME = "b4_faults"
CONCURRENCY = 64
CLAIMS = {"tiny": 300, "quick": 1000, "full": 10000}
FAULTS = ("500=0.05", "503=0.05", "reset=0.02", "malformed=0.02", "offformat=0.02")


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B4 at ``size``; see the module docstring for the figures."""
    result = ScenarioResult(NAME, size)
    answers = workdir / "answers.jsonl"
    write_answers(answers, CLAIMS[size], seed=4)
    args = [a for spec in FAULTS for a in ("--fault", spec)] + ["--seed", "4"]
    dahl = await measured_run("dahl", answers, args, concurrency=CONCURRENCY, workdir=workdir)
    result.add_dahl_run(dahl)
    result.runs = rounded({"dahl": dahl})
    claims_in = int(dahl.get("claims_in", 0))
    labels = dahl.get("labels", {})
    errors = dahl.get("errors", {})
    result.figures += [
        Figure.make("claims out / claims in", float(dahl.get("claims_out", 0)), float(claims_in), ">= 1.0"),
        Figure.make("claims labelled error", float(labels.get("error", 0)) if claims_in else None),
        Figure.make("error-labelled claims without an error text", float(dahl.get("error_without_reason", 0)), None, "<= 0"),
        Figure.make("claims/s under faults", dahl.get("claims_per_s")),
        Figure.make("wall seconds (the run ends)", dahl.get("wall_s")),
    ]
    result.notes.append(f"mock faults injected: {dahl['mock'].get('faults', {})}; dahl errors by class: {errors}.")
    return result


def main() -> int:
    """``python -m bench.scenarios.b4_faults --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
