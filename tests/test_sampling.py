"""Stratified sampling (largest remainder) and the DAHL paper's repeated-sample check."""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dahl.errors import ConfigError
from dahl.records import Label
from dahl.analysis._sampling import allocate, repeat_check, sample_file, stratified_sample
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
