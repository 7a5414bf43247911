"""Money of a run: tokens and USD per stage from reported usage, and the ``--max-cost`` cap.

Before a call is sent its upper-bound price (:func:`dahl.pricing.upper_bound_usd`) is reserved
in the limiter's ledger; a call that cannot fit raises :class:`~dahl.errors.CostCapReached`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from dahl.lanes._limiter import Limiter
from dahl.lanes._limits import Reply
from dahl.errors import ConfigError
from dahl.pricing import Price, PriceTable, cost_usd, upper_bound_usd
from dahl.records import Usage

__all__ = ["MeteredLane", "Spend", "StageSpend", "UsageReply"]


class UsageReply(Reply, Protocol):
    """A reply that reports prompt and completion tokens (``ChatReply``)."""

    @property
    def usage(self) -> Usage | None:
        """Prompt and completion tokens the server reported, or ``None``."""
        ...


R = TypeVar("R", bound=UsageReply)


class InnerLane(Protocol):
    """What a :class:`MeteredLane` wraps: a :class:`dahl.lanes._lane.Lane`."""

    @property
    def limiter(self) -> Limiter:
        """The lane's limiter, which keeps the spend cap's state."""
        ...

    async def call(self, attempt: Callable[[], Awaitable[R]], *, estimated_tokens: int) -> R:
        """Run ``attempt`` under the lane's limits and retries."""
        ...


@dataclass
class StageSpend:
    """Tokens and money of one stage's calls in this run.

    Attributes:
        stage: ``"split"``, ``"check"``, ``"cover"``, ...
        model: the model the stage calls.
        price: its price, ``None`` when unknown.
        calls: calls that returned a reply.
        calls_without_usage: of ``calls``, replies that reported no usage.
        input_tokens: prompt tokens reported (cached ones included).
        output_tokens: completion tokens reported.
        cached_tokens: of ``input_tokens``, those read from the provider's prompt cache.
        cache_write_tokens: of ``input_tokens``, those written to it.
    """

    stage: str
    model: str
    price: Price | None
    calls: int = 0
    calls_without_usage: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def usd(self) -> float | None:
        """Money of the reported tokens at ``price``, USD; ``None`` when the price is unknown."""
        return cost_usd(Usage(prompt_tokens=self.input_tokens, completion_tokens=self.output_tokens,
                              cached_tokens=self.cached_tokens, cache_write_tokens=self.cache_write_tokens), self.price)

    def as_dict(self) -> dict[str, object]:
        """Plain JSON for summary.json's ``cost.lanes``."""
        return {"model": self.model, "calls": self.calls, "calls_without_usage": self.calls_without_usage,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_tokens": self.cached_tokens, "cache_write_tokens": self.cache_write_tokens, "usd": self.usd,
                "price": None if self.price is None else self.price.as_dict()}


