"""Test support for the recall reports: small replay runs whose answers carry recall, as real folders.

:func:`recall_run` scores answers with ``--splitter given --checker replay`` through
:func:`dahl.run._score.score`, then adds ``recall`` to each line of ``answers.jsonl`` the way
the coverage stage does (:func:`dahl.metrics.answer_recall` over the question's facts
with their coverage labels, the answer's DAHL precision, abstained = covers nothing)
and rebuilds the verdict store from the file.

The two-model fixture :data:`TWO_MODELS` (hand-computed values in its docstring):

=====  ====  ===========  ==========================  =======  =======  ======  ======
answer q     claims       facts (weight: coverage)     Rec      Rec^w    F1      F1^w
=====  ====  ===========  ==========================  =======  =======  ======  ======
A1     q1    S S U        a 1: c, b .5: n, c .5: n     1/3      1/2      4/9     4/7
A2     q2    S            d 1: c, e 0: c               1        1        1       1
A3     q3    S S          (none)                       null     null     null    null
B1     q1    S U          a 1: c, b .5: c, c .5: c     1        1        2/3     2/3
B2     q2    (abstained)  d, e                         0        0        0       0
B3     q3    S            (none)                       null     null     null    null
=====  ====  ===========  ==========================  =======  =======  ======  ======
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import orjson

from dahl.results import _manifest as manifest
from dahl.run._plan import AdapterSettings
from dahl.metrics import answer_recall
from dahl.records import AnswerResult, Coverage, FactResult, Label, Status, normalize_text
from dahl.run._score import ScoreConfig, score
from dahl.analysis._verdicts import rebuild
from tests.report_runs import MODELS, factscore_run

C, P, N = Coverage.COVERED, Coverage.PARTIAL, Coverage.NOT_COVERED

#: Reference facts per question: (fact id, weight).
FACTS: dict[str, list[tuple[str, float]]] = {
    "q1": [("a", 1.0), ("b", 0.5), ("c", 0.5)],
    "q2": [("d", 1.0), ("e", 0.0)],
    "q3": [],
}

#: (answer id, model, question, claim labels, abstained, coverage per fact of the question).
TWO_MODELS: list[tuple[str, str, str, str, bool, list[Coverage]]] = [
    ("A1", "A", "q1", "SSU", False, [C, N, N]),
    ("A2", "A", "q2", "S", False, [C, C]),
    ("A3", "A", "q3", "SS", False, []),
    ("B1", "B", "q1", "SU", False, [C, C, C]),
    ("B2", "B", "q2", "", True, [N, N]),
    ("B3", "B", "q3", "S", False, []),
]

_LABEL = {"S": "supported", "U": "unsupported", "I": "irrelevant"}


def answer_lines(rows: Sequence[tuple[str, str, str, str, bool, list[Coverage]]]) -> list[dict[str, Any]]:
    """dahl JSONL input records of ``rows``: given claims with their labels, one question per id."""
    out = []
    for aid, model, q, labels, abstained, _ in rows:
        claims = [{"text": f"{aid} claim {i}.", "label": _LABEL[x]} for i, x in enumerate(labels)]
        record: dict[str, Any] = {"id": aid, "model": model, "question": f"Question {q}?",
                                  "response": " ".join(c["text"] for c in claims) or "I don't know.",
                                  "claims": claims, "category": "x" if q != "q3" else "y"}
        if abstained:
            record["abstained"] = True
        out.append(record)
    return out


def add_recall(out_dir: Path, coverage: Mapping[str, list[Coverage]], facts: Mapping[str, list[tuple[str, float]]],
               question_of: Mapping[str, str]) -> None:
    """Rewrite ``out_dir/answers.jsonl`` with each answer's recall, then rebuild the verdict store.

    Answers whose id is not in ``coverage`` keep no recall (no reference set).
    """
    def judge(result: AnswerResult) -> list[FactResult] | None:
        if result.id not in coverage:
            return None
        return [FactResult(id=fid, text=f"fact {fid}", weight=w, label=label)
                for (fid, w), label in zip(facts[question_of[result.id]], coverage[result.id], strict=True)]

    rewrite_with_recall(out_dir, judge)


def rewrite_with_recall(out_dir: Path, judge: Callable[[AnswerResult], list[FactResult] | None]) -> None:
    """Set each line's recall from ``judge`` (F* with coverage labels; None: no reference set) as the
    coverage stage does, rebuild the verdict store and record the file in the run's manifest."""
    path = out_dir / "answers.jsonl"
    decoder = msgspec.json.Decoder(AnswerResult)
    encoder = msgspec.json.Encoder()
    lines = []
    for raw in path.read_bytes().splitlines():
        result = decoder.decode(raw)
        judged = judge(result)
        if judged is not None:
            recall = answer_recall(judged, precision=result.metrics.precision,
                                   abstained=result.status is Status.ABSTAINED)
            result = msgspec.structs.replace(result, recall=recall)
        lines.append(encoder.encode(result))
    path.write_bytes(b"\n".join(lines) + b"\n")
    rebuild(out_dir)
    # The run's manifest describes the file as the end of a run with coverage would have left it.
    record = manifest.read_manifest(out_dir)
    if record is not None and isinstance(record.get("answers_file"), dict):
        record["answers_file"] = manifest.answers_file_state(path, len(lines))
        manifest.write_atomic(out_dir / manifest.MANIFEST_NAME, orjson.dumps(record, option=orjson.OPT_INDENT_2))


