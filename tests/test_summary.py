"""Specification of dahl.analysis._summary.SummaryBuilder: per-model and per-category aggregation."""

from __future__ import annotations

import hashlib
import json
import math
import random
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dahl.errors import ConfigError, InputError
from dahl.metrics import REASONS, answer_metrics, answer_recall, bootstrap_ci, group_seed
from dahl.records import (
    LABELS,
    AnswerRecall,
    AnswerResult,
    ClaimResult,
    Coverage,
    FactMark,
    FactResult,
    Label,
    RecallDigest,
    ResultDigest,
    Status,
    UnsupportedReason,
)
from dahl.analysis._summary import RecordedRecallSettings, SummaryBuilder

BLOCK_KEYS = {
    "n_answers", "n_scored", "n_abstained", "n_excluded", "excluded_by_reason", "n_factscore",
    "dahl_score", "dahl_score_ci", "factscore", "factscore_init", "f1_at_k", "labels",
}


def result(
    counts: list[int], *, model: str = "m", category: str = "all", status: Status = Status.SCORED, rid: str = "x"
) -> AnswerResult:
    """An AnswerResult with the given S, U, I, N, E counts and no claim texts."""
    return AnswerResult(
        id=rid,
        model=model,
        category=category,
        status=status,
        claims=(),
        counts={str(label): n for label, n in zip(LABELS, counts)},
        metrics=answer_metrics(counts),
        input_hash=rid,
    )


def hand_example() -> list[AnswerResult]:
    """Model m: a (cat x), b, c, d (cat y), e (cat x); model n: one answer."""
    return [
        result([3, 1, 1, 0, 0], category="x"),  # a: precision .75, FActScore .6
        result([0, 0, 2, 0, 0], category="y"),  # b: only irrelevant
        result([1, 1, 0, 1, 0], category="y"),  # c: unknown claim
        result([5, 0, 0, 0, 0], category="y", status=Status.ABSTAINED),  # d
        result([2, 2, 0, 0, 0], category="x"),  # e: precision .5
        result([1, 0, 0, 0, 0], model="n", status=Status.ERROR),  # split failed
    ]


def floats(obj: Any) -> list[float]:
    """Every float inside a nested dict/list."""
    if isinstance(obj, float):
        return [obj]
    if isinstance(obj, dict):
        return [f for v in obj.values() for f in floats(v)]
    if isinstance(obj, list):
        return [f for v in obj for f in floats(v)]
    return []


