"""The progress of ``dahl score``: a live line on a terminal, plain lines in a log.

A :class:`Meter` adds to the run's counters the input's record count, percent done and an ETA
(this run's scored answers over the last :data:`RATE_WINDOW_S` seconds).
"""

from __future__ import annotations

import csv
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
from rich.console import Console, ConsoleOptions, RenderResult
from rich.cells import cell_len
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from dahl.results._counters import RunCounters
from dahl.errors import DahlError
from dahl.formats import Records, detect_format
from dahl.formats._lines import is_stream, numbered_lines
from dahl.run._score import ScoreConfig, ScoreReport, score_async

__all__ = [
    "Meter", "ProgressLine", "ProgressMode", "Snapshot", "count", "count_records", "duration", "run_with_progress", "usd",
]

log = logging.getLogger(__name__)

#: Seconds of recent progress the ETA's rate is measured over.
RATE_WINDOW_S = 30.0
#: Seconds between two redraws of the live line.
TICK_S = 0.25
#: Narrowest bar worth drawing, cells.
MIN_BAR = 10

#: How progress is shown: a live line, plain log lines, or not at all.
ProgressMode = Literal["bar", "lines", "off"]


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with thousands separators and ``noun`` agreeing with it.

    >>> count(1, "answer"), count(12345, "claim"), count(2, "entry", "entries")
    ('1 answer', '12,345 claims', '2 entries')
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def duration(seconds: float) -> str:
    """A short duration: ``"45s"``, ``"3m10s"``, ``"2h05m"`` (``seconds`` rounded up)."""
    s = max(0, int(-(-seconds // 1)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600:,}h{s % 3600 // 60:02d}m"


def count_records(paths: Sequence[Path | Records], fmt: str, stop: threading.Event | None = None) -> int | None:
    """Records in the answer files, bad ones included, as the readers count them (blocking).

    Args:
        paths: the run's inputs (files, or in-memory records counted by their length).
        fmt: ``"auto"`` or a format name (see :data:`dahl.formats.FORMATS`).
        stop: when set, counting ends early.

    Returns:
        The record count, or ``None`` if ``stop`` was set first, an input is a stream, or an
        input's format is not one record per line (json, parquet, hf, safe).

    Raises:
        OSError: a file cannot be read.
        DahlError: a file's format cannot be detected.
        csv.Error: a csv file the reader cannot parse at all (e.g. a field over the size limit).
    """
    if any(isinstance(path, Path) and is_stream(path) for path in paths):
        return None
    total = 0
    for path in paths:
        if isinstance(path, Records):
            total += len(path)
            continue
        name = detect_format(path) if fmt == "auto" else fmt
        if name not in _LINE_FORMATS:
            return None
        with closing(numbered_lines(path)) as lines:
            if name == "csv":
                n = _count(csv.reader(raw.decode("utf-8", errors="replace") for _, raw in lines), stop)
                n = None if n is None else max(n - 1, 0)  # the header
            else:
                n = _count((line.strip() for _, line in lines), stop)
        if n is None:
            return None
        total += n
    return total


#: Formats whose records are lines (csv: rows), which the count can read.
_LINE_FORMATS = frozenset({"jsonl", "factscore", "veriscore", "csv"})

#: Records read between two looks at the stop flag.
_CHECK_EVERY = 8192


def _count(rows: Iterable[object], stop: threading.Event | None) -> int | None:
    """Non-empty ``rows``, or None once ``stop`` is set."""
    count = 0
    for n, row in enumerate(rows):
        if n % _CHECK_EVERY == 0 and stop is not None and stop.is_set():
            return None
        if row:
            count += 1
    return count


@dataclass(frozen=True)
class Snapshot:
    """What the progress display shows at one moment.

    Attributes:
        done: input records done: scored in this run, resumed or rejected.
        total: input records, ``None`` until counted.
        claims_per_s: claims with a verdict per second of this run.
        eta_s: seconds left at the recent rate, ``None`` when unknown.
        in_flight: requests awaiting a reply (offline: Checker calls running).
        queued: calls waiting in a lane before being sent.
        errors: errors so far (:meth:`RunCounters.error_count`).
        elapsed_s: seconds since the run started.
        http: with HTTP lanes, ``(requests per second, 429 replies, retries, tokens)``.
        cover: with a cover stage, ``(answers covering, facts judged)``.
        money: with metered HTTP stages, ``(USD spent or None, ((stage, USD or None), ...))``.
        cached_tokens: prompt tokens the metered stages read from the provider's prompt cache.
    """

    done: int
    total: int | None
    claims_per_s: float
    eta_s: float | None
    in_flight: int
    queued: int
    errors: int
    elapsed_s: float
    http: tuple[float, int, int, int] | None = None
    cover: tuple[int, int] | None = None
    money: tuple[float | None, tuple[tuple[str, float | None], ...]] | None = None
    cached_tokens: int = 0

    @property
    def fraction(self) -> float | None:
        """``done / total`` in [0, 1], ``None`` while the total is unknown."""
        if self.total is None:
            return None
        return 1.0 if self.total <= 0 else min(self.done / self.total, 1.0)

    def fields(self) -> list[tuple[int, str]]:
        """The display's fields in order, each with its priority (0 is kept longest)."""
        answers = f"{self.done:,}/{count(self.total, 'answer')}" if self.total is not None else count(self.done, "answer")
        out = []
        if self.fraction is not None:
            out.append((0, f"{int(100 * self.fraction)}%"))  # floor: 100% only when done
        out.append((0, answers))
        out.append((2, f"{self.claims_per_s:,.0f} claims/s"))
        if self.total is not None:
            out.append((1, "ETA " + ("—" if self.eta_s is None else duration(self.eta_s))))
        out.append((1, f"{self.in_flight:,} in flight"))
        if self.queued:
            out.append((4, f"{self.queued:,} queued"))
        if self.cover is not None:
            covering, judged = self.cover
            out.append((2, f"{covering:,} covering"))
            out.append((4, count(judged, "fact") + " judged"))
        out.append((1, count(self.errors, "error")))
        if self.http is not None:
            req_s, rate_limited, retries, tokens = self.http
            out.append((5, f"{req_s:,.1f} req/s"))
            out.append((3, f"{rate_limited:,} × 429"))
            out.append((6, count(retries, "retry", "retries")))
            out.append((6, count(tokens, "token")))
            if self.cached_tokens:
                out.append((6, f"{self.cached_tokens:,} cached"))
        if self.money is not None:
            total, stages = self.money
            out.append((2, usd(total)))
            if len(stages) > 1:
                out.append((7, " ".join(f"{name} {usd(value)}" for name, value in stages)))
        out.append((3, _clock(self.elapsed_s)))
        return out

    def plain(self) -> str:
        """The log line: ``progress: 45% · 12,345/27,000 answers · ... · 2 errors · 0:01:23``."""
        return "progress: " + " · ".join(text for _, text in self.fields())


def usd(amount: float | None) -> str:
    """Money as shown: ``$12.34``, ``$0.1234`` under $1, ``$0.001234`` under a cent, ``$0``, ``$?``."""
    if amount is None:
        return "$?"
    if amount == 0:
        return "$0"
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}" if amount >= 0.01 else f"${amount:.6f}"


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Meter:
    """Turns a run's counters into :class:`Snapshot` s; keeps the recent rate for the ETA.

    Args:
        counters: the run's counters.
        clock: time source, seconds, the clock of the counters' ``started_at``.
        window_s: seconds of history the ETA's rate is measured over.

    Attributes:
        total: input records (see :func:`count_records`), ``None`` until known.
    """

    def __init__(
        self, counters: RunCounters, *, clock: Callable[[], float] = time.monotonic, window_s: float = RATE_WINDOW_S
    ) -> None:
        self.counters = counters
        self.total: int | None = None
        self._clock = clock
        self._window_s = window_s
        self._history: deque[tuple[float, int]] = deque()  # (time, answers scored in this run)

    def snapshot(self) -> Snapshot:
        """The display's figures now; records the scored count for the rate."""
        c = self.counters
        now = self._clock()
        elapsed = max(now - c.started_at, 1e-9)
        history = self._history
        history.append((now, c.answers_done))
        while len(history) > 2 and history[1][0] <= now - self._window_s:
            history.popleft()
        then, done_then = history[0]
        # Until a window has passed, the rate is that of the whole run so far.
        rate = (c.answers_done - done_then) / (now - then) if now - then >= self._window_s / 2 else c.answers_done / elapsed
        done = c.answers_done + c.answers_resumed + c.input_errors
        eta = None
        if self.total is not None:
            left = max(self.total - done, 0)
            eta = 0.0 if left == 0 else (left / rate if rate > 0 else None)
        in_flight, queued = c.requests_in_flight()
        http = None
        if c.lane_statistics is not None:
            t = c.lane_totals()
            http = (t["requests"] / elapsed, t["rate_limited"], t["retries"], t["tokens_used"])
        return Snapshot(
            done=done,
            total=self.total,
            claims_per_s=c.claims_done / elapsed,
            eta_s=eta,
            in_flight=in_flight,
            queued=queued,
            errors=c.error_count(),
            elapsed_s=elapsed,
            http=http,
            cover=(c.answers_covering, c.facts_judged) if c.covering else None,
            money=_money(c),
            cached_tokens=sum(meter.cached_tokens for meter in c.spend.stages.values()) if c.spend else 0,
        )


def _money(c: RunCounters) -> tuple[float | None, tuple[tuple[str, float | None], ...]] | None:
    """The run's spend for the display, None when no stage calls a priced HTTP endpoint."""
    spend = c.spend
    if spend is None or not spend.stages:
        return None
    return spend.spent_usd(), tuple((name, meter.usd) for name, meter in spend.stages.items())


class ProgressLine:
    """One line of progress fitted to the console width: lowest-priority fields are dropped, never
    cut; the bar takes what is left (at least :data:`MIN_BAR` cells)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def render(self, width: int) -> Text:
        """The line for a console ``width`` cells wide."""
        fields = self.snapshot.fields()
        prefix = "scoring "
        kept = list(fields)
        while len(kept) > 1 and cell_len(prefix + " · ".join(t for _, t in kept)) > width:
            worst = max(range(len(kept)), key=lambda i: (kept[i][0], i))
            del kept[worst]
        body = " · ".join(t for _, t in kept)
        line = Text(prefix, style="bold")
        spare = width - cell_len(prefix + body) - 1
        fraction = self.snapshot.fraction
        if fraction is not None and spare >= MIN_BAR:
            bar = min(spare, 40)
            filled = round(bar * fraction)
            line.append("━" * filled, style="bar.complete")
            line.append("━" * (bar - filled), style="bar.back")
            line.append(" ")
        line.append(body)
        return line

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.render(options.max_width)


async def run_with_progress(
    config: ScoreConfig,
    counters: RunCounters,
    console: Console,
    *,
    mode: ProgressMode,
    every_s: float = 10.0,
) -> ScoreReport:
    """Run :func:`~dahl.run._score.score_async` while showing its progress on ``console``.

    ``mode``: ``"bar"`` a live line, ``"lines"`` a plain line every ``every_s`` seconds and at the
    end, ``"off"`` nothing. Raises what ``score_async`` raises, after a last progress line.
    """
    if mode == "off":
        return await score_async(config, counters=counters)
    meter = Meter(counters)

    async def count_total() -> None:
        stop = threading.Event()
        try:
            meter.total = await anyio.to_thread.run_sync(count_records, config.inputs, config.fmt, stop,
                                                         abandon_on_cancel=True)
        except (OSError, DahlError, csv.Error) as exc:  # the run itself reports unreadable input
            log.debug("could not count the input records: %s", exc)
        finally:
            stop.set()  # the run ended first: the thread gives up instead of holding the exit

    live = Live(console=console, auto_refresh=False, transient=False) if mode == "bar" else None

    def show() -> None:
        snapshot = meter.snapshot()
        if live is not None:
            live.update(ProgressLine(snapshot), refresh=True)
        else:
            console.print(snapshot.plain(), markup=False, highlight=False, soft_wrap=True)

    async def tick() -> None:
        last_line = meter.counters.started_at
        while True:
            await anyio.sleep(TICK_S)
            if live is not None:
                show()
            elif time.monotonic() - last_line >= every_s:
                last_line = time.monotonic()
                show()
            else:
                meter.snapshot()  # keeps the rate history between lines

    if live is not None:
        live.start()
    try:
        try:
            report = await _beside(lambda: score_async(config, counters=counters), count_total, tick)
        except Exception:
            show()
            raise
        show()
    finally:
        if live is not None:
            live.stop()
    return report


_T = TypeVar("_T")


async def _beside(
    work: Callable[[], Awaitable[_T]], *background: Callable[[], Coroutine[Any, Any, None]]
) -> _T:
    """Await ``work()`` while ``background`` tasks run (cancelled when it ends); what ``work``
    raises is raised itself, not wrapped in an exception group."""
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        for task in background:
            tg.start_soon(task)
        try:
            result = await work()
        except Exception as exc:
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


async def run_ticking(
    work: Callable[[], Awaitable[_T]],
    line: Callable[[float], str],
    console: Console,
    every_s: float | None,
    *,
    last: bool = False,
) -> _T:
    """Await ``work()`` while printing ``line(elapsed seconds)`` every ``every_s`` seconds.

    ``every_s`` None prints none; ``last`` also prints one once ``work`` is done. Raises what
    ``work`` raises, itself (not in an exception group).
    """
    start = anyio.current_time()

    def show() -> None:
        console.print(escape(line(anyio.current_time() - start)), highlight=False, soft_wrap=True)

    async def ticker() -> None:
        assert every_s is not None
        while True:
            await anyio.sleep(every_s)
            show()

    result = await _beside(work, *([ticker] if every_s is not None else []))
    if last and every_s is not None:
        show()
    return result
