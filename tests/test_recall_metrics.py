"""Specification of dahl.metrics._recall: importance, F*, Rec, Rec^w, R@k, F1 ("Beyond Precision")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dahl.errors import ConfigError
from dahl.metrics import (
    PARTIAL_CREDIT,
    answer_recall,
    coverage_credit,
    f1_score,
    fact_weight,
    fstar,
    importance,
    ranking,
)
from dahl.records import AnswerRecall, Coverage, FactResult, RefFact

C, P, N, E = Coverage.COVERED, Coverage.PARTIAL, Coverage.NOT_COVERED, Coverage.ERROR


def judged(*facts: tuple[float, Coverage]) -> list[FactResult]:
    """F* facts in importance order with (weight, label), ids f1, f2, …"""
    return [FactResult(id=f"f{i}", text=f"fact {i}", weight=w, label=lab) for i, (w, lab) in enumerate(facts, 1)]


def rated(fid: str, relevance: float | None = None, salience: float | None = None, **kw: float) -> RefFact:
    return RefFact(id=fid, text=f"fact {fid}", relevance=relevance, salience=salience, **kw)


#: weights 1, .75, .5, .25 (Σ 2.5) with labels covered, partial, covered, not covered
FOUR = judged((1.0, C), (0.75, P), (0.5, C), (0.25, N))


class TestImportance:
    @pytest.mark.parametrize(
        ("r", "s", "alpha", "beta", "expected"),
        [(4, 5, 0.5, 0.5, 0.875), (1, 1, 0.5, 0.5, 0.0), (5, 5, 0.5, 0.5, 1.0), (3, 5, 1.0, 0.0, 0.5),
         (2, 3, 0.25, 0.75, 0.4375)],
        ids=["4-5", "floor", "ceiling", "relevance-only", "weighted"],
    )
    def test_rescaled_ratings(self, r: float, s: float, alpha: float, beta: float, expected: float) -> None:
        """imp = α(r − 1)/4 + β(s − 1)/4: e.g. (4, 5) -> .5·.75 + .5·1 = .875."""
        assert importance(r, s, alpha=alpha, beta=beta) == pytest.approx(expected)

    @pytest.mark.parametrize(("r", "s", "alpha"), [(0, 3, 0.5), (3, 6, 0.5), (3, 3, -0.1), (float("nan"), 3, 0.5)],
                             ids=["r-low", "s-high", "alpha-negative", "nan"])
    def test_bad_ratings_and_weights(self, r: float, s: float, alpha: float) -> None:
        """Ratings outside [1, 5] or a negative α are configuration errors."""
        with pytest.raises(ConfigError):
            importance(r, s, alpha=alpha)

    def test_fact_weight(self) -> None:
        """The stored importance wins unless α or β is given; ratings without one use dahl's 0.5, 0.5; else 1."""
        assert fact_weight(rated("a", 4, 5, importance=0.1)) == 0.1  # stored, as the build computed it
        assert fact_weight(rated("a", 4, 5, importance=0.1), alpha=0.5, beta=0.5) == 0.875  # given: recomputed
        assert fact_weight(rated("a", 4, 5, importance=0.1), alpha=1.0) == 0.75 + 0.5  # the other weight: 0.5
        assert fact_weight(rated("a", 4, 5)) == 0.875
        assert fact_weight(rated("b", importance=0.3)) == 0.3
        assert fact_weight(rated("b", importance=0.3), alpha=1.0, beta=0.0) == 0.3  # no ratings to recompute
        assert fact_weight(rated("c")) == 1.0
        assert fact_weight(rated("d", 3)) == 1.0  # one rating is not a rating pair