class TestSummaryBuilder:
    def test_empty_builder(self) -> None:
        """No answers gives no models."""
        assert SummaryBuilder().build().as_builtins() == {"models": {}}

    def test_block_keys(self) -> None:
        """A model block has exactly the documented keys plus categories; a category block has no categories."""
        builder = SummaryBuilder(n_boot=50)
        for r in hand_example():
            builder.add(r)
        block = builder.build().as_builtins()["models"]["m"]
        assert set(block) == BLOCK_KEYS | {"categories"}
        assert set(block["categories"]["x"]) == BLOCK_KEYS
        assert list(block["excluded_by_reason"]) == list(REASONS)
        assert list(block["labels"]) == [str(label) for label in LABELS]

    def test_hand_computed_model_block(self) -> None:
        """Model m: DAHL (0.75+0.5)/2, FActScore init (0.6+0+0.5)/3, F1@64 5/68, counts by reason."""
        builder = SummaryBuilder(gamma=10, k=64, n_boot=200)
        for r in hand_example():
            builder.add(r)
        m = builder.build().as_builtins()["models"]["m"]
        assert (m["n_answers"], m["n_scored"], m["n_abstained"], m["n_excluded"], m["n_factscore"]) == (5, 2, 1, 3, 3)
        assert m["excluded_by_reason"] == {
            "abstained": 1, "no_claims": 0, "only_irrelevant": 1, "unknown_claims": 1,
            "error_claims": 0, "split_error": 0,
        }
        assert m["dahl_score"] == pytest.approx(0.625)
        assert m["factscore_init"] == pytest.approx(1.1 / 3)
        assert m["factscore"] == pytest.approx((0.6 * math.exp(-1) + 0.5 * math.exp(-1.5)) / 3)
        assert m["f1_at_k"] == pytest.approx(5 / 68)
        assert m["labels"] == {"supported": 11, "unsupported": 4, "irrelevant": 3, "unknown": 1, "error": 0}
        lo, hi = m["dahl_score_ci"]
        # Resampling two answers (0.75, 0.5): means are 0.5, 0.625 or 0.75.
        assert 0.5 <= lo <= 0.625 <= hi <= 0.75

    def test_hand_computed_categories(self) -> None:
        """Category x holds a and e (DAHL 0.625); category y scores nothing and gives None, not NaN."""
        builder = SummaryBuilder(n_boot=50)
        for r in hand_example():
            builder.add(r)
        cats = builder.build().as_builtins()["models"]["m"]["categories"]
        assert list(cats) == ["x", "y"]
        assert cats["x"]["dahl_score"] == pytest.approx(0.625)
        assert cats["x"]["n_answers"] == 2
        y = cats["y"]
        assert (y["n_answers"], y["n_scored"], y["n_factscore"]) == (3, 0, 1)
        assert (y["dahl_score"], y["dahl_score_ci"], y["f1_at_k"]) == (None, None, None)
        assert y["factscore_init"] == 0.0

    def test_split_error_model(self) -> None:
        """An answer whose split failed is excluded as split_error even though it has counts."""
        builder = SummaryBuilder(n_boot=10)
        for r in hand_example():
            builder.add(r)
        n = builder.build().as_builtins()["models"]["n"]
        assert (n["n_answers"], n["n_scored"], n["n_excluded"]) == (1, 0, 1)
        assert n["excluded_by_reason"]["split_error"] == 1
        assert n["dahl_score"] is None and n["factscore"] is None and n["dahl_score_ci"] is None

    def test_reasons_recomputed_from_counts(self) -> None:
        """A result marked scored but holding an error claim is excluded as error_claims."""
        builder = SummaryBuilder(n_boot=10)
        builder.add(result([2, 0, 0, 0, 1], status=Status.SCORED))
        block = builder.build().as_builtins()["models"]["m"]
        assert block["n_scored"] == 0
        assert block["excluded_by_reason"]["error_claims"] == 1

    def test_models_sorted_by_name(self) -> None:
        """Models appear in name order, not arrival order."""
        builder = SummaryBuilder(n_boot=10)
        for name in ["zeta", "alpha", "mid"]:
            builder.add(result([1, 0, 0, 0, 0], model=name))
        assert list(builder.build().as_builtins()["models"]) == ["alpha", "mid", "zeta"]

    def test_grows_past_initial_capacity(self) -> None:
        """5,000 answers are all kept: 2,500 at precision 1 and 2,500 at 0 give DAHL 0.5."""
        builder = SummaryBuilder(n_boot=100)
        for i in range(5000):
            builder.add(result([1, 0, 0, 0, 0] if i % 2 else [0, 1, 0, 0, 0]))
        block = builder.build().as_builtins()["models"]["m"]
        assert len(builder) == 5000
        assert block["n_scored"] == 5000
        assert block["dahl_score"] == 0.5
        lo, hi = block["dahl_score_ci"]
        # sd 0.5 / sqrt(5000) = 0.00707; 1.96 sd = 0.01386.
        assert lo == pytest.approx(0.5 - 0.01386, abs=0.004)
        assert hi == pytest.approx(0.5 + 0.01386, abs=0.004)

    def test_memory_grows_with_distinct_rows_not_answers(self) -> None:
        """45,000 more answers of the same 4 rows add under 16 KiB (a row per answer: ~1.6 MiB),
        and the summary is that of the answers, not of the rows."""
        answers = [result(c, model=m) for c in ([1, 0, 0, 0, 0], [2, 1, 0, 0, 0]) for m in ("a", "b")]
        builder = SummaryBuilder(n_boot=50)
        for i in range(5000):
            builder.add(answers[i % 4])
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(45_000):
                builder.add(answers[i % 4])
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown < 16 * 1024
        block = builder.build().as_builtins()["models"]["a"]
        assert block["n_answers"] == 25_000
        assert block["labels"]["supported"] == 12_500 * 1 + 12_500 * 2
        assert block["dahl_score"] == pytest.approx((1.0 + 2 / 3) / 2, rel=1e-12)

    def test_seeded_ci(self) -> None:
        """The same seed gives the same summary; another seed moves the interval."""
        answers = [result([i % 7, 3, 0, 0, 0]) for i in range(60)]

        def build(seed: int) -> dict[str, Any]:
            builder = SummaryBuilder(seed=seed, n_boot=300)
            for r in answers:
                builder.add(r)
            return builder.build().as_builtins()

        assert build(1) == build(1)
        assert build(1)["models"]["m"]["dahl_score_ci"] != build(2)["models"]["m"]["dahl_score_ci"]

    def test_bad_options(self) -> None:
        """γ < 0, K < 1, n_boot < 1 and level outside (0, 1) are configuration errors."""
        for kwargs in ({"gamma": -1.0}, {"k": 0}, {"n_boot": 0}, {"level": 1.5}):
            with pytest.raises(ConfigError):
                SummaryBuilder(**kwargs)

    def test_bad_counts(self) -> None:
        """A negative count in a result is an input error."""
        with pytest.raises(InputError):
            SummaryBuilder().add(result([1, -1, 0, 0, 0]))

    @settings(max_examples=60, deadline=None)
    @given(
        rows=st.lists(
            st.tuples(
                st.lists(st.integers(0, 6), min_size=5, max_size=5),
                st.sampled_from(list(Status)),
                st.sampled_from(["m1", "m2", "m3"]),
                st.sampled_from(["c1", "c2"]),
            ),
            max_size=40,
        ),
        seed=st.integers(0, 2**32 - 1),
    )
    def test_no_nan_and_permutation_invariant(self, rows: list[tuple[list[int], Status, str, str]], seed: int) -> None:
        """Any answers give JSON without NaN, scores in [0, 1], and the same summary in any order."""
        results = [result(c, status=s, model=m, category=cat) for c, s, m, cat in rows]
        first = SummaryBuilder(n_boot=30)
        for r in results:
            first.add(r)
        out = first.build().as_builtins()
        json.dumps(out, allow_nan=False)
        assert not any(math.isnan(f) for f in floats(out))
        for block in out["models"].values():
            for key in ("dahl_score", "factscore", "factscore_init", "f1_at_k"):
                assert block[key] is None or 0.0 <= block[key] <= 1.0
            assert block["n_answers"] == block["n_scored"] + block["n_excluded"]
            assert block["n_excluded"] == sum(block["excluded_by_reason"].values())
        random.Random(seed).shuffle(results)
        second = SummaryBuilder(n_boot=30)
        for r in results:
            second.add(r)
        assert second.build().as_builtins() == out


