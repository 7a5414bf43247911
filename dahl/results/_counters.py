"""The run's counters: :class:`RunCounters`, updated live, and its :class:`RunCounts` snapshot
(summary.json's ``run`` block); :class:`JobCounters` and :class:`JobReport` for the jobs that write
one line per item (``dahl generate``, ``dahl refs build``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from dahl.exit_status import ExitStatus
from dahl.lanes._lane import LaneStatistics

if TYPE_CHECKING:
    from dahl.lanes._spend import Spend

__all__ = ["JobCounters", "JobReport", "RunCounters", "RunCounts"]


class RunCounts(msgspec.Struct, frozen=True, kw_only=True):
    """The counters of a run read at one moment (see :class:`RunCounters`); the cover ones are
    UNSET (left out) without a cover stage.

    Attributes:
        elapsed_s: seconds from the start to the snapshot, to the millisecond.
        lanes: lane key -> its statistics (never an API key); empty without HTTP lanes.
    """

    answers_read: int
    answers_resumed: int
    answers_done: int
    answers_cached: int
    status: dict[str, int]
    input_errors: int
    claims_done: int
    claims_checked: int
    claims_cached: int
    claims_deduped: int
    claims_failed: int
    answers_covered: int | UnsetType = UNSET
    facts_judged: int | UnsetType = UNSET
    facts_failed: int | UnsetType = UNSET
    errors: dict[str, int]
    elapsed_s: float
    lanes: dict[str, LaneStatistics]


# The int counters of RunCounts, and those of a run with a cover stage.
_COUNTS = ("answers_read", "answers_resumed", "answers_done", "answers_cached", "input_errors", "claims_done",
           "claims_checked", "claims_cached", "claims_deduped", "claims_failed")
_COVER_COUNTS = ("answers_covered", "facts_judged", "facts_failed")


@dataclass
class RunCounters:
    """Mutable counters of one run, read by the progress display and the final summary.

    Updated on the event loop thread, but ``answers_resumed`` and ``input_errors`` by the reader thread.

    Attributes:
        answers_read: answers taken from the input (``answers_resumed`` of them finished before).
        answers_done: answers written in this run (``status``: by status; ``answers_cached``: whole
            from the cache).
        input_errors: input records rejected (bad JSON, missing field, ...).
        claims_done, claims_failed: claims with a verdict (errors included), and labelled ``error``.
        claims_checked, claims_cached, claims_deduped: claims decided by a Checker call in this run,
            by the cache, and by sharing an identical in-flight check.
        checks_in_flight, covers_in_flight: Checker (queued in a lane included) and cover calls running.
        errors: claim, split, too-long-response and (with a Coverer) fact and cover errors, by
            exception class name.
        covering: the run has a cover stage; the cover counters are reported only then.
        answers_covering: answers between the scoring stages and the writer in the cover stage.
        answers_covered: answers the cover stage passed on (failed covers included).
        facts_judged: reference facts in the recall of covered answers (``facts_failed``: ``error``).
        started_at: ``time.monotonic()`` at start, seconds.
        lane_statistics: set by the run with HTTP adapters: lane key -> its
            :class:`~dahl.lanes._lane.LaneStatistics`.
        spend: set by the run: money spent so far per stage.
    """

    answers_read: int = 0
    answers_resumed: int = 0
    answers_done: int = 0
    answers_cached: int = 0
    status: Counter[str] = field(default_factory=Counter)
    input_errors: int = 0
    claims_done: int = 0
    claims_checked: int = 0
    claims_cached: int = 0
    claims_deduped: int = 0
    claims_failed: int = 0
    checks_in_flight: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    covering: bool = False
    answers_covering: int = 0
    answers_covered: int = 0
    covers_in_flight: int = 0
    facts_judged: int = 0
    facts_failed: int = 0
    started_at: float = field(default_factory=time.monotonic)
    lane_statistics: Callable[[], Mapping[str, Any]] | None = None
    spend: Spend | None = None

    def lane_totals(self) -> dict[str, int]:
        """``{"requests", "rate_limited", "retries", "tokens_used", "in_flight", "waiting"}`` summed over
        every lane (:class:`~dahl.lanes._lane.LaneStatistics`); zeros without lanes."""
        totals = {"requests": 0, "rate_limited": 0, "retries": 0, "tokens_used": 0, "in_flight": 0, "waiting": 0}
        if self.lane_statistics is not None:
            for stats in self.lane_statistics().values():
                for name in totals:
                    totals[name] += getattr(stats, name)
        return totals

    def requests_in_flight(self) -> tuple[int, int]:
        """``(in_flight, queued)``: requests a lane admitted and awaiting a reply, and calls queued
        before being sent; without lanes, the Checker calls running and 0."""
        if self.lane_statistics is None:
            return self.checks_in_flight, 0
        totals = self.lane_totals()
        return totals["in_flight"], totals["waiting"]

    def error_count(self) -> int:
        """Every error of the run so far: claim and split errors plus rejected input records."""
        return sum(self.errors.values()) + self.input_errors

    def elapsed_s(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started_at

    def snapshot(self) -> RunCounts:
        """The counters now (``elapsed_s`` and the lanes' statistics are read at the call)."""
        names = (*_COUNTS, *_COVER_COUNTS) if self.covering else _COUNTS
        return RunCounts(
            **{name: getattr(self, name) for name in names},
            status=dict(self.status),
            errors=dict(self.errors),
            elapsed_s=round(self.elapsed_s(), 3),
            lanes=dict(self.lane_statistics()) if self.lane_statistics is not None else {},
        )

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON view of :meth:`snapshot` for the bench (summary.json's ``run`` block without clock
        and cost)."""
        out: dict[str, object] = msgspec.to_builtins(self.snapshot())
        return out


@dataclass
class JobCounters:
    """What a job writing one line per item did so far (read by its progress line).

    Attributes:
        resumed: items already in the output (not made again).
        written: items written by this run.
        failed: items whose calls failed after the lane's retries (not written).
        spend: money of this run's calls (set by the job).
    """

    resumed: int = 0
    written: int = 0
    failed: int = 0
    spend: Spend | None = None

    @property
    def incomplete(self) -> bool:
        """Some item of the input is not in the output: one failed."""
        return self.failed > 0


C = TypeVar("C", bound=JobCounters)


@dataclass(frozen=True)
class JobReport(Generic[C]):
    """The outcome of a finished job: the file written (``out``) and the final ``counters``."""

    out: Path
    counters: C

    @property
    def exit_status(self) -> ExitStatus:
        """0 when every item is in ``out``; 6 when some are not (failed); 5 when none is."""
        c = self.counters
        if c.written + c.resumed == 0:
            return ExitStatus.NOTHING_SCORED
        return ExitStatus.PARTIAL if c.incomplete else ExitStatus.OK