class TestFstar:
    FACTS = (rated("a", 3, 3), rated("b", 4, 5), rated("c", 3, 3), rated("d", 2, 2), rated("e"))
    # weights a .5, b .875, c .5, d .25, e 1 (unrated)

    def test_ranked_ties_in_file_order(self) -> None:
        """F* is ranked by importance; a and c tie at .5 and keep file order."""
        ranked = fstar(self.FACTS)
        assert [(f.id, w) for f, w in ranked] == [("e", 1.0), ("b", 0.875), ("a", 0.5), ("c", 0.5), ("d", 0.25)]

    @pytest.mark.parametrize(
        ("k", "min_importance", "ids"),
        [(3, None, "eba"), (10, None, "ebacd"), (None, 0.5, "ebac"), (2, 0.5, "eb"), (None, 1.01, "")],
        ids=["k3", "k-above-size", "min-.5", "both", "none-left"],
    )
    def test_cuts(self, k: int | None, min_importance: float | None, ids: str) -> None:
        """--fstar-k keeps the top k, --fstar-min-importance those at or above it; both apply together."""
        assert "".join(f.id for f, _ in fstar(self.FACTS, k=k, min_importance=min_importance)) == ids

    def test_alpha_beta_reach_the_weights(self) -> None:
        """α = 1, β = 0 weighs relevance alone: b (4, 5) .75, a (3, 3) .5."""
        assert [w for _, w in fstar(self.FACTS[:2], alpha=1.0, beta=0.0)] == [0.75, 0.5]

    def test_without_importance_ordered_by_support(self) -> None:
        """A pooled set (support, no importance) is ranked by support, ties in file order; weights stay 1."""
        pooled = (rated("a", support=1), rated("b", support=3), rated("c"), rated("d", support=3))
        assert ranking(pooled) == "support"
        assert [(f.id, w) for f, w in fstar(pooled)] == [("b", 1.0), ("d", 1.0), ("a", 1.0), ("c", 1.0)]
        assert "".join(f.id for f, _ in fstar(pooled, k=2)) == "bd"

    def test_ranking_basis(self) -> None:
        """importance when a fact has one (stored or rated), support when only that, else no order."""
        assert ranking(self.FACTS) == "importance"
        assert ranking((rated("a", importance=0.2), rated("b", support=4))) == "importance"
        assert ranking((rated("a"), rated("b"))) is None
        assert [f.id for f, _ in fstar((rated("a"), rated("b"), rated("c")))] == ["a", "b", "c"]

    def test_bad_k(self) -> None:
        """k < 1 is a configuration error."""
        with pytest.raises(ConfigError, match="--fstar-k"):
            fstar(self.FACTS, k=0)