def factscore_results(path: Path, model: str) -> list[AnswerResult]:
    """FActScore labeled answers as AnswerResults (human facts; irrelevant sentences' model facts as IR)."""
    out: list[AnswerResult] = []
    column = {"S": 0, "NS": 1, "IR": 2}
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            record = json.loads(line)
            counts = [0, 0, 0, 0, 0]
            for sentence in record["annotations"] or []:
                if sentence.get("is-relevant") is False:
                    counts[2] += len(sentence.get("model-atomic-facts") or [])
                    continue
                for fact in sentence.get("human-atomic-facts") or []:
                    counts[column[fact["label"]]] += 1
            status = Status.ABSTAINED if record["annotations"] is None else Status.SCORED
            out.append(result(counts, model=model, category=record["cat"][0], status=status, rid=f"{model}-{i}"))
    return out


@pytest.mark.data
class TestSummaryOnFactscoreHumanLabels:
    def test_three_models(self, shared_data: Path) -> None:
        """One builder over the three labeled files reproduces FActScore init and DAHL per model."""
        builder = SummaryBuilder(n_boot=500)
        for model in ("InstructGPT", "ChatGPT", "PerplexityAI"):
            path = shared_data / "factscore" / "labeled" / f"{model}.jsonl"
            if not path.is_file():
                pytest.skip(f"{path} not found (set DAHL_SHARED_DATA to the shared data folder)")
            for r in factscore_results(path, model):
                builder.add(r)
        models = builder.build().as_builtins()["models"]
        expected = {
            # model: (factscore_init %, n_factscore, dahl %, n_scored, n_abstained, S, U)
            "InstructGPT": (41.9, 127, 47.5, 125, 1, 1426, 1306),
            "ChatGPT": (57.5, 110, 61.8, 110, 18, 2179, 1188),
            "PerplexityAI": (69.3, 115, 82.6, 106, 13, 3240, 545),
        }
        assert list(models) == ["ChatGPT", "InstructGPT", "PerplexityAI"]
        for model, (fs, n_fs, dahl, n_dahl, n_abst, s, u) in expected.items():
            block = models[model]
            assert block["n_answers"] == 128
            assert (block["n_factscore"], block["n_scored"], block["n_abstained"]) == (n_fs, n_dahl, n_abst)
            assert 100 * block["factscore_init"] == pytest.approx(fs, abs=0.05)
            assert 100 * block["dahl_score"] == pytest.approx(dahl, abs=0.05)
            assert (block["labels"]["supported"], block["labels"]["unsupported"]) == (s, u)
            lo, hi = block["dahl_score_ci"]
            assert lo < block["dahl_score"] < hi
            assert sum(c["n_answers"] for c in block["categories"].values()) == 128