class Spend:
    """The money of one run, per stage, and its optional cap.

    Args:
        table: prices (shipped table with the run's overrides).
        max_cost_usd: stop before the money spent could pass this, USD; ``None`` = no cap.
        batch: price calls at the batch price (``Price.batch_discount``).

    Raises:
        ConfigError: ``max_cost_usd`` is not a finite number >= 0.
    """

    def __init__(self, table: PriceTable, *, max_cost_usd: float | None = None, batch: bool = False) -> None:
        if max_cost_usd is not None and not (0 <= max_cost_usd < float("inf")):
            raise ConfigError(f"--max-cost must be a finite amount >= 0 (USD), got {max_cost_usd}")
        self.table = table
        self.max_cost_usd = max_cost_usd
        self.batch = batch
        self.stages: dict[str, StageSpend] = {}

    def lane(self, inner: InnerLane, stage: str, model: str, max_tokens: int) -> MeteredLane:
        """Wrap ``inner`` so that the ``stage`` calls through it are metered and capped.

        Args:
            inner: the endpoint's lane.
            stage: the name the money is reported under (a second model: ``"stage model"``).
            model: the model its calls ask for.
            max_tokens: completion cap of its requests, tokens.

        Raises:
            ConfigError: a cap is set and the model's price is unknown.
        """
        price = self.table.price_for(model, batch=self.batch)
        if price is None and self.max_cost_usd is not None:
            kind = "batch price" if self.batch else "price"
            raise ConfigError(
                f"--max-cost needs the {kind} of model {model!r}, which the price table (dated {self.table.date}) "
                f"does not list; give it with --price {model}=INPUT,OUTPUT (USD per million tokens) or "
                f"[prices.\"{model}\"] input = ..., output = ... in --config"
            )
        name = stage
        if name in self.stages and self.stages[name].model != model:
            name = f"{stage} {model}"
        meter = self.stages.setdefault(name, StageSpend(name, model, price))
        return MeteredLane(inner, self, meter, max_tokens)

    def spent_usd(self) -> float | None:
        """Money of the reported usage so far, USD; ``None`` when a stage that made calls has no price."""
        total = 0.0
        for meter in self.stages.values():
            usd = meter.usd
            if usd is None:
                if meter.calls:
                    return None
                continue
            total += usd
        return total

    def as_dict(self) -> dict[str, object]:
        """summary.json's ``run.cost`` block (this invocation): tokens and USD per stage, total, cap, table date."""
        return {
            "usd": self.spent_usd(),
            "max_cost_usd": self.max_cost_usd,
            "batch": self.batch,
            "price_table_date": self.table.date,
            "lanes": {name: meter.as_dict() for name, meter in self.stages.items()},
        }


class MeteredLane:
    """A stage's view of a lane: each call is priced, and refused when it could pass the cap.

    Args:
        inner: the lane the calls go through.
        spend: the run's :class:`Spend`.
        meter: the stage's counters in ``spend``.
        max_tokens: completion cap of the stage's requests, tokens.
    """

    def __init__(self, inner: InnerLane, spend: Spend, meter: StageSpend, max_tokens: int) -> None:
        self.inner = inner
        self.spend = spend
        self.meter = meter
        self.max_tokens = max_tokens

    @property
    def limiter(self) -> Limiter:
        """The wrapped lane's limiter (the metered calls share its limits and spend ledger)."""
        return self.inner.limiter

    async def call(self, attempt: Callable[[], Awaitable[R]], *, estimated_tokens: int) -> R:
        """Run ``attempt`` through the lane once its upper-bound price fits under the cap.

        Args:
            attempt: makes one request (see :meth:`dahl.lanes._lane.Lane.call`).
            estimated_tokens: prompt estimate + ``max_tokens``, tokens.

        Raises:
            CostCapReached: before sending, when the call could take the spend past the cap.
            Exception: whatever the lane raises (the reservation is released).
        """
        cap = self.spend.max_cost_usd
        if cap is None:  # nothing to hold back: no bound to price, no round trip to the ledger
            reply = await self.inner.call(attempt, estimated_tokens=estimated_tokens)
            self._count(reply.usage)
            return reply
        meter, limiter = self.meter, self.inner.limiter
        upper = 0.0 if meter.price is None else upper_bound_usd(estimated_tokens, self.max_tokens, meter.price)
        await limiter.reserve_spend(upper, cap)
        spent = 0.0
        try:
            reply = await self.inner.call(attempt, estimated_tokens=estimated_tokens)
            usage = reply.usage
            self._count(usage)
            # A reply without usage: the cap counts its upper bound as spent.
            spent = upper if usage is None else cost_usd(usage, meter.price) or 0.0
        finally:  # also when cancelled: the reservation never leaks
            await limiter.settle_spend(upper, spent)
        return reply

    def _count(self, usage: Usage | None) -> None:
        """Count one reply's tokens in the stage's meter."""
        meter = self.meter
        meter.calls += 1
        if usage is None:
            meter.calls_without_usage += 1
        else:
            meter.input_tokens += usage.prompt_tokens
            meter.output_tokens += usage.completion_tokens
            meter.cached_tokens += usage.cached_tokens
            meter.cache_write_tokens += usage.cache_write_tokens
