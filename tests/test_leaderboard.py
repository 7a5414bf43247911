"""Leaderboard: ranks, paired bootstrap, hand-made boards, renderers, the FActScore acceptance board."""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import Any
from pathlib import Path

import numpy as np
import pytest

from dahl.errors import ConfigError
from dahl.metrics import bootstrap_ci
from dahl.analysis._paired_bootstrap import MIN_SHARED_QUESTIONS, format_p, joint_paired_bootstrap
from dahl.analysis._leaderboard import (
    arena_ranks,
    build_leaderboard,
    to_csv,
    to_json,
    to_markdown,
)
from dahl.records import Label, Status
from dahl.metrics import group_seed
from dahl.analysis._verdicts import Verdicts, load_runs, load_verdicts
from tests.recall_runs import pooled_factscore_runs, recall_run
from tests.report_runs import MODELS, replay_runs
from tests.test_verdicts import result, write

S, U, I, N = Label.SUPPORTED, Label.UNSUPPORTED, Label.IRRELEVANT, Label.UNKNOWN


@pytest.fixture
def small(tmp_path: Path) -> Verdicts:
    """Two models, three questions: A = 2/3, 1, excluded (unknown); B = 1/2, 0, 1."""
    write(tmp_path, [
        result("A1", "A", [S, S, U], question_id="q1", category="x"),
        result("A2", "A", [S], question_id="q2", category="x"),
        result("A3", "A", [S, N], status=Status.EXCLUDED, question_id="q3", category="y"),
        result("B1", "B", [S, U], question_id="q1", category="x"),
        result("B2", "B", [U], question_id="q2", category="x"),
        result("B3", "B", [S, S], question_id="q3", category="y"),
    ])
    return load_verdicts(tmp_path)


class TestArenaRanks:
    def test_ties_where_intervals_overlap(self) -> None:
        """Rank = 1 + models whose CI lies entirely above; no-score models rank last."""
        cis = [(0.8, 0.9), (0.7, 0.85), (0.5, 0.6), None]
        assert arena_ranks(cis) == [1, 1, 3, 4]

    def test_separated_intervals_get_distinct_ranks(self) -> None:
        """Three disjoint CIs rank 1, 2, 3."""
        assert arena_ranks([(0.1, 0.2), (0.5, 0.6), (0.3, 0.4)]) == [3, 1, 2]


def paired_bootstrap(diffs: list[float], **kwargs: Any) -> tuple[float, tuple[float, float], float | None] | None:
    """One comparison over every question: column 0 of the joint bootstrap."""
    d = np.asarray(diffs, dtype=np.float64).reshape(-1, 1)
    return joint_paired_bootstrap(d, np.ones(d.shape, dtype=bool), **kwargs)[0]


class TestPairedBootstrap:
    def test_constant_positive_difference(self) -> None:
        """Every resample mean equals 1, none is as extreme as 0 under H0: p = 1/(B+1), CI (1, 1)."""
        mean, ci, p = paired_bootstrap([1.0] * 10, rng=np.random.default_rng(0), n_boot=999)  # type: ignore[misc]
        assert mean == 1.0 and ci == (1.0, 1.0) and p == pytest.approx(1 / 1000)

    def test_zero_difference_has_p_one(self) -> None:
        """All differences 0: every resample is as extreme as the observed 0, p = 1."""
        res = paired_bootstrap([0.0] * 10, rng=np.random.default_rng(0), n_boot=100)
        assert res is not None and res[2] == 1.0

    def test_two_shared_questions_report_no_p(self) -> None:
        """d = (2, 0): the mean and CI stay, but 2 shared questions are too few for a p (the minimum is 10)."""
        res = paired_bootstrap([2.0, 0.0], rng=np.random.default_rng(1), n_boot=8000)
        assert MIN_SHARED_QUESTIONS == 10
        assert res == (1.0, (0.0, 2.0), None)

    def test_ten_values_p(self) -> None:
        """d = (2, 0) × 5: |m* − 1| ≥ 1 only when all 10 draws are equal, prob 2/2^10; p ≈ (1 + B·2/1024)/(B + 1)."""
        res = paired_bootstrap([2.0, 0.0] * 5, rng=np.random.default_rng(1), n_boot=20000)
        assert res is not None and res[2] == pytest.approx(2 / 1024, abs=0.001)

    @pytest.mark.parametrize(("p", "n", "text"), [(None, 2, "too few shared questions (2 < 10)"), (None, 0, "too few shared questions (0 < 10)"),
                                                  (None, None, "—"), (1 / 1001, 125, "< 0.001"), (0.0123, 10, "0.012")],
                             ids=["two", "none-shared", "unknown", "floor", "small"])
    def test_p_cell_text(self, p: float | None, n: int | None, text: str) -> None:
        """One formatter writes p: '< 0.001' below 0.001, three decimals above, and says when there are too few questions."""
        assert format_p(p, n) == text

    def test_one_shared_question_has_no_p(self) -> None:
        """One question: the resamples cannot vary, so p is undefined (not 1/(B+1)); the mean stays."""
        res = paired_bootstrap([0.25], rng=np.random.default_rng(0), n_boot=999)
        assert res == (0.25, (0.25, 0.25), None)

    def test_no_pairs(self) -> None:
        """Without pairs the result is None."""
        assert paired_bootstrap([], rng=np.random.default_rng(0)) is None

    def test_unshared_questions_do_not_count(self) -> None:
        """A comparison's mean uses only its shared questions; one with none gives None."""
        diffs = np.array([[0.5, 9.0], [0.5, 9.0], [99.0, 9.0]])
        shared = np.array([[True, False], [True, False], [False, False]])
        first, second = joint_paired_bootstrap(diffs, shared, rng=np.random.default_rng(0), n_boot=200)
        assert first is not None and first[0] == 0.5 and first[1] == (0.5, 0.5)
        assert second is None