# --- recall (summary.json "recall" blocks and "recall_settings") -------------------------

SETTINGS = RecordedRecallSettings(refs="refs.jsonl", refs_sha256="ab" * 32, coverage="exact/1")
RECALL_KEYS = [
    "n", "n_abstained", "null_by_reason", "recall", "recall_ci", "recall_w", "recall_w_ci", "f1", "f1_ci",
    "f1_w", "f1_w_ci", "recall_at_5", "recall_at_10", "recall_at_20", "rho", "facts", "f1_of_means",
]
C, N, P, E = Coverage.COVERED, Coverage.NOT_COVERED, Coverage.PARTIAL, Coverage.ERROR


def judged(*facts: tuple[float, Coverage]) -> list[FactResult]:
    """F* facts with weights and labels, ids f1, f2, …"""
    return [FactResult(id=f"f{i}", text=f"fact {i}", weight=w, label=lab) for i, (w, lab) in enumerate(facts, 1)]


def with_recall(
    counts: list[int], facts: list[FactResult] | None, *, category: str, status: Status = Status.SCORED, rid: str
) -> AnswerResult:
    """An answer of model m with recall from dahl.metrics.answer_recall (None: no reference set)."""
    base = result(counts, category=category, status=status, rid=rid)
    if facts is None:
        return base
    prec = base.metrics.precision if status == Status.SCORED else None
    rec = answer_recall(facts, precision=prec, abstained=status == Status.ABSTAINED)
    return msgspec.structs.replace(base, recall=rec)


def recall_example() -> list[AnswerResult]:
    """Seven answers of model m covering every recall case (values worked out in the tests)."""
    return [
        # a: P = .75; credit 1,0,1,0: Rec .5, Rec^w (1 + .25)/2 = .625, F1 .6, F1^w .9375/1.375
        with_recall([3, 1, 0, 0, 0], judged((1, C), (0.5, N), (0.25, C), (0.25, N)), category="x", rid="a"),
        with_recall([0, 0, 0, 0, 0], judged((1, C), (1, C)), category="y", status=Status.ABSTAINED, rid="b"),
        with_recall([2, 0, 0, 0, 0], judged(), category="x", rid="c"),  # empty F*
        with_recall([1, 1, 0, 0, 0], judged((0, C), (0, N)), category="y", rid="d"),  # Σ imp = 0: Rec .5, F1 .5
        with_recall([1, 0, 0, 0, 0], None, category="x", rid="e"),  # no reference set
        with_recall([0, 0, 0, 0, 0], judged((1, C)), category="y", status=Status.ERROR, rid="f"),  # split error
        with_recall([4, 0, 0, 0, 0], judged((1, C), (1, E)), category="x", rid="g"),  # coverage error
    ]