class TestAnswerRecall:
    @pytest.mark.parametrize(
        ("partial", "rec", "rec_w"),
        [("strict", 0.5, 0.6), ("half", 0.625, 0.75), ("lenient", 0.75, 0.9)],
        ids=["strict", "half", "lenient"],
    )
    def test_partial_modes(self, partial: str, rec: float, rec_w: float) -> None:
        """Credits (1, p, 1, 0) with p = 0, .5, 1: Rec = (2 + p)/4, Rec^w = (1.5 + .75p)/2.5."""
        out = answer_recall(FOUR, precision=0.8, partial=partial)  # type: ignore[arg-type]
        assert out.recall == pytest.approx(rec)
        assert out.recall_w == pytest.approx(rec_w)
        assert out.reason is None

    def test_f1_with_dahl_precision(self) -> None:
        """F1 = 2PR/(P + R): P .8, Rec .5 -> .8/1.3; F1^w with Rec^w .6 -> .96/1.4."""
        out = answer_recall(FOUR, precision=0.8)
        assert out.f1 == pytest.approx(0.8 / 1.3)
        assert out.f1_w == pytest.approx(0.96 / 1.4)

    def test_recall_at_k_smaller_and_larger_than_fstar(self) -> None:
        """7 facts C C N C N N C: R@5 = 3/5 over the top 5; R@10 = R@20 = Rec = 4/7 (k > |F*|)."""
        out = answer_recall(judged(*((1.0, lab) for lab in (C, C, N, C, N, N, C))), precision=1.0)
        assert out.recall_at_5 == pytest.approx(0.6)
        assert out.recall_at_10 == out.recall_at_20 == out.recall == pytest.approx(4 / 7)

    def test_recall_at_k_is_null_without_an_order(self) -> None:
        """F* with no importance and no support has no top k: R@k is None (abstained too); Rec stays."""
        facts = judged(*((1.0, lab) for lab in (C, C, N, C, N, N, C)))
        out = answer_recall(facts, precision=1.0, ranked=False)
        assert (out.recall_at_5, out.recall_at_10, out.recall_at_20) == (None, None, None)
        assert out.recall == pytest.approx(4 / 7) and out.reason is None
        abstained = answer_recall(facts, precision=None, abstained=True, ranked=False)
        assert (abstained.recall, abstained.recall_at_5) == (0.0, None)

    def test_facts_kept_in_order(self) -> None:
        """The result carries F* with its labels, in the order given."""
        assert answer_recall(FOUR, precision=0.8).facts == tuple(FOUR)

    def test_empty_fstar_is_null(self) -> None:
        """An empty F* gives None everywhere with reason empty_fstar, never 0."""
        assert answer_recall([], precision=1.0) == AnswerRecall(reason="empty_fstar")

    def test_zero_weight_is_null_for_weighted_only(self) -> None:
        """Σ imp = 0: Rec and F1 are defined, Rec^w and F1^w None, reason zero_weight."""
        out = answer_recall(judged((0.0, C), (0.0, N)), precision=0.5)
        assert (out.recall, out.recall_w, out.f1, out.f1_w, out.reason) == (0.5, None, 0.5, None, "zero_weight")

    def test_coverage_error_is_null(self) -> None:
        """One failed coverage judgement makes every metric None (reason coverage_error), not a 0 for that fact."""
        out = answer_recall(judged((1.0, C), (1.0, E)), precision=1.0)
        assert (out.recall, out.recall_w, out.f1, out.recall_at_5, out.reason) == (None, None, None, None,
                                                                                    "coverage_error")

    def test_abstained_covers_nothing(self) -> None:
        """An abstained answer scores 0 on every metric whatever its labels (even an error label)."""
        out = answer_recall(judged((1.0, C), (1.0, E)), precision=None, abstained=True)
        assert (out.recall, out.recall_w, out.f1, out.f1_w, out.recall_at_5, out.recall_at_10, out.recall_at_20,
                out.reason) == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None)

    def test_abstained_with_zero_weight(self) -> None:
        """Abstained with Σ imp = 0: Rec 0, Rec^w still undefined (None, zero_weight)."""
        out = answer_recall(judged((0.0, N)), precision=None, abstained=True)
        assert (out.recall, out.recall_w, out.f1_w, out.reason) == (0.0, None, None, "zero_weight")

    def test_no_precision_leaves_f1_null(self) -> None:
        """An answer without DAHL precision (e.g. an unknown claim) has Rec but F1 None."""
        out = answer_recall(FOUR, precision=None)
        assert (out.recall, out.f1, out.f1_w) == (0.5, None, None)

    def test_bad_partial(self) -> None:
        """An unknown --partial mode is a configuration error."""
        with pytest.raises(ConfigError, match="--partial"):
            answer_recall(FOUR, precision=1.0, partial="generous")  # type: ignore[arg-type]


class TestCreditAndF1:
    def test_credit(self) -> None:
        """covered 1, not covered 0, partial per mode; an error label has no credit."""
        assert [coverage_credit(lab, "half") for lab in (C, P, N)] == [1.0, 0.5, 0.0]
        assert PARTIAL_CREDIT == {"strict": 0.0, "half": 0.5, "lenient": 1.0}
        with pytest.raises(ConfigError):
            coverage_credit(E)

    @pytest.mark.parametrize(("p", "r", "f1"),
                             [(0.0, 0.0, 0.0), (1.0, 0.5, 2 / 3), (None, 0.5, None), (0.5, None, None)],
                             ids=["zeros", "hand", "no-precision", "no-recall"])
    def test_f1(self, p: float | None, r: float | None, f1: float | None) -> None:
        """F1 = 2PR/(P+R), 0 when both are 0, None when either is None."""
        assert f1_score(p, r) == (pytest.approx(f1) if f1 is not None else None)


