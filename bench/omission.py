"""Omission sensitivity on PubMedQA: reference facts built offline, answers with and without a key sentence.

Usage::

    python -m bench.omission [--data ori_pqal.json] -o DIR [--limit N]

``--data`` defaults to ``pubmedqa/ori_pqal.json`` of ``$DAHL_SHARED_DATA`` or ``../shared/data``.

Writes, into DIR:

* ``questions.jsonl``: one question per PubMedQA record, its documents given inline
  (each CONTEXTS paragraph and the LONG_ANSWER, ids ``PMID/contextI`` and ``PMID/answer``);
* ``refs.jsonl``: ``dahl refs build`` of those questions offline (``--extractor rules
  --rater none``: every fact weighs 1, so F* = all facts and Rec^w = Rec);
* ``answers_A.jsonl``: per question, model ``A``, response = LONG_ANSWER;
* ``answers_B.jsonl``: model ``B``, response = LONG_ANSWER without its key sentence;
* ``corpus.jsonl``: one document per record (id = PMID, text = its CONTEXTS joined), for
  precision with the evidence Checker (``dahl score answers_A.jsonl --evidence corpus.jsonl``).

The key sentence is the sentence of LONG_ANSWER (:func:`dahl.sentences.split_sentences`)
that covers the largest importance weight of F* (weights from
:func:`dahl.metrics.fact_weight`: 1 when unrated), the first on a tie. A sentence covers
a fact when at least :data:`MATCH_SHARE` (80 %) of the fact's terms occur among the
sentence's terms, terms being :func:`dahl.adapters._corpus.analyze` output (lower-cased
word and number tokens, English stopwords removed, Snowball-stemmed), and the fact has
at least one term. Records whose LONG_ANSWER has one sentence are left out (B would be
empty) and counted. The printed JSON also gives a preview with the same lexical match
(an answer covers a fact when one of its sentences does): mean Rec^w of A and B and the
share of questions where A > B; the figures of record come from scoring the two answer
files with ``dahl score ... --refs refs.jsonl`` and a coverage judge.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from bench.datasets import shared_data_dir

from dahl.adapters._corpus import analyze
from dahl.formats._refs import read_refs
from dahl.metrics import fact_weight
from dahl.records import RefSet, normalize_text
from dahl.refs._documents import build_refs
from dahl.refs._settings import BuildSettings
from dahl.sentences import split_sentences

__all__ = ["MATCH_SHARE", "key_sentence", "main", "omission", "sentence_covers"]

#: Share of a fact's terms a sentence must hold to cover the fact.
MATCH_SHARE = 0.8



def sentence_covers(fact_terms: set[str], sentence_terms: set[str]) -> bool:
    """True when ``sentence_terms`` hold at least :data:`MATCH_SHARE` of the (non-empty) ``fact_terms``."""
    return bool(fact_terms) and len(fact_terms & sentence_terms) >= MATCH_SHARE * len(fact_terms)


def key_sentence(text: str, ref_set: RefSet) -> tuple[int, int, float, float] | None:
    """The key sentence of ``text`` for ``ref_set``: ``(start, end, covered weight, total weight)``.

    Returns:
        None when ``text`` has fewer than two sentences.
    """
    spans = split_sentences(text)
    if len(spans) < 2:
        return None
    facts = [(set(analyze(f.text)), fact_weight(f)) for f in ref_set.facts]
    total = sum(w for _, w in facts)
    best: tuple[int, int, float] | None = None
    for start, end in spans:
        terms = set(analyze(text[start:end]))
        weight = sum(w for fact_terms, w in facts if sentence_covers(fact_terms, terms))
        if best is None or weight > best[2]:
            best = (start, end, weight)
    assert best is not None
    return best[0], best[1], best[2], total


def _lexical_recall_w(text: str, ref_set: RefSet) -> float | None:
    sentences = [set(analyze(text[a:b])) for a, b in split_sentences(text)]
    weights = [(set(analyze(f.text)), fact_weight(f)) for f in ref_set.facts]
    total = sum(w for _, w in weights)
    if total == 0:
        return None
    covered = sum(w for terms, w in weights if any(sentence_covers(terms, s) for s in sentences))
    return covered / total


def _write_questions(data: dict[str, Any], path: Path, corpus: Path) -> None:
    with path.open("w", encoding="utf-8") as out, corpus.open("w", encoding="utf-8") as documents:
        for pmid, record in data.items():
            documents.write(json.dumps({"id": pmid, "text": " ".join(record["CONTEXTS"])}) + "\n")
            docs = [{"id": f"{pmid}/context{i}", "text": t} for i, t in enumerate(record["CONTEXTS"])]
            docs.append({"id": f"{pmid}/answer", "text": record["LONG_ANSWER"]})
            out.write(json.dumps({"question_id": pmid, "question": record["QUESTION"], "documents": docs}) + "\n")


def omission(data_path: Path, out_dir: Path, *, limit: int | None = None) -> dict[str, Any]:
    """Build the refs and the two answer files (see the module docstring); return the figures.

    Args:
        data_path: PubMedQA ``ori_pqal.json``.
        out_dir: where the five files go (created).
        limit: the first ``limit`` records only (file order); None = all 1,000.

    Raises:
        OSError: a file cannot be read or written.
        InputError: the built refs cannot be read back.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = json.loads(data_path.read_text(encoding="utf-8"))
    if limit is not None:
        data = dict(list(data.items())[:limit])
    questions, refs = out_dir / "questions.jsonl", out_dir / "refs.jsonl"
    _write_questions(data, questions, out_dir / "corpus.jsonl")
    refs.unlink(missing_ok=True)
    started = time.perf_counter()
    report = anyio.run(build_refs, BuildSettings(questions=questions, out=refs))
    build_s = time.perf_counter() - started
    sets = {s.question_id: s for s in read_refs(refs)}
    single, removed_share, rec_a, rec_b, a_wins = 0, [], [], [], 0
    with (out_dir / "answers_A.jsonl").open("w") as out_a, (out_dir / "answers_B.jsonl").open("w") as out_b:
        for pmid, record in data.items():
            text, ref_set = record["LONG_ANSWER"], sets[pmid]
            key = key_sentence(text, ref_set)
            if key is None:
                single += 1
                continue
            start, end, weight, total = key
            shorter = normalize_text(text[:start] + " " + text[end:])
            for out, model, response in ((out_a, "A", text), (out_b, "B", shorter)):
                out.write(json.dumps({"id": pmid, "question": record["QUESTION"], "response": response,
                                      "model": model}) + "\n")
            removed_share.append(weight / total if total else 0.0)
            a, b = _lexical_recall_w(text, ref_set), _lexical_recall_w(shorter, ref_set)
            if a is not None and b is not None:
                rec_a.append(a)
                rec_b.append(b)
                a_wins += a > b
    n = len(rec_a)
    return {
        "records": len(data),
        "answers": len(removed_share),
        "single_sentence_left_out": single,
        "facts": report.counters.facts,
        "facts_per_question": report.counters.facts / max(1, len(data)),
        "build_s": round(build_s, 2),
        "key_sentence_weight_share": sum(removed_share) / max(1, len(removed_share)),
        "lexical_preview": {
            "n": n,
            "recall_w_A": sum(rec_a) / n if n else None,
            "recall_w_B": sum(rec_b) / n if n else None,
            "share_A_greater": a_wins / n if n else None,
            "match": f"fact terms (analyze) >= {MATCH_SHARE:.0%} in one sentence",
        },
        "files": {name: str(out_dir / name) for name in
                  ("questions.jsonl", "refs.jsonl", "answers_A.jsonl", "answers_B.jsonl", "corpus.jsonl")},
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: print the figures of :func:`omission` as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=None, help="PubMedQA ori_pqal.json")
    parser.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    parser.add_argument("--limit", type=int, default=None, help="first N records only")
    args = parser.parse_args(argv)
    data = args.data if args.data is not None else shared_data_dir() / "pubmedqa" / "ori_pqal.json"
    json.dump(omission(data, args.out, limit=args.limit), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