def built(results: list[AnswerResult], **kwargs: Any) -> dict[str, Any]:
    builder = SummaryBuilder(n_boot=200, **kwargs)
    for r in results:
        builder.add(r)
    return builder.build().as_builtins()


class TestSummaryRecall:
    def test_without_refs_summary_is_byte_identical(self) -> None:
        """Without reference facts summary.json's bytes are those of the summary before recall existed."""
        out = built(hand_example())
        payload = orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        # sha256 of the same bytes from dahl/summary.py at f96e4d8 (before recall).
        assert hashlib.sha256(payload).hexdigest() == "053769d9dca3a0ad32fae99d149e7ff4ac518b19f06bb2436d54cafc1912926a"
        assert "recall_settings" not in out
        assert all("recall" not in b for b in out["models"].values())

    def test_hand_computed_model_block(self) -> None:
        """The model block's recall object has the hand-computed means, counts and reasons."""
        rec = built(recall_example(), recall_settings=SETTINGS)["models"]["m"]["recall"]
        assert list(rec) == RECALL_KEYS
        assert rec["n"] == 3  # a, b, d
        assert rec["n_abstained"] == 1
        assert rec["null_by_reason"] == {"empty_fstar": 1, "zero_weight": 1, "coverage_error": 1, "split_error": 1,
                                         "no_refs": 1}
        assert rec["recall"] == pytest.approx(1 / 3)  # (.5 + 0 + .5) / 3
        assert rec["recall_w"] == pytest.approx(0.3125)  # (.625 + 0) / 2
        assert rec["f1"] == pytest.approx(1.1 / 3)  # (.6 + 0 + .5) / 3
        assert rec["f1_w"] == pytest.approx(0.9375 / 1.375 / 2)
        for k in (5, 10, 20):
            assert rec[f"recall_at_{k}"] == pytest.approx(1 / 3)
        assert rec["rho"] == 3.0  # a, c, d, g: (4 + 2 + 2 + 4) / 4
        assert rec["facts"] == pytest.approx(8 / 3)  # a 4, b 2, d 2
        # F1 of the means: the model's DAHL Score (.85) and mean Rec (1/3), beside the mean of the per-answer F1.
        assert built(recall_example(), recall_settings=SETTINGS)["models"]["m"]["dahl_score"] == pytest.approx(0.85)
        assert rec["f1_of_means"] == pytest.approx(2 * 0.85 / 3 / (0.85 + 1 / 3))  # 0.479, not f1's 0.367

    def test_hand_computed_categories(self) -> None:
        """Category blocks get their own recall objects over their own answers."""
        cats = built(recall_example(), recall_settings=SETTINGS)["models"]["m"]["categories"]
        x, y = cats["x"]["recall"], cats["y"]["recall"]
        assert (x["n"], x["n_abstained"], x["recall"], x["recall_w"], x["f1"]) == (1, 0, 0.5, 0.625, pytest.approx(0.6))
        assert x["null_by_reason"] == {"empty_fstar": 1, "zero_weight": 0, "coverage_error": 1, "split_error": 0,
                                       "no_refs": 1}
        assert x["recall_ci"] == [0.5, 0.5]
        assert x["rho"] == pytest.approx(10 / 3)  # a 4, c 2, g 4
        assert x["facts"] == 4.0
        got = (y["n"], y["n_abstained"], y["recall"], y["recall_w"], y["f1"], y["f1_w"])
        assert got == (2, 1, 0.25, 0.0, 0.25, 0.0)
        assert y["null_by_reason"]["zero_weight"] == 1 and y["null_by_reason"]["split_error"] == 1
        assert (y["rho"], y["facts"]) == (2.0, 2.0)

    def test_ci_is_the_seeded_bootstrap(self) -> None:
        """recall_ci is bootstrap_ci of the per-answer Rec with the group's seed, as dahl_score_ci is seeded."""
        rec = built(recall_example(), recall_settings=SETTINGS, seed=7)["models"]["m"]["recall"]
        expected = bootstrap_ci([0.5, 0.0, 0.5], rng=np.random.default_rng(group_seed(7, "m")), n_boot=200)
        assert expected is not None
        assert rec["recall_ci"] == [expected[0], expected[1]]

    def test_precision_figures_unchanged_by_recall(self) -> None:
        """Adding recall to the answers changes no precision figure of any block."""
        plain = [msgspec.structs.replace(r, recall=msgspec.UNSET) for r in recall_example()]
        with_rec = built(recall_example(), recall_settings=SETTINGS)["models"]["m"]
        without = built(plain)["models"]["m"]
        assert {k: v for k, v in with_rec.items() if k not in ("recall", "categories")} == {
            k: v for k, v in without.items() if k != "categories"}

    def test_settings_at_top_level(self) -> None:
        """recall_settings is the settings object as given (Struct or mapping); None when recall came without it."""
        expected = {"refs": "refs.jsonl", "refs_sha256": "ab" * 32, "coverage": "exact/1", "partial": "strict",
                    "fstar_k": None, "fstar_min_importance": None, "alpha": 0.5, "beta": 0.5, "recall_at_order": {}}
        assert built(recall_example(), recall_settings=SETTINGS)["recall_settings"] == expected
        assert built(recall_example(), recall_settings=expected)["recall_settings"] == expected
        assert built(recall_example())["recall_settings"] is None

    def test_settings_without_any_recall(self) -> None:
        """With settings but no answer matched to a set, every answer is no_refs and every mean None."""
        rec = built(hand_example(), recall_settings=SETTINGS)["models"]["m"]["recall"]
        assert rec["n"] == 0
        assert rec["null_by_reason"] == {"empty_fstar": 0, "zero_weight": 0, "coverage_error": 0, "split_error": 0,
                                         "no_refs": 5}
        assert all(rec[key] is None for key in RECALL_KEYS[3:])

    def test_recall_seen_late_counts_earlier_answers_as_no_refs(self) -> None:
        """5,000 answers without recall, then one with it: the 5,000 are no_refs, across a staging flush."""
        answers = [result([1, 0, 0, 0, 0], rid=str(i)) for i in range(5000)]
        answers.append(with_recall([1, 0, 0, 0, 0], judged((1, C), (1, N)), category="all", rid="last"))
        rec = built(answers)["models"]["m"]["recall"]
        assert (rec["n"], rec["null_by_reason"]["no_refs"], rec["recall"], rec["rho"]) == (1, 5000, 0.5, 1.0)

    def test_digest_gives_the_same_summary(self) -> None:
        """Decoding answers.jsonl lines to ResultDigest (no fact texts) gives the summary of the full results."""
        decoder = msgspec.json.Decoder(ResultDigest)
        digests = [decoder.decode(msgspec.json.encode(r)) for r in recall_example()]
        first = digests[0].recall
        assert isinstance(first, RecallDigest)
        assert len(first.facts) == 4 and all(type(f) is FactMark for f in first.facts)
        assert isinstance(digests[4].recall, msgspec.UnsetType)
        builder = SummaryBuilder(n_boot=200, recall_settings=SETTINGS)
        for d in digests:
            builder.add(d)
        assert builder.build().as_builtins() == built(recall_example(), recall_settings=SETTINGS)

    def test_unknown_reason_is_an_input_error(self) -> None:
        """A recall reason outside the contract's names is an input error naming the field."""
        bad = msgspec.structs.replace(result([1, 0, 0, 0, 0], rid="z"), recall=AnswerRecall(reason="tired"))
        with pytest.raises(InputError, match="unknown recall reason 'tired'") as info:
            SummaryBuilder().add(bad)
        assert info.value.field == "recall.reason"

    def test_no_nan_with_recall(self) -> None:
        """The summary with recall is JSON without NaN; every recall mean is in [0, 1]."""
        out = built(recall_example(), recall_settings=SETTINGS)
        json.dumps(out, allow_nan=False)
        rec = out["models"]["m"]["recall"]
        assert all(rec[k] is None or 0.0 <= rec[k] <= 1.0 for k in ("recall", "recall_w", "f1", "f1_w"))

    @settings(max_examples=40, deadline=None)
    @given(
        rows=st.lists(
            st.tuples(
                st.lists(st.integers(0, 4), min_size=5, max_size=5),
                st.sampled_from(list(Status)),
                st.sampled_from(["m1", "m2"]),
                st.one_of(st.none(), st.lists(st.tuples(st.floats(0.0, 1.0), st.sampled_from([C, N, P, E])),
                                              max_size=6)),
            ),
            max_size=30,
        ),
        seed=st.integers(0, 2**32 - 1),
    )
    def test_recall_no_nan_and_permutation_invariant(
        self, rows: list[tuple[list[int], Status, str, list[tuple[float, Coverage]] | None]], seed: int
    ) -> None:
        """Any answers give JSON without NaN; each is in n or one null reason (zero_weight is in n); any order."""
        results = []
        for i, (counts, status, model, facts) in enumerate(rows):
            r = with_recall(counts, None if facts is None else judged(*facts), category="c", status=status, rid=str(i))
            results.append(msgspec.structs.replace(r, model=model))
        out = built(results, recall_settings=SETTINGS)
        json.dumps(out, allow_nan=False)
        for block in out["models"].values():
            rec = block["recall"]
            nulls = rec["null_by_reason"]
            assert rec["n"] + sum(nulls.values()) - nulls["zero_weight"] == block["n_answers"]
            for key in ("recall", "recall_w", "f1", "f1_w", "recall_at_5"):
                assert rec[key] is None or 0.0 <= rec[key] <= 1.0 + 1e-12
        random.Random(seed).shuffle(results)
        assert built(results, recall_settings=SETTINGS) == out


