"""``summary.json`` as a typed value: :class:`Summary` and its run, cost, config and change blocks.

A summary built by a run carries :class:`SummaryStatistics` (never written), from which
:meth:`Summary.merge` recomputes the figures of two shards; a decoded one cannot be merged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec
import orjson
from msgspec import UNSET, UnsetType

from dahl.analysis._summary._recall import RecordedRecallSettings
from dahl.analysis._summary._builder import SummaryBuilder
from dahl.analysis._summary._blocks import Figures, ModelSummary
from dahl.errors import ConfigError
from dahl.lanes._lane import LaneStatistics
from dahl.lanes._spend import Spend
from dahl.results import _manifest as manifest
from dahl.results._counters import _COUNTS, _COVER_COUNTS, RunCounters, RunCounts

__all__ = [
    "Changes", "CostSummary", "InputFile", "PriceSummary", "QuestionSetSummary", "RunConfig",
    "RunSummary", "StageCost", "Summary", "SummaryStatistics", "TemplateUse"
]


_T = TypeVar("_T")


class PriceSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The price a stage's tokens were charged at (:class:`dahl.pricing.Price`): USD per million
    prompt and completion tokens (and prompt tokens read from / written to the prompt cache; None in
    summaries written before they were priced), ``batch`` prices or not, ``source`` (URL, ``config FILE``,
    ``--price``)."""

    model: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    batch: bool
    source: str
    cached_input_usd_per_mtok: float | None = None
    cache_write_usd_per_mtok: float | None = None


