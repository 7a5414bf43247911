"""Offline evaluation of the evidence Checker on PubMedQA and MedHallu; prints JSON.

Usage::

    python -m bench.offline_eval [--data DIR] [--rows N] [--no-tune]
    python -m bench.offline_eval --healthver     # HealthVer figures only

Figures:

* **PubMedQA** (1,000 expert long answers, each checked against its own
  abstract's contexts): DAHL Score = mean over answers with no unknown claim of
  S / (S + U) (Seo et al. 2024, §3.3), answers excluded, label counts, run time.
* **MedHallu pairwise accuracy**: per question, precision of the ground-truth
  answer vs the hallucinated one; accuracy = share of questions where the
  ground truth's precision is strictly higher (ties and undefined precisions
  count as failures and are reported). Precision here = S / (S + U) over the
  answer's decided claims (unknown claims left out; no decided claim →
  undefined). Settings are tuned on even rows only and reported on odd rows
  and on all rows.
* **MedHallu with the PubMedQA-abstract corpus**: share of the 2,000
  MedHallu answers with an unknown claim (excluded from a DAHL Score) when
  each is checked against its question's PubMedQA abstract, and when each
  searches the whole corpus of 1,000 abstracts (``restrict=False``, as
  ``dahl score --evidence`` does for answers without evidence ids).
* **HealthVer** (:mod:`bench.healthver_eval`): 3-way accuracy and macro-F1 and
  Supports-vs-Refutes accuracy on the held-back part of the shared split (the
  support model was not trained on it; split in :mod:`bench.train_checker`),
  with the majority-Neutral and token-overlap baselines.
* **Baselines** (MedHallu): ``token_share`` = share of the answer's content
  tokens (lower-cased ``\\w+`` minus stopwords) found anywhere in its
  question's Knowledge text; ``claim_overlap`` = per claim the same share,
  supported when ≥ 0.5, precision = supported / claims.

Claims come from ``dahl.adapters._rules.RuleSplitter`` when it is importable,
else from ``dahl.sentences.split_sentences``, else a regex sentence split;
the output names the one used.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from bench.datasets import Row, medhallu, pubmedqa, shared_data_dir
from bench.healthver_eval import healthver_figures
from dahl.adapters._corpus import Corpus
from dahl.adapters._evidence import EvidenceChecker, EvidenceSettings
from dahl.records import Answer, Claim, Label, normalize_text

__all__ = [
    "PairScore",
    "baseline_pairwise",
    "claims_of",
    "evidence_pairwise",
    "medhallu_answers",
    "medhallu_pubmedqa_exclusion",
    "pubmedqa_score",
    "regex_claims",
]

logger = logging.getLogger(__name__)

_REGEX_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
_WORD = re.compile(r"\w+")
_BASELINE_STOP = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with we our were which has have had been".split()
)


def _load_splitter() -> tuple[str, Callable[[Answer], list[Claim]]]:
    """Pick the best available way to split an answer into claims."""
    try:
        from dahl.adapters._rules import RuleSplitter  # another helper's module; may be absent

        splitter = RuleSplitter()

        def by_rules(answer: Answer) -> list[Claim]:
            return anyio.run(splitter.split, answer)

        return f"rules ({splitter.fingerprint})", by_rules
    except ImportError:
        pass
    try:
        from dahl.sentences import split_sentences

        def by_sentences(answer: Answer) -> list[Claim]:
            spans = split_sentences(answer.response)
            return [
                Claim(text=normalize_text(answer.response[s:e]), index=i, span=(s, e), sentence=i)
                for i, (s, e) in enumerate(spans)
            ]

        return "dahl.sentences", by_sentences
    except ImportError:
        pass

    return "regex", regex_claims


def regex_claims(answer: Answer) -> list[Claim]:
    """One claim per sentence, split at . ! ? before a capital or digit (fixed, for pinned tests)."""
    parts = [normalize_text(p) for p in _REGEX_SENTENCE.split(answer.response)]
    return [Claim(text=t, index=i, sentence=i) for i, t in enumerate(p for p in parts if p)]


def _answer(row: Row) -> Answer:
    return Answer(
        id=row["id"],
        question=row["question"],
        response=row["response"],
        model=row["model"],
        category=row["category"],
        meta=row["meta"],
    )


def claims_of(
    answers: Sequence[Answer], split: Callable[[Answer], list[Claim]]
) -> list[list[Claim]]:
    """Split every answer; returns one claim list per answer."""
    return [split(a) for a in answers]


def _precision(labels: Sequence[Label]) -> float | None:
    """S / (S + U) over decided claims; None when no claim is decided."""
    s = sum(1 for x in labels if x == Label.SUPPORTED)
    u = sum(1 for x in labels if x == Label.UNSUPPORTED)
    return s / (s + u) if s + u else None


@dataclass(frozen=True)
class PairScore:
    """Pairwise accuracy over MedHallu questions.

    Attributes:
        n: questions compared.
        wins: ground truth's precision strictly above the hallucinated one's.
        ties: equal precisions (failures).
        undefined: a precision undefined on either side (failures).
    """

    n: int
    wins: int
    ties: int
    undefined: int

    @property
    def accuracy(self) -> float:
        """wins / n (0 when n is 0)."""
        return self.wins / self.n if self.n else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view with the accuracy rounded to 4 digits."""
        return {**asdict(self), "accuracy": round(self.accuracy, 4)}


