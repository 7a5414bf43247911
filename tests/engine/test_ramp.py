"""StartRamp on virtual time (no real sleeping)."""

from __future__ import annotations

import asyncio

import pytest

from dahl.lanes._clock import run_in_virtual_time
from dahl.lanes._ramp import StartRamp
from dahl.errors import ConfigError


def now() -> float:
    """Virtual time of the running loop, in seconds."""
    return asyncio.get_running_loop().time()


async def pass_times(ramp: StartRamp, n: int) -> list[float]:
    """Start ``n`` waits at once (in order); return when each one got through."""
    times: list[float] = []

    async def one() -> None:
        await ramp.wait()
        times.append(now())

    async with asyncio.TaskGroup() as tg:
        for _ in range(n):
            tg.create_task(one())
            await asyncio.sleep(0)  # enqueue in a known order
    return times


class TestStartRamp:
    def test_paces_at_the_rate_first_at_once(self) -> None:
        """At 10 per second, 5 callers pass at 0.0, 0.1, 0.2, 0.3, 0.4 s."""

        async def main() -> tuple[list[float], int]:
            ramp = StartRamp(10.0)
            return await pass_times(ramp, 5), ramp.admitted

        times, admitted = run_in_virtual_time(main)
        assert times == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
        assert admitted == 5

    def test_open_releases_every_waiter_at_once(self) -> None:
        """At 1 per second, opened at 1.5 s: 0, 1, then the other three at 1.5 s (not 2, 3, 4)."""

        async def main() -> tuple[list[float], int, float]:
            ramp = StartRamp(1.0)

            async def open_later() -> None:
                await asyncio.sleep(1.5)
                ramp.open()

            async with asyncio.TaskGroup() as tg:
                tg.create_task(open_later())
                times = await pass_times(ramp, 5)
            await ramp.wait()  # open: returns at once
            return times, ramp.admitted, now()

        times, admitted, after = run_in_virtual_time(main)
        assert times == [0.0, 1.0, 1.5, 1.5, 1.5]
        assert (admitted, after) == (2, 1.5)

    def test_a_late_caller_is_not_caught_up(self) -> None:
        """One caller at 0, three at 5 s: 5.0, 5.1, 5.2 -- idle time earns no burst."""

        async def main() -> list[float]:
            ramp = StartRamp(10.0)
            await ramp.wait()
            await asyncio.sleep(5.0)
            return await pass_times(ramp, 3)

        assert run_in_virtual_time(main) == pytest.approx([5.0, 5.1, 5.2])

    def test_a_cancelled_waiter_takes_no_turn(self) -> None:
        """At 1 per second, the sleeping head cancelled at 0.5 s: the next caller passes at 1 s."""

        async def main() -> tuple[float, int, int]:
            ramp = StartRamp(1.0)
            await ramp.wait()  # t = 0
            head = asyncio.create_task(ramp.wait())
            second = asyncio.create_task(ramp.wait())
            await asyncio.sleep(0.5)
            assert ramp.waiting == 2
            head.cancel()
            with pytest.raises(asyncio.CancelledError):
                await head
            await second
            return now(), ramp.admitted, ramp.waiting

        assert run_in_virtual_time(main) == (1.0, 2, 0)

    @pytest.mark.parametrize("per_s", [0, -1.0, float("nan"), float("inf"), True, "5"],
                             ids=["zero", "negative", "nan", "inf", "bool", "str"])
    def test_rejects_nonsense(self, per_s: object) -> None:
        """A rate that is not a finite number > 0 is a ConfigError."""
        with pytest.raises(ConfigError, match="per_s"):
            StartRamp(per_s)  # type: ignore[arg-type]

    def test_repr_explains_state(self) -> None:
        """repr shows the rate (or open), callers paced and waiting."""
        ramp = StartRamp(64.0)
        assert repr(ramp) == "<StartRamp 64/s, 0 paced, 0 waiting>"
        ramp.open()
        assert repr(ramp) == "<StartRamp open, 0 paced, 0 waiting>"
