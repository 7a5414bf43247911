"""Agreement statistics against hand-computed values, and score loading."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dahl.analysis._agreement import agreement, join_scores, load_scores
from dahl.errors import ConfigError, InputError
from dahl.records import Label
from tests.report_runs import factscore_run
from tests.test_verdicts import result, write

A = [1.0, 2.0, 3.0, 4.0, 5.0]
B = [2.0, 1.0, 4.0, 3.0, 6.0]


def t3_two_sided(t: float) -> float:
    """Two-sided p of Student's t with 3 df: F(t) = 1/2 + (x/(1+x²) + atan x)/π, x = t/√3."""
    x = abs(t) / math.sqrt(3)
    return 1.0 - 2.0 * (x / (1 + x * x) + math.atan(x)) / math.pi


class TestAgreement:
    """A = 1..5, B = 2,1,4,3,6: means 3 and 3.2, variances 10/4 = 2.5 and 14.8/4 = 3.7, covariance 2.5."""

    def test_moments(self) -> None:
        """Means and sample variances (ddof 1)."""
        s = agreement(A, B)
        assert (s.n, s.mean_a, s.mean_b) == (5, 3.0, pytest.approx(3.2))
        assert s.var_a == pytest.approx(2.5) and s.var_b == pytest.approx(3.7)

    def test_pearson(self) -> None:
        """r = 2.5/√(2.5·3.7) = √(25/37); t = r√3/√(1−r²) = 2.5 exactly; p from the 3-df t."""
        s = agreement(A, B)
        assert s.pearson_r == pytest.approx(math.sqrt(25 / 37), rel=1e-12)
        assert s.pearson_p == pytest.approx(t3_two_sided(2.5), rel=1e-9)

    def test_spearman(self) -> None:
        """Ranks differ by (−1, 1, −1, 1, 0): rho = 1 − 6·4/(5·24) = 0.8; p from t = 0.8√3/0.6 (3 df)."""
        s = agreement(A, B)
        assert s.spearman_rho == pytest.approx(0.8, rel=1e-12)
        assert s.spearman_p == pytest.approx(t3_two_sided(0.8 * math.sqrt(3) / 0.6), rel=1e-9)

    def test_paired_t(self) -> None:
        """d = (−1, 1, −1, 1, −1): mean −0.2, s² = 1.2, t = −0.2/√0.24; 4-df p = 1 − 2·(3/8)·0.4·(74/75) = 0.704."""
        s = agreement(A, B)
        assert s.t_stat == pytest.approx(-0.2 / math.sqrt(0.24), rel=1e-12)
        assert s.t_df == 4
        assert s.t_p == pytest.approx(0.704, rel=1e-9)

    def test_f_test(self) -> None:
        """F = 2.5/3.7; with (4, 4) df the CDF is I_x(2, 2) = 3x² − 2x³, x = F/(1+F) = 25/62; p = 2·CDF."""
        s = agreement(A, B)
        x = 25 / 62
        assert s.f_stat == pytest.approx(25 / 37, rel=1e-12)
        assert s.f_df == (4, 4)
        assert s.f_p == pytest.approx(2 * (3 * x**2 - 2 * x**3), rel=1e-9)

    def test_mean_difference_ci(self) -> None:
        """−0.2 ± t(0.975, 4)·√0.24 with t(0.975, 4) = 2.7764451 (table value)."""
        s = agreement(A, B)
        half = 2.7764451052 * math.sqrt(0.24)
        assert s.mean_diff == pytest.approx(-0.2)
        assert s.mean_diff_ci == pytest.approx((-0.2 - half, -0.2 + half), rel=1e-9)

    def test_constant_side_gives_none(self) -> None:
        """With a constant side correlations and the F-test are undefined (None), not NaN."""
        s = agreement([1.0, 1.0, 1.0], [1.0, 2.0, 4.0])
        assert s.pearson_r is None and s.spearman_rho is None and s.f_stat is None
        assert s.t_stat is not None

    def test_too_few_pairs(self) -> None:
        """Fewer than 2 pairs raises ConfigError."""
        with pytest.raises(ConfigError):
            agreement([1.0], [2.0])


class TestLoadScores:
    def test_jsonl_and_csv(self, tmp_path: Path) -> None:
        """JSONL and CSV files of {id, score} load to the same mapping; the join keeps shared ids."""
        (tmp_path / "a.jsonl").write_text('{"id": "x", "score": 0.5}\n{"id": "y", "score": 1}\n')
        (tmp_path / "b.csv").write_text("id,score\ny,0.25\nz,0\n")
        a, b = load_scores(tmp_path / "a.jsonl"), load_scores(tmp_path / "b.csv")
        assert a == {"x": 0.5, "y": 1.0} and b == {"y": 0.25, "z": 0.0}
        ids, x, y = join_scores(a, b)
        assert ids == ["y"] and x.tolist() == [1.0] and y.tolist() == [0.25]

    def test_bad_score_is_named(self, tmp_path: Path) -> None:
        """A non-numeric score raises InputError with file, line and field."""
        (tmp_path / "a.csv").write_text("id,score\nx,high\n")
        with pytest.raises(InputError, match=r"a.csv:2, field 'score'"):
            load_scores(tmp_path / "a.csv")

    def test_duplicate_id(self, tmp_path: Path) -> None:
        """A repeated id raises InputError."""
        (tmp_path / "a.jsonl").write_text('{"id": "x", "score": 1}\n{"id": "x", "score": 0}\n')
        with pytest.raises(InputError, match="duplicate"):
            load_scores(tmp_path / "a.jsonl")

    def test_run_folder_skips_excluded(self, tmp_path: Path) -> None:
        """From a run folder only answers inside the metric's mask are returned."""
        write(tmp_path, [result("a", "m", [Label.SUPPORTED, Label.UNSUPPORTED]),
                         result("b", "m", [Label.UNKNOWN])])
        assert load_scores(tmp_path) == {"a": 0.5}


@pytest.mark.data
class TestSplitterValidation:
    def test_claim_counts_human_vs_rules(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        """Human atomic facts vs rule Splitter claims on InstructGPT: 127 answers, positive r, t-test reported."""
        base = tmp_path_factory.getbasetemp() / "factscore-runs"
        base.mkdir(exist_ok=True)
        human = load_scores(factscore_run(base, "InstructGPT"), metric="n_claims")
        rules = load_scores(factscore_run(base, "InstructGPT", "rules", "fake"), metric="n_claims")
        _, x, y = join_scores(human, rules)
        s = agreement(x, y)
        assert s.n == 127
        assert s.pearson_r is not None and 0.3 < s.pearson_r < 0.9 and s.pearson_p is not None
        assert s.t_p is not None and s.t_stat is not None and s.t_stat > 0