def _pairwise(true_p: Sequence[float | None], hal_p: Sequence[float | None]) -> PairScore:
    wins = ties = undefined = 0
    for t, h in zip(true_p, hal_p, strict=True):
        if t is None or h is None:
            undefined += 1
        elif t > h:
            wins += 1
        elif t == h:
            ties += 1
    return PairScore(len(true_p), wins, ties, undefined)


def medhallu_answers(data: Path, rows: int | None = None) -> tuple[list[Answer], Corpus]:
    """MedHallu answers (gt, hal alternating) and the corpus of all Knowledge passages.

    Args:
        data: shared data folder.
        rows: keep only the first ``rows`` questions (corpus still covers them only).
    """
    answer_rows, docs = medhallu(data)
    if rows is not None:
        answer_rows = answer_rows[: 2 * rows]
        docs = [d for d in docs if int(str(d["id"]).split("-")[0]) < rows]
    corpus = Corpus.from_documents((str(d["id"]), "", str(d["text"])) for d in docs)
    return [_answer(r) for r in answer_rows], corpus


def evidence_pairwise(
    checker: EvidenceChecker,
    answers: Sequence[Answer],
    claims: Sequence[Sequence[Claim]],
    select: Callable[[int], bool] = lambda qid: True,
) -> PairScore:
    """Pairwise accuracy of the evidence Checker over questions whose qid passes ``select``.

    Args:
        checker: the Checker.
        answers: gt/hal answers alternating, as from :func:`medhallu_answers`.
        claims: claims per answer, aligned with ``answers``.
        select: qid filter (e.g. even rows).
    """
    precisions: dict[str, list[float | None]] = {"true": [], "hallucinated": []}
    for answer, answer_claims in zip(answers, claims, strict=True):
        if not select(int(answer.meta["qid"])):
            continue
        labels = [checker.check_sync(c, answer).label for c in answer_claims]
        precisions[str(answer.meta["label"])].append(_precision(labels))
    return _pairwise(precisions["true"], precisions["hallucinated"])


def _content_tokens(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if t not in _BASELINE_STOP]


