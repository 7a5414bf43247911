"""Static HTML report of scored runs: a leaderboard page and an answer explorer.

:func:`build_report` writes the site; :mod:`dahl.report._answers` turns each
run's ``answers.jsonl`` into the explorer's index and on-demand data chunks.
"""

from dahl.report._build import ReportSite, build_report

__all__ = ["ReportSite", "build_report"]
