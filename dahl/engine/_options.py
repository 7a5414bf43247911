"""The settings every job shares (the cache and the money of its calls), and the sizes and scoring
parameters of one scoring pipeline."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from dahl.errors import ConfigError
from dahl.lanes._spend import Spend
from dahl.pricing import Price, PriceTable

__all__ = ["CallSettings", "PipelineOptions"]


@dataclass(frozen=True, kw_only=True)
class CallSettings:
    """The cache and the money of a job's calls (keyword-only fields of the settings of ``dahl score``,
    ``dahl generate`` and ``dahl refs build``).

    Attributes:
        cache_dir: cache folder; None = :func:`dahl.cache.default_cache_dir`.
        use_cache: read and write the cache.
        prices: price overrides by model over the shipped table (:mod:`dahl.pricing`).
        max_cost_usd: stop before the job's calls could cost more than this, USD
            (``CostCapReached``); None = no cap. ConfigError if negative or not finite.
    """

    cache_dir: Path | None = None
    use_cache: bool = True
    prices: Mapping[str, Price] = dataclasses.field(default_factory=dict)
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        if self.max_cost_usd is not None and not (math.isfinite(self.max_cost_usd) and self.max_cost_usd >= 0):
            raise ConfigError(f"--max-cost must be a finite amount >= 0 (USD), got {self.max_cost_usd}")

    async def open_spend(self, *, share: float = 1.0) -> Spend:
        """The money meter of the job's calls: the shipped prices with ``prices`` over them, capped
        at ``share`` (in (0, 1]; 1/N for one of N shards) of ``max_cost_usd``."""
        table = await anyio.to_thread.run_sync(PriceTable.shipped)
        cap = None if self.max_cost_usd is None else self.max_cost_usd * share
        return Spend(table.with_overrides(self.prices), max_cost_usd=cap)


@dataclass(frozen=True)
class PipelineOptions:
    """Sizes and scoring parameters of one pipeline run.

    Attributes:
        split_concurrency, check_concurrency, lookup_concurrency: answers being split, claims
            being checked, answers whose claims are looked up in the cache, at once.
        cover_concurrency: answers being covered at once with a Coverer; None = ``check_concurrency``.
        queue_size: items buffered between two stages.
        read_batch: answers the reader thread takes per hop.
        flush_items: results per write batch.
        flush_interval_s: longest a finished result waits before being written, seconds.
        preprocess: clean the response (DAHL step 0) before splitting (off for pre-split input);
            noncommittal answers are abstained either way.
        gamma: FActScore length-penalty γ (0 disables).
        k: K of F1@K.
        max_response_chars: longer responses are not split (status ``error``), characters.
    """

    split_concurrency: int = 2
    check_concurrency: int = 8
    lookup_concurrency: int = 128
    cover_concurrency: int | None = None
    queue_size: int = 256
    read_batch: int = 256
    flush_items: int = 500
    flush_interval_s: float = 0.25
    preprocess: bool = True
    gamma: float = 10.0
    k: int = 64
    max_response_chars: int = 50_000

    def __post_init__(self) -> None:
        for name in ("split_concurrency", "check_concurrency", "lookup_concurrency", "queue_size", "read_batch",
                     "flush_items"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.cover_concurrency is not None and self.cover_concurrency < 1:
            raise ValueError("cover_concurrency must be >= 1")
        if self.flush_interval_s <= 0:
            raise ValueError("flush_interval_s must be > 0 seconds")

    @property
    def cover_workers(self) -> int:
        """Cover workers of a run with a Coverer: ``cover_concurrency``, else ``check_concurrency``."""
        return self.check_concurrency if self.cover_concurrency is None else self.cover_concurrency