class StageCost(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens and money of one stage's calls (:class:`dahl.lanes._spend.StageSpend`).

    Attributes:
        calls: calls that returned a reply (``calls_without_usage`` of them reported no usage).
        input_tokens, output_tokens: tokens reported.
        cached_tokens, cache_write_tokens: of ``input_tokens``, those read from and written to the
            provider's prompt cache.
        usd, price: money of the reported tokens (USD) and the price; None when unknown.
    """

    model: str
    calls: int
    calls_without_usage: int
    input_tokens: int
    output_tokens: int
    usd: float | None
    price: PriceSummary | None
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def merge(self, other: StageCost) -> StageCost:
        """Calls, tokens and money added (None money stays None); model and price are this one's."""
        return msgspec.structs.replace(
            self, calls=self.calls + other.calls,
            calls_without_usage=self.calls_without_usage + other.calls_without_usage,
            input_tokens=self.input_tokens + other.input_tokens, output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens, usd=_plus(self.usd, other.usd))


class CostSummary(msgspec.Struct, frozen=True, kw_only=True):
    """``run.cost``: this invocation's spend (:meth:`dahl.lanes._spend.Spend.as_dict`).

    Attributes:
        usd, max_cost_usd: money spent (None: a stage with calls has no price) and the cap (None: none), USD.
        price_table_date: the shipped price table's date (``YYYY-MM-DD``).
        lanes: stage name -> its tokens and money.
    """

    usd: float | None
    max_cost_usd: float | None
    batch: bool
    price_table_date: str
    lanes: dict[str, StageCost]

    @classmethod
    def of(cls, spend: Spend) -> CostSummary:
        """The cost block of ``spend``."""
        lanes = {}
        for name, meter in spend.stages.items():
            price = None if meter.price is None else PriceSummary(
                model=meter.price.model, input_usd_per_mtok=meter.price.input_usd,
                output_usd_per_mtok=meter.price.output_usd, batch=meter.price.batch, source=meter.price.source,
                cached_input_usd_per_mtok=meter.price.cached_rate, cache_write_usd_per_mtok=meter.price.write_rate)
            lanes[name] = StageCost(model=meter.model, calls=meter.calls, calls_without_usage=meter.calls_without_usage,
                                    input_tokens=meter.input_tokens, output_tokens=meter.output_tokens, usd=meter.usd,
                                    price=price, cached_tokens=meter.cached_tokens,
                                    cache_write_tokens=meter.cache_write_tokens)
        return cls(usd=spend.spent_usd(), max_cost_usd=spend.max_cost_usd, batch=spend.batch,
                   price_table_date=spend.table.date, lanes=lanes)

    def merge(self, other: CostSummary) -> CostSummary:
        """Money, per-stage figures and caps added (unknown money stays None).

        Raises:
            ConfigError: the two were priced with different tables or batch pricing.
        """
        if (self.batch, self.price_table_date) != (other.batch, other.price_table_date):
            raise ConfigError("cannot merge runs priced differently (batch pricing or price table)")
        return msgspec.structs.replace(self, usd=_plus(self.usd, other.usd),
                                       max_cost_usd=_plus(self.max_cost_usd, other.max_cost_usd),
                                       lanes=_merged(self.lanes, other.lanes, StageCost.merge))


class RunSummary(RunCounts, frozen=True, kw_only=True):
    """``run``: what this invocation did (:meth:`dahl.results._counters.RunCounters.snapshot`), when
    (``started_at``, ``finished_at``: UTC, ISO 8601 to the second), what it cost, and the ``shard`` of
    its run it scored (absent: every answer)."""

    dahl_version: str
    started_at: str
    finished_at: str
    cost: CostSummary
    shard: manifest.Shard | UnsetType = UNSET

    @classmethod
    def of(cls, counters: RunCounters, *, dahl_version: str, started_at: str, finished_at: str,
           spend: Spend, shard: manifest.Shard | None = None) -> RunSummary:
        """The run block of ``counters`` (read now) and ``spend``."""
        return cls(**msgspec.structs.asdict(counters.snapshot()), dahl_version=dahl_version, started_at=started_at,
                   finished_at=finished_at, cost=CostSummary.of(spend), shard=UNSET if shard is None else shard)

    def merge(self, other: RunSummary) -> RunSummary:
        """Counts added (lanes' too, ``paused_until`` the later); the earlier start, the later finish,
        the longer ``elapsed_s``; no ``shard``.

        Raises:
            ConfigError: the runs are of different dahl versions, or priced differently.
        """
        if self.dahl_version != other.dahl_version:
            raise ConfigError(f"cannot merge runs of dahl {self.dahl_version} and {other.dahl_version}")
        sums = {name: getattr(self, name) + getattr(other, name) for name in _COUNTS}
        for name in _COVER_COUNTS:
            mine, theirs = getattr(self, name), getattr(other, name)
            sums[name] = mine if theirs is UNSET else theirs if mine is UNSET else mine + theirs
        return msgspec.structs.replace(
            self, **sums, status=_added(self.status, other.status), errors=_added(self.errors, other.errors),
            elapsed_s=max(self.elapsed_s, other.elapsed_s), lanes=_merged(self.lanes, other.lanes, _merged_lane),
            started_at=min(self.started_at, other.started_at), finished_at=max(self.finished_at, other.finished_at),
            cost=self.cost.merge(other.cost), shard=UNSET,
        )


class TemplateUse(msgspec.Struct, frozen=True, kw_only=True):
    """The prompt template of one prompted ``stage`` (``split``, ``check``, ``check-evidence``,
    ``cover``): its ``version`` and ``source`` (``shipped`` or ``file``)."""

    stage: str
    version: str
    source: str


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``config``: what changes a result besides the answers.

    Attributes:
        splitter, checker: the adapters' fingerprints.
        gamma, k: FActScore length-penalty γ (claims) and F1@K's K (supported claims).
        templates: the prompt template of each prompted stage, in pipeline order.
    """

    inputs: list[str]
    splitter: str
    checker: str
    gamma: float
    k: int
    seed: int
    templates: list[TemplateUse]


class InputFile(msgspec.Struct, frozen=True, kw_only=True):
    """One input of ``inputs`` (:func:`dahl.results._manifest.hash_inputs`): ``bytes`` (None: a stream or
    in-memory records) and hex blake2b-128 of its content (None: unreadable or a stream)."""

    path: str
    bytes: int | None
    blake2b: str | None


class QuestionSetSummary(msgspec.Struct, frozen=True, kw_only=True):
    """``question_set``: the number of distinct question ids and hex blake2b-128 of the sorted ids,
    NUL-separated (:class:`dahl.results._manifest.QuestionSet`)."""

    questions: int
    blake2b: str


class Changes(msgspec.Struct, frozen=True, kw_only=True):
    """``changes``: how this invocation relates to the output folder's earlier runs.

    Attributes:
        previous_run, config_changed: the folder held an earlier run's output; of another configuration.
        answers_reused, answers_scored, answers_dropped: answers kept, scored now, and stale lines dropped.
    """

    previous_run: bool
    config_changed: bool
    answers_reused: int
    answers_scored: int
    answers_dropped: int

    def merge(self, other: Changes) -> Changes:
        """Flags or-ed, counts added."""
        counts = ("answers_reused", "answers_scored", "answers_dropped")
        return Changes(previous_run=self.previous_run or other.previous_run,
                       config_changed=self.config_changed or other.config_changed,
                       **{name: getattr(self, name) + getattr(other, name) for name in counts})


class SummaryStatistics:
    """What a summary's figures are computed from: the answers' row counts (``builder``) and the
    ``questions``; equal when they give equal figures over the same questions."""

    __slots__ = ("builder", "questions")

    def __init__(self, builder: SummaryBuilder, questions: manifest.QuestionSet) -> None:
        self.builder = builder
        self.questions = questions

    def __repr__(self) -> str:
        return f"SummaryStatistics({self.builder!r}, questions={len(self.questions)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SummaryStatistics):
            return NotImplemented
        return self.questions == other.questions and self.builder.build() == other.builder.build()

    __hash__ = None  # type: ignore[assignment]  # mutable columns

    def merge(self, other: SummaryStatistics) -> SummaryStatistics:
        """This one's answers then ``other``'s (see :meth:`SummaryBuilder.merged`)."""
        return SummaryStatistics(self.builder.merged(other.builder), self.questions.union(other.questions))


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """The content of ``summary.json``.

    Attributes:
        models: model -> its figures and its categories'.
        recall_settings: how recall was computed; present only when the run tracks recall.
        input_errors: the first rejected input records, as text.
        cache: ``on``, ``off`` or ``disabled (why)``.
        statistics: what the figures are computed from (never encoded; UNSET when decoded).
    """

    models: dict[str, ModelSummary]
    recall_settings: RecordedRecallSettings | None | UnsetType = UNSET
    run: RunSummary
    config: RunConfig
    inputs: list[InputFile]
    question_set: QuestionSetSummary
    input_errors: list[str]
    cache: str
    changes: Changes
    statistics: SummaryStatistics | UnsetType = UNSET

    @property
    def figures(self) -> Figures:
        """``models`` and ``recall_settings``."""
        return Figures(models=self.models, recall_settings=self.recall_settings)

    @property
    def n_claims(self) -> int:
        """Claims of every answer in the summary, every label."""
        return sum(sum(m.labels.values()) for m in self.models.values())

    def as_builtins(self) -> dict[str, Any]:
        """The plain-JSON object of summary.json (``statistics`` left out)."""
        out: dict[str, Any] = msgspec.to_builtins(msgspec.structs.replace(self, statistics=UNSET))
        return out

    def encode(self) -> bytes:
        """The bytes of summary.json: UTF-8 JSON, keys sorted, two-space indent."""
        return orjson.dumps(self.as_builtins(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    @classmethod
    def decode(cls, data: bytes) -> Summary:
        """Decode summary.json's bytes (no ``statistics``); msgspec.ValidationError if not a summary."""
        return msgspec.json.decode(data, type=cls)

    def merge(self, other: Summary) -> Summary:
        """The summary of this run's answers and ``other``'s together (two shards of one run).

        Counts add; inputs and input errors are this one's then ``other``'s; ``cache`` is kept
        when equal, else both are named; every figure and ``question_set`` is recomputed from
        the joined statistics, as one run over both inputs gives.

        Raises:
            ConfigError: a summary without statistics, or runs of other configurations, bootstrap or
                recall settings, dahl versions or pricing.
        """
        if isinstance(self.statistics, UnsetType) or isinstance(other.statistics, UnsetType):
            raise ConfigError("a summary read from summary.json has no per-answer statistics and cannot be merged")
        mine = msgspec.structs.replace(self.config, inputs=[])
        if mine != msgspec.structs.replace(other.config, inputs=[]):
            raise ConfigError("cannot merge runs of different configurations (splitter, checker, gamma, k, seed, "
                              "templates)")
        statistics = self.statistics.merge(other.statistics)
        figures = statistics.builder.build()
        questions = statistics.questions.as_dict()
        return Summary(
            models=figures.models, recall_settings=figures.recall_settings, run=self.run.merge(other.run),
            config=msgspec.structs.replace(self.config, inputs=self.config.inputs + other.config.inputs),
            inputs=self.inputs + other.inputs,
            question_set=QuestionSetSummary(questions=questions["questions"], blake2b=questions["blake2b"]),
            input_errors=self.input_errors + other.input_errors,
            cache=self.cache if self.cache == other.cache else f"{self.cache}; {other.cache}",
            changes=self.changes.merge(other.changes), statistics=statistics,
        )


def _plus(first: float | None, second: float | None) -> float | None:
    """``first + second``; None when either is None (unknown)."""
    return None if first is None or second is None else first + second


def _added(first: Mapping[str, int], second: Mapping[str, int]) -> dict[str, int]:
    """Counts of both, key by key (keys of ``first`` first)."""
    out = Counter(first)
    out.update(second)
    return dict(out)


def _merged(first: Mapping[str, _T], second: Mapping[str, _T], merge: Callable[[_T, _T], _T]) -> dict[str, _T]:
    """Both mappings; a key in both holds ``merge(first[key], second[key])``."""
    out = dict(first)
    for key, value in second.items():
        out[key] = merge(out[key], value) if key in out else value
    return out


def _merged_lane(first: LaneStatistics, second: LaneStatistics) -> LaneStatistics:
    """One lane's statistics of two shards: counts added, the later pause, this one's limits."""
    counts = {name: getattr(first, name) + getattr(second, name) for name in _LANE_COUNTS}
    pauses = [p for p in (first.paused_until, second.paused_until) if p is not None]
    return msgspec.structs.replace(first, **counts, paused_until=max(pauses) if pauses else None)


_LANE_COUNTS = ("in_flight", "waiting", "requests", "successes", "retries", "rate_limited", "transient_errors",
                "fatal_errors", "tokens_reserved", "tokens_used")