def baseline_pairwise(
    answers: Sequence[Answer],
    claims: Sequence[Sequence[Claim]],
    knowledge: dict[int, str],
    rule: str,
    select: Callable[[int], bool] = lambda qid: True,
) -> PairScore:
    """Pairwise accuracy of a token-overlap baseline (see the module docstring).

    Args:
        answers: gt/hal answers alternating.
        claims: claims per answer.
        knowledge: qid -> its Knowledge passages joined.
        rule: ``"token_share"`` or ``"claim_overlap"``.
        select: qid filter.
    """
    precisions: dict[str, list[float | None]] = {"true": [], "hallucinated": []}
    for answer, answer_claims in zip(answers, claims, strict=True):
        qid = int(answer.meta["qid"])
        if not select(qid):
            continue
        vocab = set(_content_tokens(knowledge[qid]))
        if rule == "token_share":
            tokens = _content_tokens(answer.response)
            p = sum(t in vocab for t in tokens) / len(tokens) if tokens else None
        else:
            shares = []
            for c in answer_claims:
                tokens = _content_tokens(c.text)
                shares.append(sum(t in vocab for t in tokens) / len(tokens) if tokens else 0.0)
            p = sum(s >= 0.5 for s in shares) / len(shares) if shares else None
        precisions[str(answer.meta["label"])].append(p)
    return _pairwise(precisions["true"], precisions["hallucinated"])


def pubmedqa_score(data: Path, split: Callable[[Answer], list[Claim]], **settings: Any) -> dict[str, Any]:
    """DAHL Score of the PubMedQA long answers under the evidence Checker.

    Returns:
        JSON-ready figures: dahl_score, n_scored, n_excluded, label counts,
        seconds for indexing and for checking.
    """
    rows, docs = pubmedqa(data)
    t0 = time.perf_counter()
    corpus = Corpus.from_documents((str(d["id"]), "", str(d["text"])) for d in docs)
    t_index = time.perf_counter() - t0
    checker = EvidenceChecker(corpus, **settings)
    answers = [_answer(r) for r in rows]
    claims = claims_of(answers, split)
    t1 = time.perf_counter()
    counts = {str(label): 0 for label in Label}
    scores: list[float] = []
    excluded = 0
    for answer, answer_claims in zip(answers, claims, strict=True):
        labels = [checker.check_sync(c, answer).label for c in answer_claims]
        for label in labels:
            counts[str(label)] += 1
        p = _precision(labels)
        if p is None or any(x in (Label.UNKNOWN, Label.ERROR) for x in labels):
            excluded += 1  # as dahl.metrics: no decided claim, or an unknown / error verdict
            continue
        scores.append(p)
    t_check = time.perf_counter() - t1
    n_claims = sum(len(c) for c in claims)
    return {
        "dahl_score": round(sum(scores) / len(scores), 4) if scores else None,
        "n_answers": len(answers),
        "n_scored": len(scores),
        "n_excluded": excluded,
        "n_claims": n_claims,
        "labels": counts,
        "index_seconds": round(t_index, 3),
        "check_seconds": round(t_check, 3),
        "claims_per_second": round(n_claims / t_check, 1) if t_check else None,
    }


_GRID: dict[str, Sequence[Any]] = {
    "support_threshold": (0.25, 0.3, 0.35, 0.4, 0.45),
}