class TestBuildLeaderboard:
    def test_hand_computed_scores(self, small: Verdicts) -> None:
        """DAHL Score A = (2/3 + 1)/2 = 5/6 with one excluded answer, B = (1/2 + 0 + 1)/3 = 1/2."""
        board = build_leaderboard(small, k=2)
        a, b = board.models
        assert (a.model, b.model) == ("A", "B")
        assert a.dahl_score == pytest.approx(5 / 6) and b.dahl_score == pytest.approx(0.5)
        assert (a.n_scored, a.n_excluded, a.excluded_by_reason["unknown_claims"]) == (2, 1, 1)
        assert (b.n_scored, b.n_excluded) == (3, 0)
        # F1@2: A1 P = 2/3, R = 1 -> 4/5; A2 P = 1, R = 1/2 -> 2/3.
        assert a.f1_at_k == pytest.approx((4 / 5 + 2 / 3) / 2)
        assert a.factscore_init == pytest.approx(5 / 6)

    def test_overlapping_intervals_share_rank_one(self, small: Verdicts) -> None:
        """With 2-3 answers each, the CIs overlap, so both models rank 1."""
        assert [r.rank for r in build_leaderboard(small).models] == [1, 1]

    def test_comparison_drops_excluded_pairs(self, small: Verdicts) -> None:
        """q3 is dropped (A excluded): n = 2, mean diff = ((2/3 − 1/2) + (1 − 0))/2 = 7/12."""
        (cmp,) = build_leaderboard(small).comparisons
        assert (cmp.a, cmp.b, cmp.n_pairs) == ("A", "B", 2)
        assert cmp.mean_diff == pytest.approx(7 / 12)
        assert cmp.p_value is None  # 2 shared questions: too few for a p

    def test_comparison_does_not_depend_on_answer_order(self, tmp_path: Path) -> None:
        """The same answers written in another order (concurrent generation) give the same paired CI and p."""
        answers = [result(f"{m}{q}", m, labels, question_id=f"q{q}")
                   for q, (la, lb) in enumerate([([S], [U]), ([S, U], [S]), ([S, S, U], [U, U]), ([S], [S, U])])
                   for m, labels in (("A", la), ("B", lb))]
        write(tmp_path / "one", answers)
        write(tmp_path / "two", answers[::-1])
        (one,) = build_leaderboard(load_verdicts(tmp_path / "one")).comparisons
        (two,) = build_leaderboard(load_verdicts(tmp_path / "two")).comparisons
        assert (one.n_pairs, one.ci, one.p_value) == (two.n_pairs, two.ci, two.p_value)
        assert one.mean_diff == pytest.approx(two.mean_diff) == pytest.approx((1 + 0.5 + 2 / 3 - 0.5) / 4)

    def test_category_table(self, small: Verdicts) -> None:
        """Category x: A 5/6, B (1/2 + 0)/2 = 1/4; category y: A has none scored, B 1."""
        cats = build_leaderboard(small, by_category=True).categories
        assert cats["x"]["A"].score == pytest.approx(5 / 6) and cats["x"]["B"].score == pytest.approx(0.25)
        assert cats["y"]["A"].score is None and cats["y"]["A"].n_excluded == 1
        assert cats["y"]["B"].score == 1.0

    def test_same_seed_same_board(self, small: Verdicts) -> None:
        """The seeded bootstrap makes the board reproducible."""
        assert to_json(build_leaderboard(small, seed=3)) == to_json(build_leaderboard(small, seed=3))

    def test_unknown_metric(self, small: Verdicts) -> None:
        """An unknown ranking metric raises ConfigError."""
        with pytest.raises(ConfigError):
            build_leaderboard(small, metric="precision@5")


