"""MedHallu pairwise accuracy of a ``dahl score`` run: does the true answer score higher?

Usage::

    python -m bench.datasets medhallu DIR
    dahl score DIR/medhallu_answers.jsonl --evidence DIR/medhallu_corpus.jsonl -o OUT --no-cache
    python -m bench.pairwise OUT/answers.jsonl

Per question (``meta.qid``), the factual precision dahl wrote for the ``ground-truth``
answer is compared with the ``hallucinated`` one's (``metrics.precision`` of an answer
with status ``scored``, the per-answer term of the DAHL Score, Seo et al. 2024 §3.3).
An answer that is not scored (excluded, abstained, error) ranks below every scored
one. Pairwise accuracy = wins / questions; a tie is not a win. Figures are printed
as JSON for all questions and for even and odd ``qid`` (the evidence Checker's
settings were chosen on even rows).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["pairwise"]

TRUE, HALLUCINATED = "ground-truth", "hallucinated"


def _tally(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    wins = sum(t > h for t, h in pairs)
    ties = sum(t == h for t, h in pairs)
    return {
        "questions": len(pairs),
        "wins": wins,
        "ties": ties,
        "losses": len(pairs) - wins - ties,
        "pairwise_accuracy": round(wins / len(pairs), 4) if pairs else None,
    }


def pairwise(answers: Path) -> dict[str, Any]:
    """Pairwise accuracy of the ground-truth vs hallucinated answers in a dahl ``answers.jsonl``.

    Args:
        answers: ``answers.jsonl`` of a run on ``bench.datasets medhallu`` output.

    Returns:
        ``{"all", "even", "odd"}``, each ``{"questions", "wins", "ties", "losses",
        "pairwise_accuracy"}`` (accuracy None for no question).

    Raises:
        ValueError: a line lacks ``meta.qid`` or a question lacks one of its two answers;
            the message names the line or the question.
    """
    scores: dict[int, dict[str, float]] = {}
    with answers.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            row = json.loads(line)
            qid = (row.get("meta") or {}).get("qid")
            if qid is None:
                raise ValueError(f"{answers}:{n}: field meta.qid missing (not a MedHallu run?)")
            precision = row["metrics"].get("precision") if row["status"] == "scored" else None
            scores.setdefault(int(qid), {})[row["model"]] = -1.0 if precision is None else float(precision)
    pairs: dict[int, tuple[float, float]] = {}
    for qid, by_model in scores.items():
        if TRUE not in by_model or HALLUCINATED not in by_model:
            raise ValueError(f"{answers}: question {qid} lacks its {TRUE!r} or {HALLUCINATED!r} answer")
        pairs[qid] = (by_model[TRUE], by_model[HALLUCINATED])
    return {
        "all": _tally(list(pairs.values())),
        "even": _tally([p for q, p in pairs.items() if q % 2 == 0]),
        "odd": _tally([p for q, p in pairs.items() if q % 2 == 1]),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; prints JSON and returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m bench.pairwise", description=__doc__.split("\n")[0])
    parser.add_argument("answers", type=Path, help="answers.jsonl of a dahl score run on MedHallu")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(pairwise(args.answers)))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
