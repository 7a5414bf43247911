"""The exit status a finished run's summary gives (dahl.run._report.run_status)."""

from __future__ import annotations

from typing import Any

from dahl.exit_status import ExitStatus
from dahl.metrics import REASONS
from dahl.run._report import run_status


def _block(n: int, *, split_errors: int = 0, claim_errors: int = 0, coverage_errors: int | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {
        "n_answers": n,
        "excluded_by_reason": {r: (split_errors if r == "split_error" else 0) for r in REASONS},
        "labels": {"supported": 3, "unsupported": 1, "irrelevant": 0, "unknown": 0, "error": claim_errors},
    }
    if coverage_errors is not None:
        block["recall"] = {"n": n - coverage_errors, "null_by_reason": {"coverage_error": coverage_errors}}
    return block


def test_clean_run_is_ok() -> None:
    assert run_status({"models": {"m": _block(4, coverage_errors=0)}}, 0) is ExitStatus.OK


def test_a_failed_coverage_judgement_is_partial() -> None:
    # The answer's recall is null (a re-run judges it again): the run is not complete.
    assert run_status({"models": {"a": _block(4), "b": _block(4, coverage_errors=1)}}, 0) is ExitStatus.PARTIAL


def test_claim_errors_and_skipped_records_are_partial_and_only_split_errors_nothing() -> None:
    assert run_status({"models": {"m": _block(4, claim_errors=2)}}, 0) is ExitStatus.PARTIAL
    assert run_status({"models": {"m": _block(4)}}, 3) is ExitStatus.PARTIAL
    assert run_status({"models": {"m": _block(4, split_errors=4)}}, 0) is ExitStatus.NOTHING_SCORED