class TestRenderers:
    def test_markdown_table_shape(self, small: Verdicts) -> None:
        """Every row of the model table has the header's 9 cells."""
        text = to_markdown(build_leaderboard(small, by_category=True))
        lines = text.splitlines()
        header = lines.index(next(line for line in lines if line.startswith("| rank")))
        for line in lines[header : header + 4]:
            assert line.count("|") == 10
        assert "| 1 | A | 83.3 |" in text

    def test_markdown_comparison_says_too_few_questions(self, small: Verdicts) -> None:
        """2 shared questions: the count stands beside the difference and the p cell says there are too few."""
        text = to_markdown(build_leaderboard(small))
        assert "| A | B | shared questions | A − B | 95% CI | p (two-sided) |" in text
        assert "| A | B | 2 | +58.3 |" in text and text.rstrip().endswith("| too few shared questions (2 < 10) |")
        doc = to_json(build_leaderboard(small))
        assert doc["settings"]["min_shared_questions"] == 10
        assert (doc["comparisons"][0]["n_pairs"], doc["comparisons"][0]["p_value"]) == (2, None)

    def test_csv_rows(self, small: Verdicts) -> None:
        """CSV has one row per model with the category columns."""
        rows = list(csv.DictReader(io.StringIO(to_csv(build_leaderboard(small, by_category=True)))))
        assert [r["model"] for r in rows] == ["A", "B"]
        assert float(rows[1]["dahl_score:x"]) == pytest.approx(0.25)


