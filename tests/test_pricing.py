"""Prices: the shipped table, overrides from TOML and --price, money of a usage, unknown is None."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from dahl.config import load_config
from dahl.errors import ConfigError
from dahl.pricing import (
    Price,
    PriceTable,
    cost_usd,
    load_price_overrides,
    parse_price_option,
    price_for,
    upper_bound_usd,
)
from dahl.records import Usage


class TestShippedTable:
    def test_every_price_has_a_source_and_the_table_a_date(self) -> None:
        """Each listed model names the page its price comes from; the table is dated."""
        data = tomllib.loads(resources.files("dahl").joinpath("prices.toml").read_text())
        assert data["date"] == "2025-05-01"
        assert {"gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "claude-3-5-haiku", "claude-sonnet-4", "sonar"} <= set(
            data["models"])
        assert [m for m, t in data["models"].items() if not t["source"].startswith("https://")] == []

    def test_gpt_4o_mini_price(self) -> None:
        """gpt-4o-mini: $0.15 in, $0.60 out per million tokens, half on a batch API."""
        price = price_for("gpt-4o-mini")
        assert price is not None and (price.input_usd, price.output_usd, price.batch_discount) == (0.15, 0.60, 0.5)

    @pytest.mark.parametrize("name", ["gpt-4o-mini-2024-07-18", "claude-3-5-haiku-20241022", "claude-3-5-haiku-latest"],
                             ids=["openai-snapshot", "anthropic-snapshot", "latest-alias"])
    def test_dated_snapshots_take_their_model_price(self, name: str) -> None:
        """A dated snapshot or -latest alias is priced as its model."""
        base = name.rsplit("-", 1)[0] if name.endswith(("latest", "20241022")) else "gpt-4o-mini"
        assert price_for(name) is not None and price_for(name) == price_for(base)

    @pytest.mark.parametrize("name", ["mock", "gpt-4o-audio-preview", "my-finetune"], ids=["mock", "variant", "custom"])
    def test_unknown_model_is_none_never_zero(self, name: str) -> None:
        """A model the table does not list has no price (None), not a price of 0."""
        assert price_for(name) is None

    def test_batch_price_is_half(self) -> None:
        """gpt-4o at the batch price: $1.25 / $5.00, marked batch."""
        price = price_for("gpt-4o", batch=True)
        assert price is not None and (price.input_usd, price.output_usd, price.batch) == (1.25, 5.0, True)

    def test_no_batch_api_means_no_batch_price(self) -> None:
        """sonar has no batch API: its batch price is unknown."""
        assert price_for("sonar") is not None and price_for("sonar", batch=True) is None


class TestMoney:
    def test_cost_of_usage_by_hand(self) -> None:
        """1,000 prompt + 200 completion tokens of gpt-4o-mini: (1000 x 0.15 + 200 x 0.60) / 1e6 = $0.00027."""
        assert cost_usd(Usage(prompt_tokens=1000, completion_tokens=200), price_for("gpt-4o-mini")) == \
            pytest.approx(0.00027, abs=1e-15)

    def test_cached_prompt_tokens_by_hand(self) -> None:
        """Prompt-cache reads and writes at the table's cache prices, by hand:
        gpt-4o-mini, 10,000 prompt (4,000 read) + 500 completion: (6000 x 0.15 + 4000 x 0.075 + 500 x 0.60) / 1e6
        = $0.0015; claude-3-5-haiku, 10,000 prompt (6,000 read, 2,000 written) + 1,000 completion:
        (2000 x 0.80 + 6000 x 0.08 + 2000 x 1.00 + 1000 x 4.00) / 1e6 = $0.00808, half that in a batch."""
        openai = Usage(prompt_tokens=10_000, completion_tokens=500, cached_tokens=4_000)
        assert cost_usd(openai, price_for("gpt-4o-mini")) == pytest.approx(0.0015, abs=1e-15)
        claude = Usage(prompt_tokens=10_000, completion_tokens=1_000, cached_tokens=6_000, cache_write_tokens=2_000)
        assert cost_usd(claude, price_for("claude-3-5-haiku")) == pytest.approx(0.00808, abs=1e-15)
        assert cost_usd(claude, price_for("claude-3-5-haiku", batch=True)) == pytest.approx(0.00404, abs=1e-15)
        # No cache prices listed (sonar): every prompt token at the input price.
        assert cost_usd(openai, price_for("sonar")) == pytest.approx((10_000 * 1.0 + 500 * 1.0) / 1e6, abs=1e-15)

    def test_shipped_cache_prices_follow_the_providers_ratios(self) -> None:
        """Anthropic: cache reads 0.1 x input, writes 1.25 x; OpenAI: cached input 50 % (gpt-4o) or 25 % (gpt-4.1), no write price."""
        for model in ("claude-3-5-haiku", "claude-3-5-sonnet", "claude-3-7-sonnet", "claude-sonnet-4"):
            price = price_for(model)
            assert price is not None and price.cached_input_usd is not None and price.cache_write_usd is not None
            assert (price.cached_input_usd, price.cache_write_usd) == pytest.approx(
                (0.1 * price.input_usd, 1.25 * price.input_usd))
        for model, share in (("gpt-4o-mini", 0.5), ("gpt-4o", 0.5), ("gpt-4.1", 0.25), ("gpt-4.1-mini", 0.25),
                             ("gpt-4.1-nano", 0.25)):
            price = price_for(model)
            assert price is not None and price.cache_write_usd is None
            assert price.cached_input_usd == pytest.approx(share * price.input_usd)

    def test_unknown_price_or_usage_costs_none(self) -> None:
        """No price, or no usage reported: the money is unknown."""
        assert cost_usd(Usage(prompt_tokens=5), None) is None
        assert cost_usd(None, price_for("gpt-4o")) is None

    def test_upper_bound_prices_max_tokens_at_the_output_price(self) -> None:
        """Reservation 1,128 with max_tokens 128: 1,000 x $0.15 + 128 x $0.60 per M = $0.0002268."""
        price = price_for("gpt-4o-mini")
        assert price is not None
        assert upper_bound_usd(1128, 128, price) == pytest.approx(0.0002268, abs=1e-15)
        assert upper_bound_usd(100, 128, price) == pytest.approx(100 * 0.60 / 1e6)  # all of it completion at most


class TestOverrides:
    def test_price_option(self) -> None:
        """--price mock=1,2.5 prices mock at $1 / $2.50 per M tokens, no batch price."""
        assert parse_price_option("mock=1,2.5") == Price(model="mock", input_usd=1.0, output_usd=2.5, source="--price")
        assert parse_price_option("m=1,2,0.5").batch_discount == 0.5

    @pytest.mark.parametrize("text", ["mock", "mock=1", "=1,2", "mock=a,b", "mock=-1,2", "mock=1,2,3"],
                             ids=["no-equals", "one-price", "no-model", "words", "negative", "discount-over-1"])
    def test_bad_price_options(self, text: str) -> None:
        """A --price that is not MODEL=IN,OUT[,DISCOUNT] of numbers >= 0 is a ConfigError."""
        with pytest.raises(ConfigError):
            parse_price_option(text)

    def test_toml_prices_override_the_table(self, tmp_path: Path) -> None:
        """[prices."gpt-4o-mini"] in --config replaces the shipped price; [check] still loads."""
        path = tmp_path / "c.toml"
        path.write_text('[check]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "gpt-4o-mini"\n\n'
                        '[prices."gpt-4o-mini"]\ninput = 0.2\noutput = 0.8\nbatch_discount = 0.5\n')
        overrides = load_price_overrides(path)
        table = PriceTable.shipped().with_overrides(overrides)
        price = table.price_for("gpt-4o-mini")
        assert price is not None and (price.input_usd, price.output_usd, price.source) == (0.2, 0.8, f"config {path}")
        assert table.price_for("gpt-4o-mini", batch=True) == Price(
            model="gpt-4o-mini", input_usd=0.1, output_usd=0.4, batch_discount=0.5, source=f"config {path}",
            batch=True)
        assert set(load_config(path)) == {"check"}

    def test_toml_cache_prices(self, tmp_path: Path) -> None:
        """cached_input and cache_write in a [prices] table are read (USD per million tokens); a negative one is refused."""
        path = tmp_path / "c.toml"
        path.write_text('[prices."m"]\ninput = 1\noutput = 2\ncached_input = 0.1\ncache_write = 1.25\n')
        price = load_price_overrides(path)["m"]
        assert (price.cached_input_usd, price.cache_write_usd) == (0.1, 1.25)
        path.write_text('[prices."m"]\ninput = 1\noutput = 2\ncached_input = -1\n')
        with pytest.raises(ConfigError, match="cached_input_usd must be a finite number >= 0"):
            load_price_overrides(path)

    @pytest.mark.parametrize(("table", "message"), [
        ("input = 1", "needs 'output'"),
        ("input = 1\noutput = -2", "output_usd must be a finite number >= 0"),
        ("input = 1\noutput = 2\ncurrency = \"EUR\"", "unknown key 'currency'"),
    ], ids=["missing-output", "negative", "unknown-key"])
    def test_bad_toml_prices_name_file_and_model(self, tmp_path: Path, table: str, message: str) -> None:
        """A bad [prices] table is a ConfigError naming the file, the model and what is wrong."""
        path = tmp_path / "c.toml"
        path.write_text(f'[prices."m"]\n{table}\n')
        with pytest.raises(ConfigError, match=message) as info:
            load_price_overrides(path)
        assert str(path) in str(info.value) and "'m'" in str(info.value)


class TestBatchCost:
    def test_collected_tokens_at_half_the_online_price(self) -> None:
        """gpt-4o-mini: 1M prompt + 1M completion tokens online cost 0.15 + 0.60; in a batch half."""
        usage = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000)
        assert cost_usd(usage, price_for("gpt-4o-mini", batch=True)) == pytest.approx((0.15 + 0.60) * 0.5)

    def test_unknown_model_is_unknown(self) -> None:
        """A model without a batch price costs unknown (None), never 0."""
        assert cost_usd(Usage(prompt_tokens=10, completion_tokens=10), price_for("no-such-model", batch=True)) is None
