"""Specification of dahl.metrics: per-answer formulas, aggregates, exclusion rules, bootstrap."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dahl.errors import ConfigError, InputError
from dahl.metrics import (
    REASONS,
    answer_metrics,
    answer_status,
    as_counts,
    bootstrap_ci,
    dahl_mask,
    dahl_score,
    exclusion_codes,
    f1_at_k,
    f1_values,
    factscore,
    factscore_mask,
    factscore_values,
    precision,
    sorted_mean,
)
from dahl.records import AnswerMetrics, Status

# Rows: S, U, I, N(unknown), E(error).
ROWS = np.array(
    [
        [3, 1, 1, 0, 0],  # a: precision .75, factscore_init .6
        [0, 0, 2, 0, 0],  # b: only irrelevant: FActScore 0, not in DAHL
        [1, 1, 0, 1, 0],  # c: an unknown claim: in neither
        [5, 0, 0, 0, 0],  # d: abstained (eligible False)
        [2, 2, 0, 0, 0],  # e: precision .5
    ]
)
ELIGIBLE = np.array([True, True, True, False, True])

counts_arrays = st.integers(min_value=0, max_value=40).flatmap(
    lambda n: arrays(np.int64, (n, 5), elements=st.integers(min_value=0, max_value=30))
)


class TestAsCounts:
    def test_mapping_fills_missing_labels_with_zero(self) -> None:
        """A mapping of label names gives a LABELS-ordered row with absent labels as 0."""
        assert as_counts({"unsupported": 2, "error": 1}).tolist() == [0, 2, 0, 0, 1]

    def test_unknown_label_is_input_error(self) -> None:
        """A label name outside the five is rejected with the field named."""
        with pytest.raises(InputError, match="bogus"):
            as_counts({"bogus": 1})

    def test_negative_count_is_input_error(self) -> None:
        """A negative count is rejected."""
        with pytest.raises(InputError, match="negative"):
            as_counts([1, -1, 0, 0, 0])

    def test_wrong_length_is_input_error(self) -> None:
        """A sequence of four counts is rejected."""
        with pytest.raises(InputError):
            as_counts([1, 2, 3, 4])


class TestAnswerStatus:
    @pytest.mark.parametrize(
        ("counts", "abstained", "split_error", "expected"),
        [
            ([3, 1, 1, 0, 0], False, False, (Status.SCORED, None)),
            ([3, 1, 1, 0, 0], True, False, (Status.ABSTAINED, "abstained")),
            ([0, 0, 0, 0, 0], False, False, (Status.EXCLUDED, "no_claims")),
            ([0, 0, 4, 0, 0], False, False, (Status.EXCLUDED, "only_irrelevant")),
            ([2, 0, 0, 1, 0], False, False, (Status.EXCLUDED, "unknown_claims")),
            ([2, 0, 0, 1, 1], False, False, (Status.EXCLUDED, "error_claims")),
            ([0, 0, 1, 1, 0], False, False, (Status.EXCLUDED, "unknown_claims")),
            ([0, 0, 0, 0, 0], True, True, (Status.ERROR, "split_error")),
        ],
        ids=["scored", "abstained", "no-claims", "only-irrelevant", "unknown", "error-beats-unknown",
             "unknown-beats-irrelevant", "split-error-beats-all"],
    )
    def test_status_and_reason(
        self, counts: list[int], abstained: bool, split_error: bool, expected: tuple[Status, str | None]
    ) -> None:
        """Each answer gets the status and the first applicable reason in the documented precedence."""
        assert answer_status(counts, abstained=abstained, split_error=split_error) == expected

    def test_accepts_mapping(self) -> None:
        """Counts given as a label mapping are classified the same as an array."""
        assert answer_status({"supported": 1}, abstained=False) == (Status.SCORED, None)

    def test_codes_index_reasons(self) -> None:
        """exclusion_codes gives 0 for scored and 1 + REASONS.index(reason) otherwise."""
        codes = exclusion_codes(ROWS, ~ELIGIBLE, np.zeros(5, dtype=bool))
        expected = [0, 1 + REASONS.index("only_irrelevant"), 1 + REASONS.index("unknown_claims"),
                    1 + REASONS.index("abstained"), 0]
        assert codes.tolist() == expected


class TestAnswerMetrics:
    def test_hand_computed_example(self) -> None:
        """S=3, U=1, I=1: precision 3/4, FActScore 3/5, penalised 0.6·e^(1−10/5), F1@64 = 3/34."""
        m = answer_metrics([3, 1, 1, 0, 0])
        assert m.precision == pytest.approx(0.75)
        assert m.factscore_init == pytest.approx(0.6)
        assert m.factscore == pytest.approx(0.6 * math.exp(-1.0))
        assert m.factscore == pytest.approx(0.2207276647)
        # P = .75, R = 3/64: 2·.75·.046875 / .796875 = 3/34.
        assert m.f1_at_k == pytest.approx(3 / 34)

    def test_no_claims_gives_all_none(self) -> None:
        """An answer with no claims has every metric None, not NaN."""
        assert answer_metrics({}) == AnswerMetrics()

    def test_only_irrelevant(self) -> None:
        """Only irrelevant claims: precision and F1 undefined, FActScore 0."""
        m = answer_metrics({"irrelevant": 3})
        assert (m.precision, m.f1_at_k, m.factscore_init, m.factscore) == (None, None, 0.0, 0.0)

    def test_unknown_claims_enter_no_denominator(self) -> None:
        """Unknown and error claims are neither true nor false: S=1, U=1, N=5, E=5 gives precision 0.5."""
        m = answer_metrics([1, 1, 0, 5, 5], gamma=0)
        assert (m.precision, m.factscore_init, m.factscore) == (0.5, 0.5, 0.5)

    def test_gamma_zero_disables_penalty(self) -> None:
        """With γ = 0 the penalised FActScore equals the initial one."""
        m = answer_metrics([1, 1, 0, 0, 0], gamma=0)
        assert m.factscore == m.factscore_init == 0.5

    def test_rejects_negative_gamma_and_small_k(self) -> None:
        """γ < 0 and K < 1 are configuration errors."""
        with pytest.raises(ConfigError):
            answer_metrics([1, 0, 0, 0, 0], gamma=-1)
        with pytest.raises(ConfigError):
            answer_metrics([1, 0, 0, 0, 0], k=0)


class TestPrecision:
    def test_values_and_nan(self) -> None:
        """S/(S+U) elementwise, NaN where S+U = 0."""
        out = precision(np.array([3, 0, 0]), np.array([1, 2, 0]))
        assert out[:2].tolist() == [0.75, 0.0]
        assert math.isnan(out[2])


class TestFactscoreValues:
    @pytest.mark.parametrize(
        ("row", "gamma", "expected"),
        [
            ([3, 1, 1, 0, 0], 10, 0.6 * math.exp(1 - 10 / 5)),
            ([2, 2, 0, 0, 0], 10, 0.5 * math.exp(1 - 10 / 4)),
            ([6, 2, 2, 0, 0], 10, 0.6),  # |A| = γ: no penalty
            ([15, 5, 0, 0, 0], 10, 0.75),  # |A| > γ: no penalty
            ([3, 1, 1, 0, 0], 0, 0.6),
            ([1, 0, 0, 0, 0], 2, math.exp(1 - 2 / 1)),
        ],
        ids=["A5-g10", "A4-g10", "A10-g10", "A20-g10", "g0", "A1-g2"],
    )
    def test_length_penalty(self, row: list[int], gamma: float, expected: float) -> None:
        """The penalty exp(1 − γ/|A|) applies only when 0 < |A| < γ."""
        assert factscore_values(np.array([row]), gamma)[0] == pytest.approx(expected)


class TestF1Values:
    @pytest.mark.parametrize(
        ("row", "k", "expected"),
        [
            ([3, 1, 0, 0, 0], 64, 3 / 34),
            ([64, 0, 0, 0, 0], 64, 1.0),
            ([100, 25, 0, 0, 0], 64, 2 * 0.8 * 1.0 / 1.8),
            ([0, 2, 0, 0, 0], 64, 0.0),
            ([2, 2, 0, 0, 0], 1, 2 * 0.5 * 1.0 / 1.5),
        ],
        ids=["S3U1", "S64-exact-K", "recall-capped", "S0", "K1"],
    )
    def test_formula(self, row: list[int], k: int, expected: float) -> None:
        """F1@K = 2PR/(P+R), P = S/(S+U), R = min(S/K, 1); 0 when S = 0."""
        assert f1_values(np.array([row]), k)[0] == pytest.approx(expected)

    def test_undefined_without_decided_claims(self) -> None:
        """S + U = 0 gives NaN per answer (excluded from the mean)."""
        assert math.isnan(f1_values(np.array([[0, 0, 3, 0, 0]]))[0])


class TestAggregates:
    def test_masks(self) -> None:
        """DAHL uses a and e; FActScore also counts the only-irrelevant answer b."""
        assert dahl_mask(ROWS, ELIGIBLE).tolist() == [True, False, False, False, True]
        assert factscore_mask(ROWS, ELIGIBLE).tolist() == [True, True, False, False, True]

    def test_dahl_score(self) -> None:
        """DAHL Score = (0.75 + 0.5) / 2."""
        assert dahl_score(ROWS, ELIGIBLE) == pytest.approx(0.625)

    def test_factscore_init(self) -> None:
        """FActScore without penalty = (0.6 + 0 + 0.5) / 3."""
        assert factscore(ROWS, ELIGIBLE, gamma=0) == pytest.approx(1.1 / 3)

    def test_factscore_penalised(self) -> None:
        """FActScore with γ = 10 = (0.6·e^−1 + 0 + 0.5·e^−1.5) / 3 = 0.110764."""
        expected = (0.6 * math.exp(-1) + 0.0 + 0.5 * math.exp(-1.5)) / 3
        assert factscore(ROWS, ELIGIBLE, gamma=10) == pytest.approx(expected)
        assert expected == pytest.approx(0.1107642, abs=1e-6)

    def test_f1_at_k(self) -> None:
        """F1@64 over the DAHL answers = (3/34 + 1/17) / 2 = 5/68."""
        assert f1_at_k(ROWS, ELIGIBLE, k=64) == pytest.approx(5 / 68)

    def test_empty_gives_none(self) -> None:
        """No qualifying answer gives None for every aggregate."""
        empty = np.zeros((0, 5), dtype=np.int64)
        none_eligible = np.zeros(0, dtype=bool)
        assert dahl_score(empty, none_eligible) is None
        assert factscore(empty, none_eligible) is None
        assert f1_at_k(empty, none_eligible) is None
        assert dahl_score(ROWS[[1, 2]], ELIGIBLE[[1, 2]]) is None

    def test_wrong_shapes_are_input_errors(self) -> None:
        """counts must be (n, 5) and eligible (n,)."""
        with pytest.raises(InputError):
            dahl_score(np.zeros((2, 4), dtype=int), np.ones(2, dtype=bool))
        with pytest.raises(InputError):
            dahl_score(ROWS, np.ones(3, dtype=bool))

    @settings(max_examples=200, deadline=None)
    @given(counts=counts_arrays, data=st.data())
    def test_scores_in_unit_interval_or_none(self, counts: np.ndarray[Any, Any], data: st.DataObject) -> None:
        """Every aggregate is None exactly when its mask is empty, else a finite number in [0, 1]."""
        eligible = data.draw(arrays(np.bool_, (counts.shape[0],)))
        for value, mask in [
            (dahl_score(counts, eligible), dahl_mask(counts, eligible)),
            (f1_at_k(counts, eligible, 8), dahl_mask(counts, eligible)),
            (factscore(counts, eligible, 10), factscore_mask(counts, eligible)),
            (factscore(counts, eligible, 0), factscore_mask(counts, eligible)),
        ]:
            if mask.any():
                assert value is not None and 0.0 <= value <= 1.0
            else:
                assert value is None

    @settings(max_examples=200, deadline=None)
    @given(counts=counts_arrays, data=st.data())
    def test_permutation_invariant(self, counts: np.ndarray[Any, Any], data: st.DataObject) -> None:
        """Reordering answers does not change any aggregate."""
        n = counts.shape[0]
        eligible = data.draw(arrays(np.bool_, (n,)))
        perm = np.array(data.draw(st.permutations(list(range(n)))), dtype=np.intp)
        for fn in (dahl_score, lambda c, e: factscore(c, e, 10), lambda c, e: f1_at_k(c, e, 64)):
            a, b = fn(counts, eligible), fn(counts[perm], eligible[perm])
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-12)


class TestBootstrapCI:
    def test_seeded_determinism(self) -> None:
        """The same seed gives the same interval; another seed gives another."""
        values = np.random.default_rng(7).random(200)
        a = bootstrap_ci(values, rng=np.random.default_rng(1))
        b = bootstrap_ci(values, rng=np.random.default_rng(1))
        c = bootstrap_ci(values, rng=np.random.default_rng(2))
        assert a == b
        assert a != c

    def test_order_does_not_matter(self) -> None:
        """Permuted values with the same seed give the identical interval."""
        values = np.random.default_rng(3).random(300)
        shuffled = np.random.default_rng(4).permutation(values)
        assert bootstrap_ci(values, rng=np.random.default_rng(0)) == bootstrap_ci(
            shuffled, rng=np.random.default_rng(0)
        )

    @pytest.mark.parametrize("kind", ["ties-multinomial", "continuous-indices"])
    def test_contains_point_and_matches_normal_width(self, kind: str) -> None:
        """The 95% interval contains the mean and is about mean ± 1.96·sd/√n wide."""
        gen = np.random.default_rng(11)
        values = gen.integers(0, 2, 400).astype(float) if kind.startswith("ties") else gen.random(400)
        ci = bootstrap_ci(values, rng=np.random.default_rng(0), n_boot=2000)
        assert ci is not None
        mean = values.mean()
        half = 1.96 * values.std() / math.sqrt(values.size)
        assert ci[0] < mean < ci[1]
        assert ci[0] == pytest.approx(mean - half, abs=0.006)
        assert ci[1] == pytest.approx(mean + half, abs=0.006)

    def test_empty_is_none(self) -> None:
        """No values gives None."""
        assert bootstrap_ci(np.array([]), rng=np.random.default_rng(0)) is None

    def test_constant_values_give_a_point(self) -> None:
        """Identical values give lo = hi = that value."""
        assert bootstrap_ci(np.full(50, 0.25), rng=np.random.default_rng(0)) == (0.25, 0.25)

    def test_rejects_bad_options_and_nan(self) -> None:
        """n_boot < 1, level outside (0, 1) and NaN values are rejected."""
        rng = np.random.default_rng(0)
        with pytest.raises(ConfigError):
            bootstrap_ci(np.ones(3), rng=rng, n_boot=0)
        with pytest.raises(ConfigError):
            bootstrap_ci(np.ones(3), rng=rng, level=1.0)
        with pytest.raises(InputError):
            bootstrap_ci(np.array([0.5, np.nan]), rng=rng)

    def test_rejects_more_resamples_than_memory_allows(self) -> None:
        """n_boot above 10,000,000 is a ConfigError naming the limit, before any allocation (was a MemoryError)."""
        with pytest.raises(ConfigError, match=r"^n_boot must be in \[1, 10,000,000\] \(each resample's mean is "
                                              r"kept\), got 100,000,000,000$"):
            bootstrap_ci(np.ones(3), rng=np.random.default_rng(0), n_boot=100_000_000_000)

    def test_large_input_is_chunked(self) -> None:
        """200,000 distinct values and 50 resamples (chunked draws) still give an interval around the mean."""
        values = np.random.default_rng(5).random(200_000)
        ci = bootstrap_ci(values, rng=np.random.default_rng(0), n_boot=50)
        assert ci is not None and ci[0] < values.mean() < ci[1]

    @pytest.mark.parametrize("kind", ["ties-multinomial", "continuous-indices"])
    def test_counts_give_the_interval_of_the_repeated_values(self, kind: str) -> None:
        """Values with answer counts (a value split over two entries, one count 0) give exactly the
        interval of the values repeated, on both resampling paths."""
        gen = np.random.default_rng(13)
        distinct = np.array([0.0, 0.25, 0.5, 1.0]) if kind.startswith("ties") else gen.random(40)
        counts = gen.integers(1, 9 if kind.startswith("ties") else 3, distinct.size)
        counts[1] = 0
        assert (distinct.size * 4 <= counts.sum()) == kind.startswith("ties")  # the path under test
        repeated = np.repeat(distinct, counts)
        split = np.concatenate([distinct, distinct[:1]])
        split_counts = np.concatenate([counts, [0]])
        split_counts[0], split_counts[-1] = counts[0] - 1, 1
        expected = bootstrap_ci(repeated, rng=np.random.default_rng(3), n_boot=500)
        assert expected is not None
        assert bootstrap_ci(distinct, counts=counts, rng=np.random.default_rng(3), n_boot=500) == expected
        assert bootstrap_ci(split, counts=split_counts, rng=np.random.default_rng(3), n_boot=500) == expected
        assert sorted_mean(split, split_counts) == sorted_mean(repeated) == float(np.sort(repeated).mean())

    def test_counts_all_zero_is_none_and_bad_counts_are_rejected(self) -> None:
        """Zero answers give None; counts of another shape, negative or float are InputErrors."""
        rng = np.random.default_rng(0)
        assert bootstrap_ci(np.ones(2), counts=np.zeros(2, dtype=np.int64), rng=rng) is None
        assert sorted_mean(np.ones(2), np.zeros(2, dtype=np.int64)) is None
        for bad in (np.ones(3, dtype=np.int64), np.array([1, -1]), np.array([1.0, 2.0])):
            with pytest.raises(InputError, match="counts"):
                bootstrap_ci(np.ones(2), counts=bad, rng=rng)


def factscore_counts(path: Path) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per-answer (S, U, I, 0, 0) counts and abstained flags from a FActScore labeled file.

    Claims are the human atomic facts (S / NS / IR), plus the model atomic facts of
    sentences marked ``is-relevant: false`` as irrelevant; ``annotations: null`` is
    an abstention.
    """
    rows: list[list[int]] = []
    abstained: list[bool] = []
    column = {"S": 0, "NS": 1, "IR": 2}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            row = [0, 0, 0, 0, 0]
            annotations = record["annotations"]
            abstained.append(annotations is None)
            for sentence in annotations or []:
                if sentence.get("is-relevant") is False:
                    row[2] += len(sentence.get("model-atomic-facts") or [])
                    continue
                for fact in sentence.get("human-atomic-facts") or []:
                    row[column[fact["label"]]] += 1
            rows.append(row)
    return np.array(rows, dtype=np.int64), np.array(abstained, dtype=bool)


