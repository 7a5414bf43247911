"""The explorer's data: a compact index of every answer and the answers in chunks.

The page cannot ``fetch()`` files when opened from disk (``file://``), so each
data file is a script that hands its JSON to the page: ``data/index.js`` calls
``DAHL.index({...})`` and ``data/answers-NNN.js`` calls ``DAHL.chunk(NNN, [...])``.
The index holds one row of small integers per answer (codes into name tables,
claim counts per label) and the question texts once per question, so filters and
search run without loading any chunk; a chunk (``chunk_size`` consecutive answers,
with their claims, verdicts, evidence and reference facts) is loaded when one of
its answers is opened.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import orjson

from dahl.errors import InputError
from dahl.records import LABELS, AnswerResult, ClaimResult
from dahl.results._log import writing

__all__ = ["ExplorerData", "write_answer_data"]

_DECODER = msgspec.json.Decoder(AnswerResult)


@dataclass
class ExplorerData:
    """What :func:`write_answer_data` wrote.

    Attributes:
        n_answers: answers across all runs.
        n_claims: claims across all answers.
        n_chunks: ``data/answers-NNN.js`` files written.
        models_by_run: per run folder (input order), the models its answers belong to.
    """

    n_answers: int = 0
    n_claims: int = 0
    n_chunks: int = 0
    models_by_run: list[list[str]] = field(default_factory=list)


class _Codes:
    """Names -> dense integer codes, in first-seen order."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._code: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        code = self._code.get(name)
        if code is None:
            code = self._code[name] = len(self.names)
            self.names.append(name)
        return code


def _results(path: Path) -> Iterator[AnswerResult]:
    """Stream the AnswerResults of one ``answers.jsonl`` (blocking).

    Raises:
        InputError: unreadable file or a line that is not an AnswerResult (file and line named).
    """
    try:
        with path.open("rb") as f:
            for line_no, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                try:
                    yield _DECODER.decode(raw)
                except msgspec.ValidationError as exc:
                    raise InputError(str(exc), file=str(path), line=line_no) from None
                except msgspec.DecodeError as exc:
                    raise InputError(f"not JSON: {exc}", file=str(path), line=line_no) from None
    except OSError as exc:
        raise InputError(f"cannot read answers: {exc}", file=str(path)) from None


def _claim(c: ClaimResult) -> dict[str, Any]:
    out: dict[str, Any] = {"t": c.text, "l": str(c.label)}
    if c.span is not None:
        out["sp"] = list(c.span)
    if c.reason is not None:
        out["r"] = str(c.reason)
    if c.raw:
        out["raw"] = c.raw
    if c.error:
        out["err"] = c.error
    if c.evidence:
        out["ev"] = [{"text": e.text, "source": e.source, "title": e.title, "score": e.score} for e in c.evidence]
    return out


def _answer(r: AnswerResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": r.id, "model": r.model, "category": r.category, "status": str(r.status),
        "question": r.question, "response": r.response, "reason": r.reason,
        "metrics": msgspec.to_builtins(r.metrics), "claims": [_claim(c) for c in r.claims],
    }
    if isinstance(r.recall, msgspec.Struct):
        rec = r.recall
        out["recall"] = {"recall": rec.recall, "recall_w": rec.recall_w, "reason": rec.reason,
                         "facts": [{"t": f.text, "w": f.weight, "l": str(f.label)} for f in rec.facts]}
    return out


def _script(head: str, payload: Any) -> bytes:
    """``head`` + JSON of ``payload`` + ``);``: a data file the page loads with a script tag."""
    return head.encode() + orjson.dumps(payload) + b");\n"


def write_answer_data(run_dirs: Sequence[Path], data_dir: Path, *, chunk_size: int = 250) -> ExplorerData:
    """Write ``index.js`` and ``answers-NNN.js`` for the answers of ``run_dirs`` into ``data_dir`` (blocking).

    Args:
        run_dirs: run folders, each with an ``answers.jsonl`` (the output of ``dahl score``).
        data_dir: the site's ``data/`` folder (created; old chunks removed).
        chunk_size: answers per chunk file (≥ 1).

    Returns:
        Counts of what was written.

    Raises:
        InputError: an ``answers.jsonl`` is missing or has a bad line.
        OutputWriteError: a data file cannot be written.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    with writing(data_dir):
        data_dir.mkdir(parents=True, exist_ok=True)
        for old in data_dir.glob("answers-*.js"):
            old.unlink()
    models, categories, statuses, questions = _Codes(), _Codes(), _Codes(), _Codes()
    question_text: list[str] = []
    cols: dict[str, list[Any]] = {k: [] for k in ("m", "c", "s", "q", "p", *(f"n_{lab}" for lab in LABELS))}
    info = ExplorerData()
    chunk: list[dict[str, Any]] = []

    def flush() -> None:
        path = data_dir / f"answers-{info.n_chunks:03d}.js"
        with writing(path):
            path.write_bytes(_script(f"DAHL.chunk({info.n_chunks}, ", chunk))
        info.n_chunks += 1
        chunk.clear()

    for run_dir in run_dirs:
        seen: dict[str, None] = {}
        for r in _results(Path(run_dir) / "answers.jsonl"):
            seen.setdefault(r.model, None)
            cols["m"].append(models(r.model))
            cols["c"].append(categories(r.category))
            cols["s"].append(statuses(str(r.status)))
            q = questions(r.question_id or r.question)
            if q == len(question_text):
                question_text.append(r.question)
            cols["q"].append(q)
            p = r.metrics.precision
            cols["p"].append(None if p is None else round(p, 4))
            for lab in LABELS:
                cols[f"n_{lab}"].append(r.counts.get(lab, 0))
            info.n_answers += 1
            info.n_claims += len(r.claims)
            chunk.append(_answer(r))
            if len(chunk) == chunk_size:
                flush()
        info.models_by_run.append(list(seen))
    if chunk:
        flush()
    index = {"n": info.n_answers, "chunk_size": chunk_size, "labels": list(LABELS), "models": models.names,
             "categories": categories.names, "statuses": statuses.names, "questions": question_text,
             "question_ids": questions.names, "cols": cols}
    path = data_dir / "index.js"
    with writing(path):
        path.write_bytes(_script("DAHL.index(", index))
    return info
