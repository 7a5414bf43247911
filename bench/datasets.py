"""Convert public labelled data sets into dahl answers JSONL plus an evidence corpus JSONL.

Usage::

    python -m bench.datasets pubmedqa OUTDIR [--data DIR]
    python -m bench.datasets medhallu OUTDIR [--data DIR]

Writes ``OUTDIR/<name>_answers.jsonl`` (one dahl answer per line: ``id``,
``question``, ``response``, ``model``, ``category``, ``meta``) and
``OUTDIR/<name>_corpus.jsonl`` (one ``{"id", "text"}`` document per line) and
prints a JSON summary. ``--data`` defaults to ``$DAHL_SHARED_DATA`` or
``../shared/data`` beside the repository.

* PubMedQA PQA-L (Jin et al. 2019, ``pubmedqa/ori_pqal.json``, 1,000 items):
  answer = LONG_ANSWER (the abstract's conclusion), model
  ``"pubmedqa-long-answer"``, category = ``final_decision``; corpus = one
  document per PubMed id, text = its CONTEXTS joined. ``meta.evidence_ids`` =
  ``[pmid]``.
* MedHallu pqa_labeled (Pandit et al. 2025, ``medhallu/medhallu_pqa_labeled.jsonl``,
  1,000 rows): two answers per row, ``"ground-truth"`` and
  ``"hallucinated"``, ids ``"<qid>-gt"`` / ``"<qid>-hal"`` with ``qid`` the
  0-based row index, category = Difficulty Level; corpus = every Knowledge
  passage, id ``"<qid>-<j>"``. ``meta`` = ``{"qid", "label", "evidence_ids"}``
  with label ``"true"`` or ``"hallucinated"``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["medhallu", "pubmedqa", "shared_data_dir", "write_jsonl"]

Row = dict[str, Any]


def shared_data_dir() -> Path:
    """Return ``$DAHL_SHARED_DATA`` or ``shared/data`` beside the repository."""
    env = os.environ.get("DAHL_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def pubmedqa(data: Path) -> tuple[list[Row], list[Row]]:
    """Convert PubMedQA PQA-L.

    Args:
        data: the shared data folder (holding ``pubmedqa/ori_pqal.json``).

    Returns:
        (answers, corpus documents), 1,000 each on the shared file.

    Raises:
        FileNotFoundError: the data file is absent.
    """
    items: dict[str, Row] = json.loads((data / "pubmedqa" / "ori_pqal.json").read_text("utf-8"))
    answers: list[Row] = []
    corpus: list[Row] = []
    for pmid, item in items.items():
        answers.append(
            {
                "id": pmid,
                "question": item["QUESTION"],
                "response": item["LONG_ANSWER"],
                "model": "pubmedqa-long-answer",
                "category": item["final_decision"],
                "meta": {"evidence_ids": [pmid]},
            }
        )
        corpus.append({"id": pmid, "text": " ".join(item["CONTEXTS"])})
    return answers, corpus


def _medhallu_rows(data: Path) -> Iterator[Row]:
    with (data / "medhallu" / "medhallu_pqa_labeled.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def medhallu(data: Path) -> tuple[list[Row], list[Row]]:
    """Convert MedHallu pqa_labeled.

    Args:
        data: the shared data folder (holding ``medhallu/medhallu_pqa_labeled.jsonl``).

    Returns:
        (answers, corpus documents): 2,000 answers (ground truth first, then
        hallucinated, per row) and one document per Knowledge passage.

    Raises:
        FileNotFoundError: the data file is absent.
    """
    answers: list[Row] = []
    corpus: list[Row] = []
    for qid, row in enumerate(_medhallu_rows(data)):
        ids = [f"{qid}-{j}" for j in range(len(row["Knowledge"]))]
        corpus.extend({"id": i, "text": t} for i, t in zip(ids, row["Knowledge"], strict=True))
        for model, label, field, suffix in (
            ("ground-truth", "true", "Ground Truth", "gt"),
            ("hallucinated", "hallucinated", "Hallucinated Answer", "hal"),
        ):
            answers.append(
                {
                    "id": f"{qid}-{suffix}",
                    "question": row["Question"],
                    "response": row[field],
                    "model": model,
                    "category": row["Difficulty Level"],
                    "meta": {"qid": qid, "label": label, "evidence_ids": ids},
                }
            )
    return answers, corpus


def write_jsonl(path: Path, rows: list[Row]) -> None:
    """Write ``rows`` as JSON Lines, non-ASCII escaped (raw U+2028 would split lines for some readers)."""
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m bench.datasets", description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=["pubmedqa", "medhallu"])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--data", type=Path, default=None, help="shared data folder")
    args = parser.parse_args(argv)
    data = args.data or shared_data_dir()
    convert = pubmedqa if args.name == "pubmedqa" else medhallu
    try:
        answers, corpus = convert(data)
    except FileNotFoundError as exc:
        print(f"error: {exc} (give the shared data folder with --data DIR or $DAHL_SHARED_DATA)", file=sys.stderr)
        return 2
    args.outdir.mkdir(parents=True, exist_ok=True)
    answers_path = args.outdir / f"{args.name}_answers.jsonl"
    corpus_path = args.outdir / f"{args.name}_corpus.jsonl"
    write_jsonl(answers_path, answers)
    write_jsonl(corpus_path, corpus)
    print(
        json.dumps(
            {
                "dataset": args.name,
                "answers": str(answers_path),
                "n_answers": len(answers),
                "corpus": str(corpus_path),
                "n_documents": len(corpus),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