def pooled_factscore_runs(base: Path) -> dict[str, Path]:
    """The three FActScore replay runs with pooled human recall (skips without the shared data).

    Reference set per entity (question_id) = the union over the three runs of the
    answers' supported claims (the human atomic facts labelled S, from sentences not
    marked irrelevant), by normalized text, each of weight 1; an answer covers exactly
    its own S facts (the ``exact`` judge on replayed labels); abstained answers cover
    nothing; entities with an empty set get no recall.
    """
    runs = {m: factscore_run(base, m) for m in MODELS}
    decoder = msgspec.json.Decoder(AnswerResult)
    own: dict[str, set[str]] = {}
    pool: dict[str, dict[str, None]] = {}
    for run in runs.values():
        for raw in (run / "answers.jsonl").read_bytes().splitlines():
            r = decoder.decode(raw)
            texts = [normalize_text(c.text) for c in r.claims if c.label is Label.SUPPORTED]
            own[r.id] = set(texts)
            pool.setdefault(r.question_id, {}).update(dict.fromkeys(texts))

    def judge(result: AnswerResult) -> list[FactResult] | None:
        facts = list(pool[result.question_id])
        if not facts:
            return None
        return [FactResult(id=str(i), text=t, weight=1.0, label=C if t in own[result.id] else N)
                for i, t in enumerate(facts)]

    for run in runs.values():
        if not (run / ".recall-added").exists():
            rewrite_with_recall(run, judge)
            (run / ".recall-added").touch()
    return runs


def recall_run(out_dir: Path, rows: Sequence[tuple[str, str, str, str, bool, list[Coverage]]] = TWO_MODELS,
               *, with_recall: bool = True) -> Path:
    """Score ``rows`` into ``out_dir`` (replay Checker) and, with ``with_recall``, add their recall."""
    src = out_dir.with_name(out_dir.name + "-input.jsonl")
    src.write_text("".join(json.dumps(r) + "\n" for r in answer_lines(rows)))
    score(ScoreConfig(inputs=(src,), out_dir=out_dir, fmt="jsonl", use_cache=False,
                      adapters=AdapterSettings(splitter="given", checker="replay")))
    if with_recall:
        add_recall(out_dir, {r[0]: r[5] for r in rows}, FACTS, {r[0]: r[2] for r in rows})
    return out_dir
