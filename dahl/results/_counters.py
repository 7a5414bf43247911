"""One set of run counters shared by the progress bar, the final report and the bench.

:class:`RunCounters` is updated live by the run's stages; :meth:`RunCounters.snapshot` reads
it into a :class:`RunCounts`, the counters part of summary.json's ``run`` block (the bench
and the summary both take it from there). The jobs that write one line per item
(``dahl generate``, ``dahl refs build``) keep :class:`JobCounters` and end with a
:class:`JobReport`.
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
    """The counters of a run read at one moment (see :class:`RunCounters` for each one's meaning).

    ``answers_covered``, ``facts_judged`` and ``facts_failed`` are set only for a run with a
    cover stage (UNSET, left out of the encoding, otherwise).

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


@dataclass
class RunCounters:
    """Mutable counters of one run, read by the progress display and the final summary.

    Updated from the event loop thread, except ``answers_resumed`` and ``input_errors``,
    which the reader thread alone counts as it reads (so the display sees them live).

    Attributes:
        answers_read: answers taken from the input (skipped ones included).
        answers_resumed: answers skipped because a previous run finished them.
        answers_done: answers written in this run.
        answers_cached: answers of ``answers_done`` whose whole result came from the
            cache (not split or checked again; their claims count in ``claims_cached``).
        status: answers written in this run, by status.
        input_errors: input records rejected (bad JSON, missing field, ...).
        claims_done: claims with a verdict (errors included).
        claims_checked: claims a Checker decided in this run (new calls).
        claims_cached: claims whose verdict came from the cache.
        claims_deduped: claims that shared an identical in-flight check.
        claims_failed: claims labelled ``error``.
        checks_in_flight: Checker calls running now, including those still queued in a
            lane for a slot or the rate limit (see :meth:`requests_in_flight` for requests).
        errors: claim and split errors by exception class name (``claims_failed`` plus
            answers whose split failed or whose response was too long; with a Coverer,
            also facts labelled ``error`` and failed ``cover`` calls).
        covering: the run has a cover stage (a Coverer); the cover counters below are
            shown and reported only then.
        answers_covering: answers finished by the scoring stages and not yet passed on
            to the writer by the cover stage (queued for it or being covered).
        answers_covered: answers the cover stage passed on (failed covers included).
        covers_in_flight: ``Coverer.cover`` calls running now.
        facts_judged: reference facts in the recall of covered answers.
        facts_failed: facts of ``facts_judged`` labelled ``error`` (never not covered).
        started_at: ``time.monotonic()`` at start, seconds.
        lane_statistics: set by the run when HTTP adapters are used: returns each
            lane's :class:`~dahl.lanes._lane.LaneStatistics` (requests, 429s,
            retries, tokens) keyed by lane key (never an API key).
        spend: set by the run: money spent so far per stage (:class:`~dahl.lanes._spend.Spend`).
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
        """Requests, 429s, retries, tokens, in flight and waiting summed over every lane.

        Returns:
            ``{"requests", "rate_limited", "retries", "tokens_used", "in_flight", "waiting"}``
            (see :class:`~dahl.lanes._lane.LaneStatistics`); zeros without lanes.
        """
        totals = {"requests": 0, "rate_limited": 0, "retries": 0, "tokens_used": 0, "in_flight": 0, "waiting": 0}
        if self.lane_statistics is not None:
            for stats in self.lane_statistics().values():
                for name in totals:
                    totals[name] += getattr(stats, name)
        return totals

    def requests_in_flight(self) -> tuple[int, int]:
        """Requests sent and awaiting a reply, and calls queued before being sent.

        With HTTP lanes these are the lanes' own figures: a request counts as in flight
        only once its lane admitted it (slot, pause gate and rate limits passed), so it
        never exceeds what the server sees. Without lanes (offline adapters) it is the
        Checker calls running, and nothing is queued.

        Returns:
            ``(in_flight, queued)``.
        """
        if self.lane_statistics is None:
            return self.checks_in_flight, 0
        totals = self.lane_totals()
        return totals["in_flight"], totals["waiting"]

    def error_count(self) -> int:
        """Every error of the run so far: claim and split errors plus rejected input records.

        The one total both the progress display and the summary show.
        """
        return sum(self.errors.values()) + self.input_errors

    def elapsed_s(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started_at

    def snapshot(self) -> RunCounts:
        """The counters now (``elapsed_s`` and the lanes' statistics are read at the call)."""
        cover: dict[str, int] = {}
        if self.covering:
            cover = {"answers_covered": self.answers_covered, "facts_judged": self.facts_judged,
                     "facts_failed": self.facts_failed}
        return RunCounts(
            answers_read=self.answers_read, answers_resumed=self.answers_resumed, answers_done=self.answers_done,
            answers_cached=self.answers_cached, status=dict(self.status), input_errors=self.input_errors,
            claims_done=self.claims_done, claims_checked=self.claims_checked, claims_cached=self.claims_cached,
            claims_deduped=self.claims_deduped, claims_failed=self.claims_failed, **cover, errors=dict(self.errors),
            elapsed_s=round(self.elapsed_s(), 3),
            lanes=dict(self.lane_statistics()) if self.lane_statistics is not None else {},
        )

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON view of :meth:`snapshot` for the bench (summary.json's ``run`` block without clock and cost).

        With a cover stage (``covering``), ``answers_covered``, ``facts_judged`` and
        ``facts_failed`` are added after ``claims_failed``; without one the keys are
        those of a run before recall.
        """
        out: dict[str, object] = msgspec.to_builtins(self.snapshot())
        return out


@dataclass
class JobCounters:
    """What a job writing one line per item did so far (read by its progress line).

    Attributes:
        resumed: items already in the output (not made again).
        written: items written by this run.
        failed: items whose calls failed after the lane's retries (not written; a re-run
            retries them).
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
    """The outcome of a finished job.

    Attributes:
        out: the file written.
        counters: the final counters.
    """

    out: Path
    counters: C

    @property
    def exit_status(self) -> ExitStatus:
        """0 when every item is in ``out``; 6 when some are not (failed); 5 when none is."""
        c = self.counters
        if c.written + c.resumed == 0:
            return ExitStatus.NOTHING_SCORED
        return ExitStatus.PARTIAL if c.incomplete else ExitStatus.OK
