"""How well the rule Splitter's claim counts track human atomic-fact counts.

Data: the FActScore human annotations (Min et al. 2023, "FActScore",
``shared/data/factscore/labeled/{InstructGPT,ChatGPT,PerplexityAI}.jsonl``),
read directly with :mod:`json`. For every non-abstained answer (``annotations``
not null) three per-answer counts are compared with the human count:

* ``rules``: claims from :func:`dahl.adapters._rules.split_claims` on ``output``;
* ``instructgpt_facts``: FActScore's automatic splitter (InstructGPT), the sum of
  ``model-atomic-facts`` over all sentences;
* ``sentences``: sentences from :func:`dahl.sentences.split_sentences`;
* ``rules_relevant`` / ``instructgpt_facts_relevant``: the same two splitters
  counted on the relevant annotated sentences only (the rule Splitter run on
  each sentence's ``text``). A diagnostic, not the acceptance figure: it
  separates how well a splitter counts facts from whether the answer's
  sentences are about the topic at all, which no splitter of the text can know
  (PerplexityAI answers often describe a namesake: human count 0).

Human count (``human``): the number of ``human-atomic-facts`` of the relevant
sentences; sentences marked ``is-relevant=false`` have no human facts and add
0. This is the convention that reproduces the reference figures (InstructGPT
facts r = 0.62, sentences r = 0.51, pooled over the three models). The variant
``human_with_irrelevant`` adds the model atomic facts of irrelevant sentences
(the FActScore convention for scoring, DESIGN.md §4), reported alongside.

Figures: Pearson r (:func:`scipy.stats.pearsonr`) and mean ratio (mean over
answers of count / human, answers with human = 0 skipped) per model and pooled
(``all``). Run::

    python -m bench.splitter_eval [DATA_DIR]

DATA_DIR defaults to $DAHL_SHARED_DATA or ../shared/data beside the repository.
Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from scipy.stats import pearsonr  # type: ignore[import-untyped]

from dahl.adapters._rules import split_claims
from dahl.sentences import split_sentences

MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")
COUNTERS = ("rules", "instructgpt_facts", "sentences", "rules_relevant", "instructgpt_facts_relevant")


def default_data_dir() -> Path:
    """$DAHL_SHARED_DATA, else ``shared/data`` beside the repository."""
    env = os.environ.get("DAHL_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def answer_counts(row: dict[str, Any]) -> dict[str, int]:
    """Per-answer counts for one FActScore row with non-null ``annotations``."""
    human = with_irrelevant = facts = rules_relevant = facts_relevant = 0
    for sentence in row["annotations"]:
        model_facts = len(sentence.get("model-atomic-facts") or [])
        facts += model_facts
        if sentence.get("human-atomic-facts") is not None:
            n = len(sentence["human-atomic-facts"])
            human += n
            with_irrelevant += n
            rules_relevant += len(split_claims(sentence["text"]))
            facts_relevant += model_facts
        elif sentence.get("is-relevant") is False:
            with_irrelevant += model_facts
    return {
        "human": human,
        "human_with_irrelevant": with_irrelevant,
        "instructgpt_facts": facts,
        "rules": len(split_claims(row["output"])),
        "sentences": len(split_sentences(row["output"])),
        "rules_relevant": rules_relevant,
        "instructgpt_facts_relevant": facts_relevant,
    }


def _figures(rows: list[dict[str, int]], reference: str) -> dict[str, dict[str, float | int]]:
    human = [r[reference] for r in rows]
    out: dict[str, dict[str, float | int]] = {}
    for name in COUNTERS:
        counts = [r[name] for r in rows]
        ratios = [c / h for c, h in zip(counts, human, strict=True) if h > 0]
        out[name] = {
            "pearson_r": round(float(pearsonr(counts, human).statistic), 4),
            "mean_ratio": round(sum(ratios) / len(ratios), 4),
            "n": len(rows),
        }
    return out


def evaluate(data_dir: Path) -> dict[str, Any]:
    """Measure the three counters against the human counts.

    Args:
        data_dir: the shared data folder (holds ``factscore/labeled``).

    Returns:
        ``{"human": {model|"all": {counter: {pearson_r, mean_ratio, n}}},
        "human_with_irrelevant": {...}, "rules_us_per_sentence": float}``.

    Raises:
        FileNotFoundError: a FActScore file is missing.
    """
    per_model: dict[str, list[dict[str, int]]] = {}
    n_sentences = 0
    elapsed = 0.0
    for model in MODELS:
        path = data_dir / "factscore" / "labeled" / f"{model}.jsonl"
        with path.open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        counted = []
        for row in rows:
            if row["annotations"] is None:
                continue
            t0 = time.perf_counter()
            c = answer_counts(row)
            elapsed += time.perf_counter() - t0
            n_sentences += c["sentences"]
            counted.append(c)
        per_model[model] = counted
    pooled = [c for rows in per_model.values() for c in rows]
    result: dict[str, Any] = {}
    for reference in ("human", "human_with_irrelevant"):
        table = {m: _figures(rows, reference) for m, rows in per_model.items()}
        table["all"] = _figures(pooled, reference)
        result[reference] = table
    result["totals"] = {
        name: sum(c[name] for c in pooled)
        for name in ("human", "human_with_irrelevant", *COUNTERS)
    }
    # Rules + segmentation, run on the answer and again on its relevant sentences: an upper bound.
    result["count_us_per_sentence"] = round(elapsed / max(n_sentences, 1) * 1e6, 1)
    return result


def main(argv: list[str]) -> int:
    """Entry point: print the figures as JSON; 2 when the data is missing."""
    data_dir = Path(argv[0]) if argv else default_data_dir()
    if not (data_dir / "factscore" / "labeled").is_dir():
        sys.stderr.write(f"FActScore data not found under {data_dir}\n")
        return 2
    sys.stdout.write(json.dumps(evaluate(data_dir), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
