"""What a finished run hands back: :class:`ScoreReport` and its exit status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dahl.analysis._summary import Summary
from dahl.results._counters import RunCounters
from dahl.errors import DahlError, InputError
from dahl.exit_status import ExitStatus

__all__ = ["ScoreReport", "run_status", "single_error"]


@dataclass
class ScoreReport:
    """What a run produced.

    Attributes:
        summary: the content of ``summary.json``, as plain JSON values.
        counters: the run's counters.
        input_errors: the first rejected input records (file, line, field, message).
        answers_path, summary_path: the files written.
        result: the same summary typed, with the statistics :meth:`Summary.merge` needs
            (None when the report was not made by a run).
    """

    summary: dict[str, Any]
    counters: RunCounters
    input_errors: list[InputError]
    answers_path: Path
    summary_path: Path
    result: Summary | None = None

    @property
    def exit_status(self) -> ExitStatus:
        """The run's outcome as the CLI's exit status (see :mod:`dahl.exit_status`).

        ``NOTHING_SCORED`` when no answer was scored (or every split failed); ``PARTIAL`` when input
        records were skipped or answers or claims ended in ``error``; ``OK`` otherwise.
        """
        return run_status(self.summary, self.counters.input_errors)


def run_status(summary: dict[str, Any], input_errors: int) -> ExitStatus:
    """The exit status (``OK``, ``PARTIAL`` or ``NOTHING_SCORED``) of a finished run.

    Args:
        summary: the ``summary.json`` content.
        input_errors: input records skipped by this run.
    """
    models = summary["models"].values()
    answers = sum(m["n_answers"] for m in models)
    split_errors = sum(m["excluded_by_reason"]["split_error"] for m in models)
    if answers == split_errors:  # nothing in the output, or only failures
        return ExitStatus.NOTHING_SCORED
    claim_errors = sum(m["labels"].get("error", 0) for m in models)
    # A failed coverage judgement leaves the answer's recall null; a re-run retries it.
    coverage_errors = sum(m.get("recall", {}).get("null_by_reason", {}).get("coverage_error", 0) for m in models)
    if input_errors or split_errors or claim_errors or coverage_errors:
        return ExitStatus.PARTIAL
    return ExitStatus.OK


def single_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error a caller should see from a task group's ``group``: its first DahlError
    (the others are follow-on failures), else its only member, else ``group`` itself."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = exc.exceptions
        else:
            leaves.append(exc)
    chosen: BaseException | None = next((e for e in leaves if isinstance(e, DahlError)), None)
    if chosen is None and len(leaves) == 1:
        chosen = leaves[0]
    return chosen if chosen is not None else group
