"""The cover stage on the progress line and in the final report: shown with a Coverer, absent without."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from dahl.cli._progress import Meter
from dahl.cli._summary import print_summary
from dahl.results._counters import RunCounters
from dahl.run._report import ScoreReport


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def summary_of(counters: RunCounters) -> dict[str, Any]:
    return {"run": counters.as_dict(), "changes": {"previous_run": False}}


class TestCoverProgress:
    def test_the_line_shows_answers_covering_and_facts_judged(self) -> None:
        """12 answers in the cover stage and 3,400 facts judged read '· 12 covering · 3,400 facts judged ·'."""
        counters = RunCounters(started_at=0.0, covering=True, answers_covering=12, facts_judged=3_400)
        line = Meter(counters, clock=Clock(10.0)).snapshot().plain()
        assert "· 0 in flight · 12 covering · 3,400 facts judged · 0 errors ·" in line

    def test_without_a_coverer_the_line_is_unchanged(self) -> None:
        """No cover stage: no cover fields, even if the counters hold numbers."""
        counters = RunCounters(started_at=0.0, answers_covering=5, facts_judged=7)
        line = Meter(counters, clock=Clock(10.0)).snapshot().plain()
        assert "covering" not in line and "judged" not in line
        assert line == "progress: 0 answers · 0 claims/s · 0 in flight · 0 errors · 0:00:10"


class TestCoverReport:
    def report(self, counters: RunCounters, tmp_path: Path) -> str:
        console = Console(width=200, record=True, file=io.StringIO())
        print_summary(console, ScoreReport(summary_of(counters), counters, [], tmp_path / "a", tmp_path / "s"),
                      tmp_path)
        return console.export_text()

    def test_the_report_counts_covered_answers_and_facts(self, tmp_path: Path) -> None:
        """A run with a cover stage reports its answers covered, facts judged and facts in error."""
        counters = RunCounters(covering=True, answers_covered=120, facts_judged=2_400, facts_failed=3)
        counters.errors["RateLimited"] += 3
        text = self.report(counters, tmp_path)
        assert "coverage: 120 answers covered now, 2,400 reference facts judged, 3 in error\n" in text
        assert "3 errors by class: RateLimited 3\n" in text

    def test_a_run_without_recall_reports_no_recall_line(self, tmp_path: Path) -> None:
        """No cover stage: no 'recall:' line."""
        assert "recall:" not in self.report(RunCounters(), tmp_path)