def _reasoned(reasons: list[str | None], *, supported: int = 0, category: str = "all") -> AnswerResult:
    """An answer with ``supported`` supported claims and one unsupported claim per entry of ``reasons``."""
    claims = tuple(
        ClaimResult(text=f"s{i}", index=i, label=Label.SUPPORTED) for i in range(supported)
    ) + tuple(
        ClaimResult(text=f"u{i}", index=supported + i, label=Label.UNSUPPORTED,
                    reason=UnsupportedReason(r) if r else None)
        for i, r in enumerate(reasons)
    )
    counts = [supported, len(reasons), 0, 0, 0]
    return AnswerResult(
        id=f"r{len(claims)}{category}", model="m", category=category, status=Status.SCORED, claims=claims,
        counts={str(label): n for label, n in zip(LABELS, counts)}, metrics=answer_metrics(counts),
        input_hash="h",
    )


class TestUnsupportedByReason:
    def test_counts_per_model_and_category(self) -> None:
        """Unsupported claims split into contradicted / no_evidence / unstated, per model and per category."""
        builder = SummaryBuilder(n_boot=10)
        builder.add(_reasoned(["contradicted", "no_evidence", None], supported=2, category="x"))
        builder.add(_reasoned(["no_evidence", "no_evidence"], category="y"))
        builder.add(result([1, 0, 0, 0, 0], category="y"))
        block = builder.build().as_builtins()["models"]["m"]
        assert block["unsupported_by_reason"] == {"contradicted": 1, "no_evidence": 3, "unstated": 1}
        assert block["categories"]["x"]["unsupported_by_reason"] == {"contradicted": 1, "no_evidence": 1, "unstated": 1}
        assert block["categories"]["y"]["unsupported_by_reason"] == {"contradicted": 0, "no_evidence": 2, "unstated": 0}

    def test_absent_when_no_verdict_has_a_reason(self) -> None:
        """A run whose verdicts give no reason has no unsupported_by_reason block."""
        builder = SummaryBuilder(n_boot=10)
        builder.add(_reasoned([None, None], supported=1))
        block = builder.build().as_builtins()["models"]["m"]
        assert set(block) == BLOCK_KEYS | {"categories"}


