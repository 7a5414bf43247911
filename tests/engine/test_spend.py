"""Spend and MeteredLane: money per stage from reported usage, and the --max-cost cap (virtual time)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from dahl.lanes._clock import run_in_virtual_time
from dahl.lanes._lane import Lane, LaneLimits
from dahl.lanes._spend import Spend
from dahl.errors import ConfigError, CostCapReached, PermanentAPIError
from dahl.pricing import Price, PriceTable
from dahl.records import Usage

#: $1 per million prompt tokens, $10 per million completion tokens: 1 token in = $1e-6, out = $1e-5.
PRICES = PriceTable({"m": Price(model="m", input_usd=1.0, output_usd=10.0)}, "2025-05-01")


@dataclass(frozen=True)
class Reply:
    """A chat reply as the lane sees it: usage and headers."""

    usage: Usage | None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def usage_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.prompt_tokens + self.usage.completion_tokens


def real_lane() -> Lane:
    return Lane("http://x|k|m", LaneLimits(), rng=random.Random(1))


def replying(prompt: int, completion: int, delay_s: float = 1.0, sent: list[float] | None = None):  # type: ignore[no-untyped-def]
    async def attempt() -> Reply:
        if sent is not None:
            sent.append(asyncio.get_running_loop().time())
        await asyncio.sleep(delay_s)
        return Reply(Usage(prompt_tokens=prompt, completion_tokens=completion))
    return attempt


class TestMoney:
    def test_money_per_stage_is_tokens_times_prices(self) -> None:
        """split 2 calls of 1,000 + 100 tokens, check 1 of 200 + 10: $0.004 and $0.0003; total $0.0043."""
        spend = Spend(PRICES)

        async def main() -> None:
            split = spend.lane(real_lane(), "split", "m", 1024)
            check = spend.lane(real_lane(), "check", "m", 128)
            for _ in range(2):
                await split.call(replying(1000, 100), estimated_tokens=1100)
            await check.call(replying(200, 10), estimated_tokens=300)

        run_in_virtual_time(main)
        assert spend.stages["split"].usd == pytest.approx(2 * (1000e-6 + 100e-5))
        assert spend.stages["check"].usd == pytest.approx(200e-6 + 10e-5)
        assert spend.spent_usd() == pytest.approx(0.0043)
        block = spend.as_dict()
        assert block["lanes"]["split"]["input_tokens"] == 2000  # type: ignore[index]
        assert block["lanes"]["split"]["output_tokens"] == 200  # type: ignore[index]
        assert (block["price_table_date"], block["max_cost_usd"]) == ("2025-05-01", None)

    def test_unknown_price_is_null_never_zero(self) -> None:
        """A model without a price: its stage's money and the total are None once it made calls."""
        spend = Spend(PRICES)

        async def main() -> None:
            await spend.lane(real_lane(), "check", "other", 128).call(replying(10, 1), estimated_tokens=138)

        assert spend.spent_usd() == 0.0  # no call yet: nothing spent
        run_in_virtual_time(main)
        assert (spend.stages["check"].usd, spend.spent_usd(), spend.stages["check"].input_tokens) == (None, None, 10)

    def test_second_model_in_a_stage_is_reported_apart(self) -> None:
        """Two models on one stage are two entries: "check" and "check other"."""
        spend = Spend(PRICES)
        spend.lane(real_lane(), "check", "m", 128)
        spend.lane(real_lane(), "check", "other", 128)
        assert list(spend.stages) == ["check", "check other"]


