"""Stratified sampling (largest remainder) and the DAHL paper's repeated-sample check."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dahl.errors import ConfigError
from dahl.records import Label, Status, content_id
from dahl.analysis._sampling import allocate, anova, check_text, question_check, repeat_check, sample_file, stratified_sample
from dahl.analysis._verdicts import load_verdicts
from tests.conftest import require_data
from tests.test_verdicts import result, write

S, U = Label.SUPPORTED, Label.UNSUPPORTED


class TestAllocate:
    def test_largest_remainder(self) -> None:
        """Sizes 10, 7, 3 at 1/2: quotas 5, 3.5, 1.5 -> floors 5, 3, 1; the one left goes to the larger tie (7)."""
        assert allocate([10, 7, 3], 0.5, ["a", "b", "c"]).tolist() == [5, 4, 1]

    def test_total_is_rounded_fraction(self) -> None:
        """Sizes 41, 51, 129 at 0.1: quotas 4.1, 5.1, 12.9 -> 4, 5, 12 + one to the 0.9 remainder; total 22."""
        assert allocate([41, 51, 129], 0.1).tolist() == [4, 5, 13]

    def test_bad_fraction(self) -> None:
        """A fraction outside (0, 1] raises ConfigError."""
        with pytest.raises(ConfigError):
            allocate([3], 0.0)


class TestStratifiedSample:
    def test_counts_per_stratum_and_seed(self) -> None:
        """Each stratum gets its allocation; the same seed draws the same rows."""
        strata = ["x"] * 10 + ["y"] * 7 + ["z"] * 3
        picked = stratified_sample(strata, 0.5, np.random.default_rng(4))
        assert Counter(strata[i] for i in picked.tolist()) == {"x": 5, "y": 4, "z": 1}
        assert picked.tolist() == stratified_sample(strata, 0.5, np.random.default_rng(4)).tolist()
        assert picked.tolist() == sorted(set(picked.tolist()))


class TestSampleFile:
    def test_jsonl_lines_kept_verbatim(self, tmp_path: Path) -> None:
        """A JSONL sample holds input lines unchanged, in input order."""
        lines = [f'{{"q": {i}, "category": "{"ab"[i % 2]}"}}\n' for i in range(6)]
        (tmp_path / "in.jsonl").write_text("".join(lines))
        content, per = sample_file(tmp_path / "in.jsonl", tmp_path / "out.jsonl", fraction=0.5, stratify="category", seed=0)
        out = (tmp_path / "out.jsonl").read_text().splitlines(keepends=True)
        assert per == {"a": (3, 2), "b": (3, 1)} or per == {"a": (3, 1), "b": (3, 2)}
        assert len(out) == 3 and all(x in lines for x in out) and out == sorted(out, key=lines.index)
        assert content.decode() == "".join(out)

    @pytest.mark.data
    def test_dahl_questions_keep_the_category_distribution(self) -> None:
        """10% of the 8,573 DAHL questions: 857 rows; each category gets floor or ceil of 10% of its size."""
        src = require_data("dahl/questions.csv")
        content, per = sample_file(src, None, fraction=0.1, stratify="category", seed=0)
        rows = list(csv.DictReader(io.StringIO(content.decode())))
        assert len(rows) == 857 and len(per) == 29
        got = Counter(r["category"] for r in rows)
        for cat, (n, m) in per.items():
            assert got[cat] == m and int(0.1 * n) <= m <= int(0.1 * n) + 1


class TestRepeatCheck:
    def test_full_samples_are_identical(self, tmp_path: Path) -> None:
        """At fraction 1 every sample is the whole set: F = 1 (p = 1) and t = 0 (p = 1) for all 3 pairs."""
        write(tmp_path, [result(f"a{i}", "m", [S] * (i % 3 + 1) + [U], category="xy"[i % 2]) for i in range(12)])
        check = repeat_check(load_verdicts(tmp_path), fraction=1.0, repeats=3, seed=0)
        assert check.model == "m" and check.sizes == [12, 12, 12] and len(check.tests) == 3
        assert all(t.f_stat == pytest.approx(1.0) and t.t_stat == pytest.approx(0.0) for t in check.tests)
        assert check.min_f_p == pytest.approx(1.0) and check.min_t_p == pytest.approx(1.0)

    def test_model_must_be_named_when_several(self, tmp_path: Path) -> None:
        """A run with two models needs --model."""
        write(tmp_path, [result("a", "m1", [S]), result("b", "m2", [S])])
        with pytest.raises(ConfigError, match="--model"):
            repeat_check(load_verdicts(tmp_path), fraction=0.5, repeats=2, seed=0)


class TestAnova:
    def test_matches_scipy_f_oneway(self) -> None:
        """Groups (1, 2, 3), (2, 4), (5, 6, 7, 8): F and p equal scipy.stats.f_oneway's, df (2, 6)."""
        from scipy import stats  # type: ignore[import-untyped]

        groups = [np.array([1.0, 2, 3]), np.array([2.0, 4]), np.array([5.0, 6, 7, 8])]
        f_stat, p, df = anova(groups)
        ref = stats.f_oneway(*groups)
        assert df == (2, 6) and f_stat == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)

    def test_undefined_cases(self) -> None:
        """One non-empty group, one value per group, or constant groups: no F (None), never NaN."""
        assert anova([np.array([1.0, 2]), np.array([])])[:2] == (None, None)
        assert anova([np.array([1.0]), np.array([2.0])])[:2] == (None, None)
        assert anova([np.array([1.0, 1]), np.array([2.0, 2])])[:2] == (None, None)