def _tune(
    corpus: Corpus, answers: Sequence[Answer], claims: Sequence[Sequence[Claim]], base: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Grid search on even rows; returns the best settings and every trial."""
    trials: list[dict[str, Any]] = []
    best: tuple[float, dict[str, Any]] = (-1.0, {})
    keys = list(_GRID)
    for values in itertools.product(*(_GRID[k] for k in keys)):
        params = {**base, **dict(zip(keys, values, strict=True))}
        score = evidence_pairwise(EvidenceChecker(corpus, **params), answers, claims, lambda q: q % 2 == 0)
        trials.append({**params, "even_accuracy": round(score.accuracy, 4)})
        if score.accuracy > best[0]:
            best = (score.accuracy, params)
    return best[1], trials


def medhallu_pubmedqa_exclusion(
    data: Path, split: Callable[[Answer], list[Claim]], **settings: Any
) -> dict[str, Any]:
    """Share of MedHallu answers excluded (a claim unknown) with PubMedQA abstracts as the corpus.

    Each MedHallu row's question is matched to its PubMedQA item by text, and
    its answers search only that abstract (``evidence_ids``); a question with no
    match searches the whole corpus.
    """
    pub_rows, docs = pubmedqa(data)
    corpus = Corpus.from_documents((str(d["id"]), "", str(d["text"])) for d in docs)
    by_question = {normalize_text(str(r["question"])): str(r["id"]) for r in pub_rows}
    checker = EvidenceChecker(corpus, **settings)
    answer_rows, _ = medhallu(data)
    excluded = matched = 0
    for row in answer_rows:
        pmid = by_question.get(normalize_text(str(row["question"])))
        matched += pmid is not None
        meta = {**row["meta"], "evidence_ids": [pmid]} if pmid else {k: v for k, v in row["meta"].items() if k != "evidence_ids"}
        answer = _answer({**row, "meta": meta})
        labels = [checker.check_sync(c, answer).label for c in split(answer)]
        excluded += any(x == Label.UNKNOWN for x in labels)
    return {"n_answers": len(answer_rows), "matched_to_abstract": matched, "n_excluded": excluded,
            "excluded_share": round(excluded / len(answer_rows), 4) if answer_rows else None}


def run(data: Path, rows: int | None, tune: bool) -> dict[str, Any]:
    """Compute every figure; see the module docstring."""
    splitter_name, split = _load_splitter()
    answers, corpus = medhallu_answers(data, rows)
    claims = claims_of(answers, split)
    knowledge: dict[int, str] = {}
    for p in corpus.passages:
        qid = int(p.doc_id.split("-")[0])
        knowledge[qid] = knowledge.get(qid, "") + " " + p.text
    odd: Callable[[int], bool] = lambda q: q % 2 == 1  # noqa: E731

    defaults = asdict(EvidenceSettings())
    chosen, trials = _tune(corpus, answers, claims, defaults) if tune else (defaults, [])
    med: dict[str, Any] = {"splitter": splitter_name, "n_questions": len(answers) // 2,
                           "n_claims": sum(len(c) for c in claims), "tuned_on": "even rows",
                           "chosen": chosen}
    variants = {
        "evidence_default": defaults,
        "evidence_tuned": chosen,
        "evidence_tuned_unrestricted": {**chosen, "restrict": False},
    }
    for name, params in variants.items():
        checker = EvidenceChecker(corpus, **params)
        t0 = time.perf_counter()
        med[name] = {
            "odd": evidence_pairwise(checker, answers, claims, odd).as_dict(),
            "all": evidence_pairwise(checker, answers, claims).as_dict(),
            "seconds": round(time.perf_counter() - t0, 3),
        }
    fixed = claims_of(answers, regex_claims)
    med["evidence_default_regex_claims_first200"] = evidence_pairwise(
        EvidenceChecker(medhallu_answers(data, 200)[1]), answers[:400], fixed[:400]
    ).as_dict()
    for rule in ("token_share", "claim_overlap"):
        med[f"baseline_{rule}"] = {
            "odd": baseline_pairwise(answers, claims, knowledge, rule, odd).as_dict(),
            "all": baseline_pairwise(answers, claims, knowledge, rule).as_dict(),
        }
    med["top_trials"] = sorted(trials, key=lambda t: -float(t["even_accuracy"]))[:5]
    pubmed = {
        name: {"settings": params, **pubmedqa_score(data, split, **params)}
        for name, params in (("default", defaults), ("tuned", chosen))
    }
    med["excluded_with_pubmedqa_corpus"] = medhallu_pubmedqa_exclusion(data, split, **chosen)
    med["excluded_with_whole_pubmedqa_corpus"] = medhallu_pubmedqa_exclusion(
        data, split, **{**chosen, "restrict": False}
    )
    return {"medhallu": med, "pubmedqa": pubmed, "healthver": healthver_figures(data, "heldout")}


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; prints the figures as JSON and returns 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.offline_eval")
    parser.add_argument("--data", type=Path, default=None, help="shared data folder")
    parser.add_argument("--rows", type=int, default=None, help="first N MedHallu rows only")
    parser.add_argument("--no-tune", action="store_true", help="skip the grid search")
    parser.add_argument("--healthver", action="store_true", help="only the HealthVer figures (held-back part)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s logs every index build at DEBUG
    data = args.data or shared_data_dir()
    if args.healthver:
        result = {"healthver": healthver_figures(data, "heldout"), "healthver_all_rows": healthver_figures(data, "all")}
    else:
        result = run(data, args.rows, not args.no_tune)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