labels = st.sampled_from([C, P, N])
weights = st.floats(0.0, 1.0, allow_nan=False)
fact_lists = st.lists(st.tuples(weights, labels), min_size=1, max_size=30)
modes = st.sampled_from(["strict", "half", "lenient"])
precisions = st.one_of(st.none(), st.floats(0.0, 1.0))


class TestRecallInvariants:
    @settings(max_examples=200, deadline=None)
    @given(facts=fact_lists, partial=modes, precision=precisions, abstained=st.booleans())
    def test_in_unit_interval(self, facts: list[tuple[float, Coverage]], partial: str, precision: float | None,
                              abstained: bool) -> None:
        """Every defined metric is in [0, 1]."""
        out = answer_recall(judged(*facts), precision=precision, partial=partial,  # type: ignore[arg-type]
                            abstained=abstained)
        for value in (out.recall, out.recall_w, out.f1, out.f1_w, out.recall_at_5, out.recall_at_10, out.recall_at_20):
            assert value is None or 0.0 <= value <= 1.0 + 1e-12

    @settings(max_examples=200, deadline=None)
    @given(facts=fact_lists, partial=modes, precision=precisions, data=st.data())
    def test_order_invariant(self, facts: list[tuple[float, Coverage]], partial: str, precision: float | None,
                             data: st.DataObject) -> None:
        """For a fixed F*, Rec, Rec^w, F1 and F1^w do not depend on the order of its facts."""
        shuffled = data.draw(st.permutations(facts))
        a = answer_recall(judged(*facts), precision=precision, partial=partial)  # type: ignore[arg-type]
        b = answer_recall(judged(*shuffled), precision=precision, partial=partial)  # type: ignore[arg-type]
        for x, y in ((a.recall, b.recall), (a.recall_w, b.recall_w), (a.f1, b.f1), (a.f1_w, b.f1_w)):
            assert (x is None and y is None) or x == pytest.approx(y)

    @settings(max_examples=200, deadline=None)
    @given(facts=fact_lists, partial=modes, weight=st.floats(0.0, 1.0))
    def test_adding_a_covered_fact_never_lowers_recall(self, facts: list[tuple[float, Coverage]], partial: str,
                                                       weight: float) -> None:
        """Appending a covered fact to F* never lowers Rec, nor Rec^w where it was defined."""
        before = answer_recall(judged(*facts), precision=1.0, partial=partial)  # type: ignore[arg-type]
        after = answer_recall(judged(*facts, (weight, C)), precision=1.0, partial=partial)  # type: ignore[arg-type]
        assert before.recall is not None and after.recall is not None
        assert after.recall >= before.recall - 1e-12
        if before.recall_w is not None:
            assert after.recall_w is not None and after.recall_w >= before.recall_w - 1e-12

    @settings(max_examples=200, deadline=None)
    @given(labs=st.lists(labels, min_size=1, max_size=30), partial=modes, weight=st.floats(0.01, 1.0))
    def test_equal_weights_make_weighted_equal_unweighted(self, labs: list[Coverage], partial: str,
                                                          weight: float) -> None:
        """With every weight equal (and > 0), Rec^w = Rec and F1^w = F1."""
        facts = judged(*((weight, lab) for lab in labs))
        out = answer_recall(facts, precision=0.7, partial=partial)  # type: ignore[arg-type]
        assert out.recall_w == pytest.approx(out.recall)
        assert out.f1_w == pytest.approx(out.f1)
