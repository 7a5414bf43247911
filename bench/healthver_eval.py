"""HealthVer figures of the evidence Checker on the held-back part of the shared split.

Each row (claim, evidence passage, label) is checked against its own evidence
only: one corpus holds every evidence passage of the shared split (document id
= the row id) and the claim's answer names that row's id in
``meta.evidence_ids``. The 3-way label is read from the verdict the Checker
writes: supported -> Supports, unsupported with reason ``contradicted`` ->
Refutes, anything else (unsupported with reason ``no_evidence``, irrelevant,
unknown) -> Neutral. Supports-vs-Refutes accuracy: over rows labelled Supports
or Refutes, the share where the larger of P(supports) and P(refutes) of the
deciding passage names the gold label (a stated claim counts as Supports);
``supports_vs_refutes_from_reason`` reads it from the verdict instead (Refutes
when the reason is ``contradicted``). ``model_class`` scores the support model's
own class for the deciding passage instead of the verdict (a stated claim is
Supports, a claim set aside before the model Neutral). Baselines on the same rows: always Neutral, and a token-overlap
rule (share of the claim's content tokens found in the evidence >= 0.5 ->
Supports, else Neutral).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.train_checker import SPLIT, healthver_rows
from dahl.adapters._corpus import Corpus
from dahl.adapters._evidence import EvidenceChecker
from dahl.records import Answer, Claim, Label, UnsupportedReason

__all__ = ["healthver_figures", "macro_f1"]

_LABELS = ("Supports", "Refutes", "Neutral")
_WORD = re.compile(r"\w+")
_STOP = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with we our were which has have had been can".split()
)


def macro_f1(gold: list[str], predicted: list[str]) -> tuple[float, float]:
    """(accuracy, macro-F1 over Supports/Refutes/Neutral); an empty class's F1 counts 0."""
    f1s = []
    for label in _LABELS:
        tp = sum(g == p == label for g, p in zip(gold, predicted, strict=True))
        fp = sum(p == label != g for g, p in zip(gold, predicted, strict=True))
        fn = sum(g == label != p for g, p in zip(gold, predicted, strict=True))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    accuracy = sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold) if gold else 0.0
    return accuracy, sum(f1s) / len(f1s)


def _overlap(claim: str, evidence: str) -> float:
    tokens = [t for t in _WORD.findall(claim.lower()) if t not in _STOP]
    have = set(_WORD.findall(evidence.lower()))
    return sum(t in have for t in tokens) / len(tokens) if tokens else 0.0


def _scores(gold: list[str], predicted: list[str], sr: list[bool]) -> dict[str, Any]:
    accuracy, f1 = macro_f1(gold, predicted)
    return {"accuracy": round(accuracy, 4), "macro_f1": round(f1, 4),
            "supports_vs_refutes_accuracy": round(sum(sr) / len(sr), 4) if sr else None}


def healthver_figures(data: Path, part: str = "heldout", **settings: Any) -> dict[str, Any]:
    """3-way accuracy and macro-F1, Supports-vs-Refutes accuracy, and baselines on one part.

    Args:
        data: the shared data folder.
        part: ``"heldout"`` (not trained on), ``"train"`` or ``"all"``.
        settings: :class:`~dahl.adapters._evidence.EvidenceChecker` settings.
    """
    rows = healthver_rows(data)
    corpus = Corpus.from_documents((r["id"], "", r["evidence"]) for r in rows)
    checker = EvidenceChecker(corpus, **settings)
    chosen = [r for r in rows if part == "all" or r["part"] == part]
    gold, predicted, sr, reason_sr, model_class = [], [], [], [], []
    overlap_pred, overlap_sr = [], []
    for r in chosen:
        answer = Answer(id=r["id"], question="", response=r["claim"], model="healthver",
                        meta={"evidence_ids": [r["id"]]})
        a = checker.assess(Claim(text=r["claim"].strip(), index=0), answer)
        p = a.probabilities
        contradicted = a.unsupported == UnsupportedReason.CONTRADICTED
        label = "Supports" if a.label == Label.SUPPORTED else "Refutes" if contradicted else "Neutral"
        gold.append(r["label"])
        predicted.append(label)
        model_class.append("Supports" if a.stated else "Neutral" if p is None else _LABELS[int(p.argmax())])
        share = _overlap(r["claim"], r["evidence"])
        overlap_pred.append("Supports" if share >= 0.5 else "Neutral")
        if r["label"] in ("Supports", "Refutes"):
            guess = "Refutes" if p is not None and p[1] > p[0] and not a.stated else "Supports"
            sr.append(guess == r["label"])
            reason_sr.append(("Refutes" if contradicted else "Supports") == r["label"])
            overlap_sr.append(r["label"] == "Supports")
    counts = {k: predicted.count(k) for k in _LABELS}
    return {
        "part": part,
        "split": SPLIT,
        "rows": len(chosen),
        "claims": len({r["claim"].strip() for r in chosen}),
        "gold": {k: gold.count(k) for k in _LABELS},
        "predicted": counts,
        "evidence_checker": _scores(gold, predicted, sr),
        "model_class": _scores(gold, model_class, sr),
        "supports_vs_refutes_from_reason": round(sum(reason_sr) / len(reason_sr), 4) if reason_sr else None,
        "baseline_majority_neutral": _scores(gold, ["Neutral"] * len(gold), [r == "Supports" for r in gold if r != "Neutral"]),
        "baseline_token_overlap": _scores(gold, overlap_pred, overlap_sr),
        "fingerprint": checker.fingerprint,
    }
