"""Preference pairs for DPO from scored runs (TRL's prompt/chosen/rejected layout).

Questions are matched by ``question_id``; prompt and responses are read by streaming each run's
``answers.jsonl``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import orjson

from dahl.errors import ConfigError, InputError
from dahl.analysis._verdicts import Verdicts, canonical_metric, load_runs

__all__ = ["Pair", "find_pairs", "write_pairs"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    """One preference: answer rows of the store and their scores (chosen > rejected)."""

    chosen: int
    rejected: int
    chosen_score: float
    rejected_score: float

    @property
    def margin(self) -> float:
        """chosen_score − rejected_score (> 0)."""
        return self.chosen_score - self.rejected_score


def find_pairs(
    store: Verdicts,
    *,
    metric: str = "precision",
    min_margin: float = 0.0,
    best_vs_worst: bool = False,
    gamma: float | None = None,
    k: int | None = None,
) -> Iterator[Pair]:
    """Yield the preference pairs of ``store``.

    Per question with included answers (inside the metric's mask) of two or more models,
    every pair of answers of two models whose scores differ by > 0 and >= ``min_margin``,
    the higher one chosen; with ``best_vs_worst`` only the best against the worst.

    Args:
        metric: a metric of :meth:`Verdicts.scores` but ``n_claims``.
        min_margin: smallest score difference kept, a fraction (0.1 = 10 points).
        gamma, k: FActScore γ and F1@K's K (None: the run's).

    Yields pairs grouped by question, in question-code order.

    Raises:
        ConfigError: unknown metric, ``n_claims``, a negative margin, or a recall metric on a
            run without recall (named).
    """
    name = canonical_metric(metric)
    if name == "n_claims":
        raise ConfigError("n_claims is not a quality score; pick precision, factscore, factscore_init, f1_at_k, "
                          "or with recall recall, recall_w, f1, f1_w")
    if min_margin < 0:
        raise ConfigError(f"--min-margin must be >= 0, got {min_margin}")
    values, mask = store.scores(name, gamma=gamma, k=k)
    rows = np.flatnonzero(mask)
    question = np.asarray(store.question)[rows]
    order = np.argsort(question, kind="stable")
    rows, question = rows[order], question[order]
    model = np.asarray(store.model)
    starts = np.flatnonzero(np.r_[True, question[1:] != question[:-1]]) if rows.size else np.zeros(0, np.intp)
    ends = np.r_[starts[1:], rows.size]
    for b, e in zip(starts.tolist(), ends.tolist()):
        group = rows[b:e]
        if np.unique(model[group]).size < 2:
            continue
        # Highest score first; ties broken by row so the output is deterministic.
        ranked = sorted(group.tolist(), key=lambda r: (-values[r], r))
        candidates = [(ranked[0], ranked[-1])] if best_vs_worst else [
            (hi, lo) for i, hi in enumerate(ranked) for lo in ranked[i + 1 :]
        ]
        for hi, lo in candidates:
            margin = float(values[hi] - values[lo])
            # 1e-12: a margin like 0.7 - 0.4 = 0.29999999999999993 still meets --min-margin 0.3.
            if model[hi] != model[lo] and margin > 0 and margin >= min_margin - 1e-12:
                yield Pair(hi, lo, float(values[hi]), float(values[lo]))


class _Text(msgspec.Struct):
    id: str
    question: str = ""
    response: str = ""


def _texts(run_dir: Path, wanted: set[str]) -> dict[str, tuple[str, str]]:
    """(question, response) of the wanted answer ids, streaming ``answers.jsonl`` once."""
    path = run_dir / "answers.jsonl"
    decoder = msgspec.json.Decoder(_Text)
    out: dict[str, tuple[str, str]] = {}
    try:
        with path.open("rb") as f:
            for line_no, raw in enumerate(f, start=1):
                try:
                    rec = decoder.decode(raw)
                except msgspec.DecodeError as exc:
                    raise InputError(str(exc), file=str(path), line=line_no) from None
                if rec.id in wanted:
                    out[rec.id] = (rec.question, rec.response)
    except OSError as exc:
        raise InputError(f"cannot read answers: {exc}", file=str(path)) from None
    return out


def write_pairs(
    run_dirs: Sequence[Path],
    out_path: Path,
    *,
    metric: str = "precision",
    min_margin: float = 0.0,
    best_vs_worst: bool = False,
    gamma: float | None = None,
    k: int | None = None,
) -> int:
    """Write the preference pairs of ``run_dirs`` to ``out_path`` (JSONL, one pair a line).

    Each line: ``{"prompt", "chosen", "rejected", "chosen_score", "rejected_score", "margin",
    "chosen_id", "rejected_id", "chosen_model", "rejected_model", "question_id", "metric"}``.
    ``metric``, ``min_margin``, ``best_vs_worst``, ``gamma``, ``k``: see :func:`find_pairs`.

    Returns the number of pairs written.

    Raises:
        InputError: a run without a store or a readable ``answers.jsonl``, or a pair's answer not in it.
        ConfigError: see :func:`find_pairs` and :func:`dahl.analysis._verdicts.merge_verdicts`.
    """
    store = load_runs(run_dirs)
    name = canonical_metric(metric)
    pairs = list(find_pairs(store, metric=name, min_margin=min_margin, best_vs_worst=best_vs_worst, gamma=gamma, k=k))
    ids = store.ids
    source = np.zeros(store.n_answers, np.int16) if store.source is None else np.asarray(store.source)
    wanted: list[set[str]] = [set() for _ in store.roots]
    for p in pairs:
        for row in (p.chosen, p.rejected):
            wanted[int(source[row])].add(ids[row])
    texts = [_texts(root, want) if want else {} for root, want in zip(store.roots, wanted)]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with tmp.open("wb") as f:
        for p in pairs:
            c_src, r_src = int(source[p.chosen]), int(source[p.rejected])
            c_id, r_id = ids[p.chosen], ids[p.rejected]
            if c_id not in texts[c_src] or r_id not in texts[r_src]:
                missing = c_id if c_id not in texts[c_src] else r_id
                raise InputError(f"answer {missing!r} is in the verdict store but not in answers.jsonl",
                                 file=str(store.roots[c_src if missing == c_id else r_src] / "answers.jsonl"))
            question, chosen = texts[c_src][c_id]
            _, rejected = texts[r_src][r_id]
            record = {
                "prompt": question,
                "chosen": chosen,
                "rejected": rejected,
                "chosen_score": p.chosen_score,
                "rejected_score": p.rejected_score,
                "margin": p.margin,
                "chosen_id": c_id,
                "rejected_id": r_id,
                "chosen_model": store.models[int(store.model[p.chosen])],
                "rejected_model": store.models[int(store.model[p.rejected])],
                "question_id": store.question_ids[int(store.question[p.chosen])],
                "metric": name,
            }
            f.write(orjson.dumps(record) + b"\n")
    tmp.replace(out_path)
    logger.info("wrote %d pairs to %s", len(pairs), out_path)
    return len(pairs)