class TestCap:
    def test_unknown_price_with_a_cap_is_refused_up_front(self) -> None:
        """--max-cost with a model the table lacks: ConfigError naming it and how to price it."""
        with pytest.raises(ConfigError, match=r"model 'other'.*--price other=INPUT,OUTPUT"):
            Spend(PRICES, max_cost_usd=1.0).lane(real_lane(), "check", "other", 128)

    def test_stops_within_one_request_of_the_cap_and_never_passes_it(self) -> None:
        """8 concurrent callers, calls of $0.0012 (bound $0.0015): 8 sent (cap $0.01 fits 8 x 0.0012 = $0.0096),
        then a stop with $0.0096 spent, less than one bound below the cap."""
        spend = Spend(PRICES, max_cost_usd=0.01)
        sent: list[float] = []
        outcomes: list[str] = []

        async def worker(lane: object) -> None:
            # bound: 500 prompt x 1e-6 + 100 max_tokens x 1e-5 = $0.0015; used: 200 + 100 x 1e-5 = $0.0012
            while True:
                try:
                    await lane.call(replying(200, 100, sent=sent), estimated_tokens=600)  # type: ignore[attr-defined]
                except CostCapReached as exc:
                    outcomes.append(f"{exc.spent_usd:.4f}+{exc.next_usd:.4f}>{exc.cap_usd}")
                    return

        async def main() -> None:
            lane = spend.lane(real_lane(), "check", "m", 100)
            async with asyncio.TaskGroup() as tg:
                for _ in range(8):
                    tg.create_task(worker(lane))

        run_in_virtual_time(main)
        assert len(sent) == 8
        assert spend.spent_usd() == pytest.approx(0.0096)
        assert set(outcomes) == {"0.0096+0.0015>0.01"}
        # Six reservations fit at once (6 x 0.0015 = 0.009); two more went once earlier calls settled (1 s).
        assert sum(t < 1.0 for t in sent) == 6

    def test_failed_call_frees_its_reservation(self) -> None:
        """A call that fails costs nothing and leaves no reservation behind."""
        spend = Spend(PRICES, max_cost_usd=0.002)

        async def failing() -> Reply:
            raise PermanentAPIError("bad request", status=400)

        async def main() -> None:
            lane = spend.lane(Lane("http://x|k|m", LaneLimits(), rng=random.Random(1)), "check", "m", 100)
            for _ in range(2):
                with pytest.raises(PermanentAPIError):
                    await lane.call(failing, estimated_tokens=600)
            await lane.call(replying(200, 100), estimated_tokens=600)  # $0.0015 bound still fits

        run_in_virtual_time(main)
        assert spend.spent_usd() == pytest.approx(0.0012)

    def test_cancelled_call_frees_its_reservation(self) -> None:
        """A call cancelled in flight releases its bound: a later call of the full cap still fits."""
        spend = Spend(PRICES, max_cost_usd=0.0015)

        async def main() -> None:
            lane = spend.lane(real_lane(), "check", "m", 100)
            task = asyncio.ensure_future(lane.call(replying(200, 100, delay_s=10.0), estimated_tokens=600))
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await lane.call(replying(200, 100), estimated_tokens=600)

        run_in_virtual_time(main)
        assert spend.spent_usd() == pytest.approx(0.0012)

    def test_reply_without_usage_counts_its_bound_against_the_cap(self) -> None:
        """A reply that reports no usage is charged its upper bound for the cap, and counted apart."""
        spend = Spend(PRICES, max_cost_usd=0.002)

        async def no_usage() -> Reply:
            return Reply(None)

        async def main() -> None:
            lane = spend.lane(real_lane(), "check", "m", 100)
            await lane.call(no_usage, estimated_tokens=600)  # charged $0.0015
            with pytest.raises(CostCapReached):
                await lane.call(no_usage, estimated_tokens=600)

        run_in_virtual_time(main)
        assert (spend.stages["check"].calls, spend.stages["check"].calls_without_usage) == (1, 1)

    def test_after_a_refusal_every_call_is_refused(self) -> None:
        """Once a call is refused the run is stopping: a smaller call that would fit is refused too."""
        spend = Spend(PRICES, max_cost_usd=0.002)

        async def main() -> list[str]:
            lane = spend.lane(real_lane(), "check", "m", 100)
            await lane.call(replying(200, 100), estimated_tokens=600)  # $0.0012 spent
            refused = []
            for tokens in (600, 1):  # bound $0.0015 does not fit; then $0.00001 would
                with pytest.raises(CostCapReached) as info:
                    await lane.call(replying(1, 0), estimated_tokens=tokens)
                refused.append(f"{info.value.spent_usd:.4f}+{info.value.next_usd:.4f}")
            return refused

        assert run_in_virtual_time(main) == ["0.0012+0.0015", "0.0012+0.0015"]
        assert spend.stages["check"].calls == 1


class TestCostCapMessage:
    @pytest.mark.parametrize(("cap", "shown"), [(0.003, "$0.003"), (1e-05, "$0.00001"), (0.0, "$0"), (25.0, "$25")],
                             ids=["milli", "tiny", "zero", "whole"])
    def test_cap_is_shown_as_typed_without_an_exponent(self, cap: float, shown: str) -> None:
        """The cap reads as the user typed it: --max-cost 0.00001 was shown as $1e-05."""
        exc = CostCapReached(cap_usd=cap, spent_usd=0.0, next_usd=0.000159)
        assert str(exc) == (f"--max-cost {shown} reached: this run spent $0.000000, and its next request "
                            "could cost up to $0.000159")