@pytest.mark.data
class TestFactscoreHumanLabels:
    @pytest.mark.parametrize(
        ("model", "fs_init", "n_fs", "dahl", "n_dahl"),
        [
            ("InstructGPT", 41.9, 127, 47.5, 125),
            ("ChatGPT", 57.5, 110, 61.8, 110),
            ("PerplexityAI", 69.3, 115, 82.6, 106),
        ],
    )
    def test_published_figures(
        self, shared_data: Path, model: str, fs_init: float, n_fs: int, dahl: float, n_dahl: int
    ) -> None:
        """Human labels reproduce FActScore (init) and DAHL Score on the shared split of 128 answers."""
        path = shared_data / "factscore" / "labeled" / f"{model}.jsonl"
        if not path.is_file():
            pytest.skip(f"{path} not found (set DAHL_SHARED_DATA to the shared data folder)")
        counts, abstained = factscore_counts(path)
        assert counts.shape == (128, 5)
        eligible = ~abstained
        assert int(factscore_mask(counts, eligible).sum()) == n_fs
        assert int(dahl_mask(counts, eligible).sum()) == n_dahl
        fs = factscore(counts, eligible, gamma=0)
        ds = dahl_score(counts, eligible)
        assert fs is not None and ds is not None
        assert 100 * fs == pytest.approx(fs_init, abs=0.05)
        assert 100 * ds == pytest.approx(dahl, abs=0.05)