def _builder(results: list[AnswerResult], **kwargs: Any) -> SummaryBuilder:
    builder = SummaryBuilder(n_boot=50, **kwargs)
    for r in results:
        builder.add(r)
    return builder


class TestSummaryBuilderMerged:
    @settings(max_examples=40, deadline=None)
    @given(
        rows=st.lists(
            st.tuples(
                st.lists(st.integers(0, 4), min_size=5, max_size=5),
                st.sampled_from(list(Status)),
                st.sampled_from(["m1", "m2"]),
                st.sampled_from(["c1", "c2"]),
                st.booleans(),
            ),
            max_size=30,
        ),
    )
    def test_any_partition_merges_to_the_whole(self, rows: list[tuple[list[int], Status, str, str, bool]]) -> None:
        """Answers split into two builders in any way merge to the figures of one builder given them all."""
        results = [result(c, status=s, model=m, category=cat) for c, s, m, cat, _ in rows]
        first = [r for r, row in zip(results, rows, strict=True) if row[4]]
        second = [r for r, row in zip(results, rows, strict=True) if not row[4]]
        whole = _builder(results).build()
        assert _builder(first).merged(_builder(second)).build() == whole
        assert _builder(second).merged(_builder(first)).build() == whole

    def test_recall_and_reasons_on_one_side_only(self) -> None:
        """Recall answers on one side, reasoned verdicts on the other: the merge has both, as one builder would."""
        recall = recall_example()
        reasoned = [_reasoned(["contradicted", None], supported=1, category="x")]
        whole = _builder(recall + reasoned).build()
        merged = _builder(recall).merged(_builder(reasoned)).build()
        assert merged == whole
        assert merged.models["m"].unsupported_by_reason is not msgspec.UNSET
        assert merged.models["m"].recall is not msgspec.UNSET

    def test_recall_rows_follow_their_model_when_codes_differ(self) -> None:
        """Recall on both sides, models first seen in opposite orders (other codes on each side):
        the merge is one builder's figures, each answer's recall under its own model and category."""
        recall = recall_example()
        renamed = [msgspec.structs.replace(r, model="n", category="z" + r.category) for r in recall]
        first = _builder([result([1, 0, 0, 0, 0], model="n"), *recall])
        second = _builder([result([1, 0, 0, 0, 0], model="m"), *renamed])  # m is code 0 here, n code 0 there
        merged = first.merged(second).build()
        assert merged == _builder([result([1, 0, 0, 0, 0], model="n"), *recall, result([1, 0, 0, 0, 0], model="m"),
                                   *renamed]).build()

        def means(block: Any) -> dict[str, Any]:  # the intervals are seeded by the group's names
            return {k: v for k, v in msgspec.structs.asdict(block.recall).items() if not k.endswith("_ci")}

        assert means(merged.models["n"].categories["zx"]) == means(merged.models["m"].categories["x"])
        assert means(merged.models["n"]) == means(merged.models["m"])
        assert merged.models["n"].recall.null_by_reason["no_refs"] == 2  # answer e and the answer without recall

    def test_recall_settings_kept_from_either_side(self) -> None:
        """Settings given to one side are the merged summary's; with recall on neither side nothing is added."""
        plain = [result([1, 1, 0, 0, 0])]
        assert _builder(plain).merged(_builder(plain, recall_settings=SETTINGS)).build().recall_settings == SETTINGS
        assert _builder(plain).merged(_builder(plain)).build().recall_settings is msgspec.UNSET

    @pytest.mark.parametrize("kwargs", [{"k": 3}, {"gamma": 0.0}, {"seed": 1}, {"n_boot": 10}],
                             ids=["k", "gamma", "seed", "n_boot"])
    def test_other_settings_refused(self, kwargs: dict[str, Any]) -> None:
        """Builders of different γ, K, seed or n_boot do not merge."""
        base = {"gamma": 10.0, "k": 64, "seed": 0, "n_boot": 50}
        with pytest.raises(ConfigError, match="different settings"):
            SummaryBuilder(**base).merged(SummaryBuilder(**{**base, **kwargs}))

    def test_the_merged_builders_are_unchanged(self) -> None:
        """merged returns a new builder: both sides keep their answers and figures."""
        a, b = _builder([result([2, 0, 0, 0, 0])]), _builder([result([0, 2, 0, 0, 0], model="n")])
        before = a.build(), b.build()
        merged = a.merged(b)
        merged.add(result([1, 0, 0, 0, 0]))
        assert (len(a), len(b), len(merged)) == (1, 1, 3)
        assert (a.build(), b.build()) == before