QUESTIONS = [(f"Question {i}?", "xy"[i % 2]) for i in range(20)]


def question_run(tmp_path: Path) -> Path:
    """Model m answers questions 0-18 twice (precision (i % 4 + 1) / (i % 4 + 2) and 1), question 19 abstained;
    model n answers them all with 1."""
    answers = []
    for i, (text, cat) in enumerate(QUESTIONS):
        qid = content_id(text)
        if i == 19:
            answers.append(result(f"m{i}", "m", [], status=Status.ABSTAINED, question_id=qid, category=cat))
        else:
            answers.append(result(f"m{i}a", "m", [S] * (i % 4 + 1) + [U], question_id=qid, category=cat))
            answers.append(result(f"m{i}b", "m", [S], question_id=qid, category=cat))
        answers.append(result(f"n{i}", "n", [S], question_id=qid, category=cat))
    write(tmp_path / "run", answers)
    (tmp_path / "questions.csv").write_text("question,category\n" + "".join(f"{q},{c}\n" for q, c in QUESTIONS))
    return tmp_path / "run"


class TestQuestionCheck:
    def test_samples_of_questions_scored_per_question(self, tmp_path: Path) -> None:
        """5 samples of 50% of 20 questions (5 x, 5 y each); a question's score is the mean of m's answers to it,
        the abstained question drops out; the ANOVA and every pair's tests are those of the samples' values."""
        from scipy import stats

        run = question_run(tmp_path)
        check = question_check(tmp_path / "questions.csv", load_verdicts(run), fraction=0.5, repeats=5, seed=3,
                               model="m")
        assert (check.unit, check.drawn, check.population, len(check.tests)) == ("questions", 10, 20, 10)
        score = {content_id(q): ((i % 4 + 1) / (i % 4 + 2) + 1) / 2 for i, (q, _) in enumerate(QUESTIONS) if i != 19}
        rng = np.random.default_rng(3)
        samples = []
        for _ in range(5):
            picked = stratified_sample([c for _, c in QUESTIONS], 0.5, rng)
            assert Counter(QUESTIONS[i][1] for i in picked.tolist()) == {"x": 5, "y": 5}
            samples.append([score[content_id(QUESTIONS[i][0])] for i in picked.tolist() if i != 19])
        assert check.sizes == [len(v) for v in samples]
        assert check.means == [pytest.approx(sum(v) / len(v)) for v in samples]
        ref = stats.f_oneway(*samples)
        assert check.anova_f == pytest.approx(ref.statistic) and check.anova_p == pytest.approx(ref.pvalue)
        assert check.anova_df == (4, sum(map(len, samples)) - 5)
        first = stats.ttest_ind(samples[0], samples[1])
        assert (check.tests[0].i, check.tests[0].j, check.tests[0].t_p) == (0, 1, pytest.approx(first.pvalue))

    def test_same_seed_same_samples(self, tmp_path: Path) -> None:
        """The seed fixes the samples: the same seed repeats the result, another draws other samples."""
        run, questions = question_run(tmp_path), tmp_path / "questions.csv"
        one, two, other = (question_check(questions, load_verdicts(run), fraction=0.5, model="m", seed=s)
                           for s in (7, 7, 8))
        assert one == two and one.means != other.means

    def test_refusals(self, tmp_path: Path) -> None:
        """Several models need --model; a question set the run never answered is named."""
        run, questions = question_run(tmp_path), tmp_path / "questions.csv"
        with pytest.raises(ConfigError, match="--model"):
            question_check(questions, load_verdicts(run))
        (tmp_path / "other.csv").write_text("question,category\nSomething else?,x\n")
        with pytest.raises(ConfigError, match="no question of .*other.csv has a scored answer of m"):
            question_check(tmp_path / "other.csv", load_verdicts(run), model="m")

    def test_study_sampling_command(self, tmp_path: Path) -> None:
        """dahl study sampling prints what it drew, the ANOVA F and p, the pairs table and the verdict."""
        from click.testing import CliRunner

        from dahl.cli import main

        run = question_run(tmp_path)
        result_ = CliRunner().invoke(main, ["study", "sampling", str(tmp_path / "questions.csv"), str(run),
                                            "--model", "m", "--fraction", "0.5", "--seed", "3"])
        assert result_.exit_code == 0, result_.output
        check = question_check(tmp_path / "questions.csv", load_verdicts(run), fraction=0.5, seed=3, model="m")
        assert result_.output == check_text(check, metric="dahl_score", fraction=0.5, seed=3)
        lines = result_.output.splitlines()
        assert lines[0] == ("5 samples of 0.5 of 20 questions (10 each, by category, seed 3); m's DAHL Score per "
                            "question (mean of its answers)")
        assert lines[3].startswith("one-way ANOVA across the samples: F = ") and "(df 4, " in lines[3]
        assert sum(1 for line in lines if line.startswith("| ") and line[2].isdigit()) == 10
        bad = CliRunner().invoke(main, ["study", "sampling", str(tmp_path / "questions.csv"), str(run)])
        assert bad.exit_code == 2 and "choose one with --model" in bad.output