class TestPlot:
    def test_png_is_written(self, small: Verdicts, tmp_path: Path) -> None:
        """--plot writes a PNG file."""
        pytest.importorskip("matplotlib")
        from dahl.analysis._plots import plot_leaderboard

        out = plot_leaderboard(build_leaderboard(small, by_category=True), tmp_path / "board.png")
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_missing_matplotlib_is_a_clear_error(self, small: Verdicts, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """Without matplotlib, plotting raises ConfigError naming the extra."""
        from dahl.analysis._plots import plot_leaderboard

        monkeypatch.setitem(sys.modules, "matplotlib", None)
        with pytest.raises(ConfigError, match=r"dahl\[plot\]"):
            plot_leaderboard(build_leaderboard(small), tmp_path / "x.png")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three FActScore replay runs (skips without the shared data)."""
    return replay_runs(tmp_path_factory)


@pytest.mark.data
class TestFActScoreBoard:
    def test_values_of_the_scoring_issue(self, runs: dict[str, Path]) -> None:
        """FActScore (no penalty) 41.9/57.5/69.3 and DAHL Score 47.5/61.8/82.6, each inside its CI."""
        board = build_leaderboard(load_runs([runs[m] for m in MODELS]))
        rows = {r.model: r for r in board.models}
        for model, fs, ds in (("InstructGPT", 41.9, 47.5), ("ChatGPT", 57.5, 61.8), ("PerplexityAI", 69.3, 82.6)):
            r = rows[model]
            assert r.factscore_init is not None and r.dahl_score is not None and r.dahl_score_ci is not None
            assert 100 * r.factscore_init == pytest.approx(fs, abs=0.05)
            assert 100 * r.dahl_score == pytest.approx(ds, abs=0.05)
            assert r.dahl_score_ci[0] < r.dahl_score < r.dahl_score_ci[1]

    def test_rank_order_with_paired_p_values(self, runs: dict[str, Path]) -> None:
        """PerplexityAI > ChatGPT > InstructGPT, ranks 1, 2, 3, each gap with paired p < 0.01."""
        board = build_leaderboard(load_runs([runs[m] for m in MODELS]))
        assert [(r.model, r.rank) for r in board.models] == [("PerplexityAI", 1), ("ChatGPT", 2), ("InstructGPT", 3)]
        assert [(c.a, c.b) for c in board.comparisons] == [("PerplexityAI", "ChatGPT"), ("ChatGPT", "InstructGPT")]
        for c in board.comparisons:
            assert c.p_value is not None and c.p_value < 0.01
            assert c.mean_diff is not None and c.ci is not None and c.ci[0] > 0

    def test_markdown_p_below_a_thousandth(self, runs: dict[str, Path]) -> None:
        """A bootstrap p at its floor (1/1001) reads '< 0.001' in the markdown, never 0.000999."""
        text = to_markdown(build_leaderboard(load_runs([runs[m] for m in MODELS])))
        rows = [line for line in text.splitlines() if line.startswith(("| PerplexityAI | ChatGPT |", "| ChatGPT | InstructGPT |"))]
        assert len(rows) == 2 and all(r.endswith("| < 0.001 |") for r in rows) and "0.000999" not in text

    def test_ci_matches_summary_json(self, runs: dict[str, Path]) -> None:
        """The DAHL Score CI equals summary.json's (same seed derivation)."""
        board = build_leaderboard(load_runs([runs["ChatGPT"]]))
        summary = json.loads((runs["ChatGPT"] / "summary.json").read_text())["models"]["ChatGPT"]
        assert list(board.models[0].dahl_score_ci or ()) == summary["dahl_score_ci"]

    def test_json_fields(self, runs: dict[str, Path]) -> None:
        """board.json models carry the fields of the issue, sorted by rank."""
        doc = to_json(build_leaderboard(load_runs([runs[m] for m in MODELS]), by_category=True))
        required = {"model", "rank", "dahl_score", "dahl_score_ci", "factscore", "f1_at_k", "n_scored", "n_excluded"}
        assert all(required <= set(m) for m in doc["models"])
        assert [m["rank"] for m in doc["models"]] == sorted(m["rank"] for m in doc["models"])
        assert set(doc["categories"]) == {"very rare", "rare", "medium", "freq", "very freq"}


@pytest.fixture
def recall_store(tmp_path: Path) -> Verdicts:
    """The two-model recall fixture of tests/recall_runs.py, scored and loaded as a real run."""
    return load_runs([recall_run(tmp_path / "run")])


class TestRecallBoard:
    def test_hand_computed_recall_columns(self, recall_store: Verdicts) -> None:
        """Rec, Rec^w, F1, F1^w are means over answers with the value (abstained 0); ρ over responding answers."""
        rows = {r.model: r for r in build_leaderboard(recall_store).models}
        a, b = rows["A"], rows["B"]
        assert (a.recall, a.recall_w, a.f1, a.f1_w) == pytest.approx((2 / 3, 3 / 4, 13 / 18, 11 / 14))
        assert (b.recall, b.recall_w, b.f1, b.f1_w) == pytest.approx((1 / 2, 1 / 2, 1 / 3, 1 / 3))
        assert (a.rho, b.rho) == (2.0, 1.5) and (a.n_recall, b.n_recall) == (2, 2)

    def test_rank_by_recall_w_and_compare_per_question(self, recall_store: Verdicts) -> None:
        """--metric recall_w ranks by Rec^w; the paired difference is the mean over shared questions: (−1/2 + 1)/2."""
        board = build_leaderboard(recall_store, metric="recall_w")
        assert [r.model for r in board.models] == ["A", "B"]
        assert board.models[0].score == pytest.approx(3 / 4) and (board.models[0].n_scored, board.models[0].n_excluded) == (2, 1)
        c = board.comparisons[0]
        assert (c.a, c.b, c.n_pairs) == ("A", "B", 2) and c.mean_diff == pytest.approx(1 / 4)

    def test_recall_ci_uses_the_summary_seed(self, recall_store: Verdicts) -> None:
        """The recall CI is bootstrap_ci of the model's per-answer values with summary.json's group seed."""
        board = build_leaderboard(recall_store, metric="recall")
        values, mask = recall_store.scores("recall")
        rows = np.asarray(recall_store.model) == recall_store.models.index("A")
        expected = bootstrap_ci(values[rows & mask], rng=np.random.default_rng(group_seed(0, "A")))
        assert board.models[0].model == "A" and board.models[0].ci == expected

    def test_markdown_and_csv_columns(self, recall_store: Verdicts) -> None:
        """The markdown row shows Rec 66.7, Rec^w 75.0, mean F1 72.2, F1 of means 2·P·R/(P + R) with P
        (the DAHL Score 8/9) and R = 2/3: 16/21 = 76.2, F1^w 78.6, ρ 2.0; CSV and JSON have the fractions."""
        board = build_leaderboard(recall_store)
        lines = to_markdown(board).splitlines()
        assert lines[2].startswith("| rank | model | DAHL Score | 95% CI | FActScore | FActScore (no penalty) | F1@64 "
                                   "| Rec | Rec^w | mean F1 | F1 of means | F1^w | ρ | scored | excluded |")
        assert "| 66.7 | 75.0 | 72.2 | 76.2 | 78.6 | 2.0 | 3 | 0 |" in lines[4]
        rows = list(csv.DictReader(io.StringIO(to_csv(board))))
        assert float(rows[1]["recall_w"]) == 0.5 and rows[1]["rho"] == "1.5" and rows[1]["n_recall"] == "2"
        a = board.models[0]
        assert a.dahl_score is not None and a.recall is not None
        assert a.f1_of_means == pytest.approx(16 / 21)
        assert float(rows[0]["f1_of_means"]) == a.f1_of_means == to_json(board)["models"][0]["f1_of_means"]

    def test_json_has_recall_keys_only_with_recall(self, recall_store: Verdicts, small: Verdicts) -> None:
        """board.json rows carry recall, recall_w, f1, f1_w, rho, n_recall with recall, and not without."""
        with_recall = to_json(build_leaderboard(recall_store))["models"][0]
        assert {k: with_recall[k] for k in ("recall", "rho", "n_recall")} == {"recall": 2 / 3, "rho": 2.0, "n_recall": 2}
        assert not {"recall", "recall_w", "f1", "f1_w", "rho"} & set(to_json(build_leaderboard(small))["models"][0])
        assert "Rec" not in to_markdown(build_leaderboard(small)) and "recall" not in to_csv(build_leaderboard(small))

    def test_runs_with_and_without_recall_rank_by_dahl_score(self, tmp_path: Path) -> None:
        """The default board mixes a run with recall and one without: the latter's recall cells are empty."""
        plain = recall_run(tmp_path / "plain-run", [("C1", "C", "q1", "SS", False, [])], with_recall=False)
        store = load_runs([recall_run(tmp_path / "run"), plain])
        rows = {r.model: r for r in build_leaderboard(store).models}
        assert rows["A"].recall == pytest.approx(2 / 3) and rows["A"].recall_w == pytest.approx(3 / 4)
        assert (rows["C"].recall, rows["C"].f1_w, rows["C"].n_recall, rows["C"].dahl_score) == (None, None, 0, 1.0)
        with pytest.raises(ConfigError, match=r"recall_w needs recall, and .*plain-run has none"):
            build_leaderboard(store, metric="recall_w")

    def test_recall_metric_on_a_run_without_recall_names_it(self, tmp_path: Path) -> None:
        """Ranking by f1_w a run scored without refs is a ConfigError naming its folder."""
        store = load_runs([recall_run(tmp_path / "plain-run", with_recall=False)])
        with pytest.raises(ConfigError, match=r"f1_w needs recall, and .*plain-run has none"):
            build_leaderboard(store, metric="f1_w")


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The FActScore replay runs with pooled human recall (tests/recall_runs.py; skips without the data)."""
    return pooled_factscore_runs(tmp_path_factory.mktemp("factscore-pooled"))


@pytest.mark.data
class TestPooledFActScoreRecall:
    def test_recall_of_the_issue(self, pooled: dict[str, Path]) -> None:
        """Rec = InstructGPT 23.2, ChatGPT 35.0, PerplexityAI 49.2 over n = 120 entities each, 1 / 12 / 9 abstained."""
        store = load_runs([pooled[m] for m in MODELS])
        board = build_leaderboard(store, metric="recall")
        assert [(r.model, round(100 * (r.recall or 0), 1), r.n_recall) for r in board.models] == [
            ("PerplexityAI", 49.2, 120), ("ChatGPT", 35.0, 120), ("InstructGPT", 23.2, 120)]
        _, mask = store.scores("recall")
        abstained = np.asarray(store.status) == list(Status).index(Status.ABSTAINED)
        counts = {name: int((mask & abstained & (np.asarray(store.model) == i)).sum())
                  for i, name in enumerate(store.models)}
        assert counts == {"InstructGPT": 1, "ChatGPT": 12, "PerplexityAI": 9}

    def test_unweighted_set_has_rec_w_equal_rec(self, pooled: dict[str, Path]) -> None:
        """Every pooled fact weighs 1, so Rec^w = Rec for each model."""
        for r in build_leaderboard(load_runs([pooled[m] for m in MODELS])).models:
            assert r.recall_w == pytest.approx(r.recall)
