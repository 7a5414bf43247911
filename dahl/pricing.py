"""Prices of judge models and the money a call costs.

The shipped table is ``dahl/prices.toml`` (USD per million tokens, batch discount, source, date);
``[prices."MODEL"]`` in ``--config`` and ``--price`` override it. An unknown price is ``None``, never 0.
One call costs ``(uncached x input + cached x cached_input + written x cache_write + completion_tokens
x output) / 1,000,000`` USD, where ``cached`` and ``written`` are the prompt tokens read from and written
to the provider's prompt cache and ``uncached`` the rest of ``prompt_tokens``.
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from dahl.errors import ConfigError
from dahl.records import Usage

__all__ = [
    "Price",
    "PriceTable",
    "cost_usd",
    "load_price_overrides",
    "parse_price_option",
    "price_for",
    "upper_bound_usd",
]

#: Tokens per price unit: prices are USD per million tokens.
PER_TOKENS = 1_000_000
# A dated snapshot or alias of a listed model: gpt-4o-mini-2024-07-18, claude-3-5-haiku-20241022, -latest.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """What one model costs.

    Attributes:
        model: the model name the price is for.
        input_usd: USD per million prompt (input) tokens.
        output_usd: USD per million completion (output) tokens.
        cached_input_usd: USD per million prompt tokens read from the prompt cache; ``None``: the
            input price (no cache discount known).
        cache_write_usd: USD per million prompt tokens written to the prompt cache; ``None``: the
            input price (no write surcharge).
        batch_discount: factor of every price on a provider batch API (0.5 = half price);
            ``None`` when the provider has no batch API.
        source: where the price comes from (a price page URL, ``config FILE`` or ``--price``).
        batch: True when ``input_usd``/``output_usd`` already are the batch prices.
    """

    model: str
    input_usd: float
    output_usd: float
    batch_discount: float | None = None
    source: str = ""
    batch: bool = False
    cached_input_usd: float | None = None
    cache_write_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("input_usd", "output_usd", "cached_input_usd", "cache_write_usd"):
            value = getattr(self, name)
            if value is None and name.startswith("cache"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"price of {self.model!r}: {name} must be a finite number >= 0, got {value!r}")
        d = self.batch_discount
        if d is not None and (isinstance(d, bool) or not isinstance(d, (int, float)) or not 0 < d <= 1):
            raise ConfigError(f"price of {self.model!r}: batch_discount must be in (0, 1], got {d!r}")

    @property
    def cached_rate(self) -> float:
        """USD per million prompt tokens read from the cache (the input price when none is listed)."""
        return self.input_usd if self.cached_input_usd is None else self.cached_input_usd

    @property
    def write_rate(self) -> float:
        """USD per million prompt tokens written to the cache (the input price when none is listed)."""
        return self.input_usd if self.cache_write_usd is None else self.cache_write_usd

    def as_dict(self) -> dict[str, object]:
        """Plain JSON: ``{"model", "input_usd_per_mtok", "output_usd_per_mtok", "cached_input_usd_per_mtok",
        "cache_write_usd_per_mtok", "batch", "source"}`` (the cache prices as charged)."""
        return {"model": self.model, "input_usd_per_mtok": self.input_usd, "output_usd_per_mtok": self.output_usd,
                "cached_input_usd_per_mtok": self.cached_rate, "cache_write_usd_per_mtok": self.write_rate,
                "batch": self.batch, "source": self.source}


class PriceTable:
    """Prices by model name, with the date of the table they came from.

    Args:
        prices: ``{model: Price}``.
        date: the day the prices were read from the providers' pages (``YYYY-MM-DD``).
    """

    def __init__(self, prices: Mapping[str, Price], date: str) -> None:
        self._prices = dict(prices)
        self.date = date

    @classmethod
    def shipped(cls) -> PriceTable:
        """The table shipped in ``dahl/prices.toml`` (read once; blocking file I/O the first time)."""
        return _shipped()

    def with_overrides(self, overrides: Mapping[str, Price]) -> PriceTable:
        """This table with ``overrides`` replacing (or adding) the prices of their models."""
        return PriceTable({**self._prices, **overrides}, self.date)

    def price_for(self, model: str, *, batch: bool = False) -> Price | None:
        """The price of ``model`` (by exact name, else without a date or ``-latest`` suffix).

        Args:
            model: model name as sent in requests, e.g. ``"gpt-4o-mini-2024-07-18"``.
            batch: the batch price: every price times ``batch_discount``.

        Returns:
            The price, or ``None`` when unknown (or a batch price without a batch discount).
        """
        price = self._prices.get(model)
        if price is None:
            price = self._prices.get(_SNAPSHOT.sub("", model))
        if price is None or not batch:
            return price
        if price.batch_discount is None:
            return None
        d = price.batch_discount
        cached, write = price.cached_input_usd, price.cache_write_usd  # None: the input price, discounted too
        return msgspec.structs.replace(price, input_usd=price.input_usd * d, output_usd=price.output_usd * d,
                                       cached_input_usd=None if cached is None else cached * d,
                                       cache_write_usd=None if write is None else write * d, batch=True)


def price_for(model: str, *, batch: bool = False, table: PriceTable | None = None) -> Price | None:
    """The price of ``model`` in ``table`` (default: the shipped table); see :meth:`PriceTable.price_for`."""
    return (table if table is not None else PriceTable.shipped()).price_for(model, batch=batch)


def cost_usd(usage: Usage | None, price: Price | None) -> float | None:
    """USD of ``usage`` at ``price`` (the module's formula; cache reads and writes are parts of the
    prompt, each counted at most once).

    Returns:
        The cost, or ``None`` when the price or the usage is unknown.
    """
    if usage is None or price is None:
        return None
    prompt = usage.prompt_tokens
    cached = min(usage.cached_tokens, prompt)
    written = min(usage.cache_write_tokens, prompt - cached)
    return ((prompt - cached - written) * price.input_usd + cached * price.cached_rate + written * price.write_rate
            + usage.completion_tokens * price.output_usd) / PER_TOKENS


def upper_bound_usd(estimated_tokens: int, max_tokens: int, price: Price) -> float:
    """The most one request may cost, USD: prompt estimate at the input price (or the cache write
    price when higher), ``max_tokens`` at the output.

    Args:
        estimated_tokens: the lane's reservation, prompt estimate + ``max_tokens``, tokens.
        max_tokens: the request's completion cap, tokens (at most ``estimated_tokens`` counts).
    """
    completion = min(max(max_tokens, 0), estimated_tokens)
    prompt_rate = max(price.input_usd, price.write_rate)
    return ((estimated_tokens - completion) * prompt_rate + completion * price.output_usd) / PER_TOKENS


def parse_price_option(text: str) -> Price:
    """Parse ``--price MODEL=IN,OUT[,BATCH_DISCOUNT]`` (USD per million tokens).

    Raises:
        ConfigError: not of that form, or a price that is not a number >= 0.
    """
    model, sep, rest = text.partition("=")
    parts = rest.split(",")
    if not sep or not model.strip() or len(parts) not in (2, 3):
        raise ConfigError(f"--price must be MODEL=INPUT,OUTPUT[,BATCH_DISCOUNT] in USD per million tokens, "
                          f"e.g. gpt-4o-mini=0.15,0.60; got {text!r}")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise ConfigError(f"--price {text!r}: prices must be numbers (USD per million tokens)") from None
    return Price(model=model.strip(), input_usd=numbers[0], output_usd=numbers[1],
                 batch_discount=numbers[2] if len(numbers) == 3 else None, source="--price")


def load_price_overrides(path: str | Path) -> dict[str, Price]:
    """Read the ``[prices."MODEL"]`` tables of a ``--config`` TOML file.

    Returns:
        ``{model: Price}``; empty when the file has no ``prices`` table.

    Raises:
        ConfigError: unreadable file, bad TOML, a table without ``input``/``output``, an
            unknown key, or a bad number (file and model named).
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    tables = data.get("prices", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: prices must be tables, e.g. [prices.\"gpt-4o-mini\"] input = 0.15, output = 0.6")
    return {model: _price(model, table, f"config {path}", f"{path}: [prices.{model!r}]")
            for model, table in tables.items()}


def _price(model: str, table: Any, source: str, where: str) -> Price:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table with input and output (USD per million tokens)")
    unknown = set(table) - {"input", "output", "cached_input", "cache_write", "batch_discount", "source"}
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r} "
                          "(known: batch_discount, cache_write, cached_input, input, output, source)")
    for key in ("input", "output"):
        if key not in table:
            raise ConfigError(f"{where} needs {key!r} (USD per million tokens)")
    try:
        return Price(model=model, input_usd=table["input"], output_usd=table["output"],
                     cached_input_usd=table.get("cached_input"), cache_write_usd=table.get("cache_write"),
                     batch_discount=table.get("batch_discount"), source=str(table.get("source", source)))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


@functools.cache
def _shipped() -> PriceTable:
    text = resources.files("dahl").joinpath("prices.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    prices = {model: _price(model, table, "", f"dahl/prices.toml: [models.{model!r}]")
              for model, table in data["models"].items()}
    return PriceTable(prices, str(data["date"]))
