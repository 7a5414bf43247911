"""RateBucket and PauseGate on virtual time (no real sleeping)."""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from dahl.lanes._clock import SystemClock, run_in_virtual_time
from dahl.lanes._limits import PauseGate, RateBucket
from dahl.errors import ConfigError, PermanentAPIError


def now() -> float:
    """Virtual time of the running loop, in seconds."""
    return asyncio.get_running_loop().time()


async def acquire_times(bucket: RateBucket, n: int, amount: float = 1) -> list[float]:
    """Start ``n`` acquires at once (in order); return when each one got through."""
    times: list[float] = []

    async def one() -> None:
        await bucket.acquire(amount)
        times.append(now())

    async with asyncio.TaskGroup() as tg:
        for _ in range(n):
            tg.create_task(one())
            await asyncio.sleep(0)  # enqueue in a known order
    return times


class TestVirtualTime:
    def test_sleeps_take_no_wall_time(self) -> None:
        """An hour of virtual sleeps finishes at exactly 3600 s of loop time."""

        async def main() -> float:
            for _ in range(3600):
                await asyncio.sleep(1.0)
            return now()

        assert run_in_virtual_time(main) == pytest.approx(3600.0)

    def test_system_clock_follows_the_loop(self) -> None:
        """SystemClock.now() and sleep() use the running loop's (virtual) time."""

        async def main() -> tuple[float, float]:
            clock = SystemClock()
            start = clock.now()
            await clock.sleep(2.5)
            return start, clock.now()

        assert run_in_virtual_time(main) == (0.0, 2.5)


def most_in_any_window(times: list[float], span_s: float) -> int:
    """Most of ``times`` inside any half-open span ``[t, t + span_s)`` (exact to 1e-9 s)."""
    ordered = sorted(times)
    return max(
        sum(1 for u in ordered if start - 1e-9 <= u < start + span_s - 1e-9) for start in ordered
    )


class TestRateBucket:
    def test_cold_bucket_ramps_in_at_the_rate(self) -> None:
        """At 600 RPM a new bucket starts empty: 25 acquires pass at 0.1, 0.2, ..., 2.5 s."""
        times = run_in_virtual_time(lambda: acquire_times(RateBucket(600), 25))
        assert times == pytest.approx([0.1 * k for k in range(1, 26)])

    def test_initial_units_pass_at_once(self) -> None:
        """With initial=1 the first acquire passes at t=0, then one every 0.1 s."""
        times = run_in_virtual_time(lambda: acquire_times(RateBucket(600, initial=1), 4))
        assert times == pytest.approx([0.0, 0.1, 0.2, 0.3])

    def test_initial_is_clamped_to_capacity(self) -> None:
        """initial=50 on a 600 RPM bucket (capacity 10) holds 10."""
        assert RateBucket(600, initial=50).level == 10.0

    @pytest.mark.parametrize("initial", [-1, math.nan, True], ids=["negative", "nan", "bool"])
    def test_rejects_nonsense_initial(self, initial: float) -> None:
        """initial must be a finite number >= 0."""
        with pytest.raises(ConfigError):
            RateBucket(600, initial=initial)

    def test_cold_run_never_exceeds_one_second_of_rate(self) -> None:
        """From cold, 64 callers at 600 RPM for 30 s: no 1 s span holds more than 10 acquires."""

        async def main() -> list[float]:
            bucket = RateBucket(600, initial=1)
            times: list[float] = []

            async def worker() -> None:
                while now() < 30.0:
                    await bucket.acquire()
                    times.append(now())

            async with asyncio.TaskGroup() as tg:
                for _ in range(64):
                    tg.create_task(worker())
            return times

        times = run_in_virtual_time(main)
        assert most_in_any_window(times, 1.0) == 10
        assert most_in_any_window(times, 0.2) == 2
        # 0.0, 0.1, ..., 30.0; the 63 callers queued at 30 s leave after it.
        assert len([t for t in times if t <= 30.0 + 1e-9]) == 301

    def test_window_cap_after_an_idle_spell(self) -> None:
        """A bucket full after 5 s idle sends its 10 at once, then nothing until they age out."""

        async def main() -> list[float]:
            bucket = RateBucket(600, initial=1)
            await bucket.acquire()  # t=0; the bucket's clock starts at first use
            await asyncio.sleep(5.0)  # refills to capacity 10
            return await acquire_times(bucket, 25)

        times = run_in_virtual_time(main)
        # Old behaviour: 10 at 5.0 then one per 0.1 s, i.e. 19 in [5, 6).
        assert times[:10] == [5.0] * 10
        assert times[10:] == pytest.approx([6.0 + 0.1 * k for k in range(15)])
        assert most_in_any_window(times, 1.0) == 10

    def test_window_cap_holds_varying_token_sizes(self) -> None:
        """Requests of 80/100/120 tokens at 1000 tokens/s: no 1 s span over 1000, >= 90 % of rate."""

        async def main() -> list[tuple[float, float]]:
            bucket = RateBucket(60_000)  # 1000 tokens/s; window cap 1000 per 1 s
            taken: list[tuple[float, float]] = []

            async def worker(size: float) -> None:
                while now() < 20.0:
                    await bucket.acquire(size)
                    taken.append((now(), size))

            async with asyncio.TaskGroup() as tg:
                for size in (80.0, 100.0, 120.0) * 4:
                    tg.create_task(worker(size))
            return taken

        taken = run_in_virtual_time(main)
        starts = sorted(t for t, _ in taken)
        worst = max(
            sum(n for u, n in taken if start - 1e-9 <= u < start + 1.0 - 1e-9) for start in starts
        )
        assert worst <= 1000.0
        spent = sum(n for t, n in taken if t <= 20.0)
        # A plain bucket would overshoot some 1 s spans by up to one request; the
        # cap costs the unused tail of a window (< one request): >= 90 % of 20,000.
        assert 18_000 <= spent <= 20_000

    def test_window_cap_rounds_up_to_whole_requests(self) -> None:
        """At 90 RPM the cap is 2 requests per 1.333 s, so pacing at 1.5/s loses nothing."""
        bucket = RateBucket(90)
        assert bucket.window is not None
        units, seconds = bucket.window
        assert units == 2.0
        assert seconds == pytest.approx(4 / 3)
        times = run_in_virtual_time(lambda: acquire_times(bucket, 6))
        assert times == pytest.approx([k / 1.5 for k in range(1, 7)])

    def test_capacity_is_rate_times_burst(self) -> None:
        """Capacity is rate/60 * burst_s: 600 RPM with burst 0.5 s holds 5."""
        assert RateBucket(600).capacity == 10
        assert RateBucket(600, burst_s=0.5).capacity == 5

    def test_sustained_rate_equals_limit(self) -> None:
        """Over 60 virtual seconds a cold 600 RPM bucket passes exactly 600 acquires."""

        async def main() -> list[float]:
            bucket = RateBucket(600)
            times: list[float] = []

            async def worker() -> None:
                while now() < 60.0:
                    await bucket.acquire()
                    times.append(now())

            async with asyncio.TaskGroup() as tg:
                for _ in range(8):
                    tg.create_task(worker())
            return times

        times = run_in_virtual_time(main)
        assert len([t for t in times if t <= 60.0 + 1e-9]) == 600
        assert min(times) == pytest.approx(0.1)

    def test_waiters_are_served_fifo(self) -> None:
        """A queued large request is not overtaken by a later small one."""

        async def main() -> list[tuple[str, float]]:
            bucket = RateBucket(60, initial=1)  # 1 per second, capacity 1
            order: list[tuple[str, float]] = []
            await bucket.acquire(1)  # empty at t=0

            async def take(name: str, amount: float) -> None:
                await bucket.acquire(amount)
                order.append((name, now()))

            async with asyncio.TaskGroup() as tg:
                tg.create_task(take("big", 3))
                await asyncio.sleep(0)
                tg.create_task(take("small", 1))
            return order

        # big (3 > capacity 1) waits for a full bucket at t=1 and leaves it at -2;
        # small then needs 3 more seconds of refill: t=4.
        assert run_in_virtual_time(main) == [("big", 1.0), ("small", 4.0)]

    def test_amount_over_per_minute_limit_fails_at_once(self) -> None:
        """Asking for more than one minute of rate raises PermanentAPIError without waiting."""

        async def main() -> tuple[str, float]:
            bucket = RateBucket(60_000)
            with pytest.raises(PermanentAPIError) as info:
                await bucket.acquire(60_001)
            return str(info.value), now()

        message, at = run_in_virtual_time(main)
        assert at == 0.0
        assert "request of 60001 tokens exceeds the token budget" in message

    def test_refund_returns_units_up_to_capacity(self) -> None:
        """Reserve 1000 of a 1000-capacity bucket, refund 700: level 700; refunds cap at 1000."""

        async def main() -> tuple[float, float, float]:
            bucket = RateBucket(60_000, initial=1000)  # 1000 tokens/s, capacity 1000
            await bucket.acquire(1000)
            empty = bucket.level
            bucket.refund(700)
            refunded = bucket.level
            bucket.refund(5000)
            return empty, refunded, bucket.level

        assert run_in_virtual_time(main) == (0.0, 700.0, 1000.0)

    def test_unsent_refund_leaves_the_window_cap(self) -> None:
        """Units handed back unsent free the window cap at once; sent ones stay until they age out."""

        async def main() -> tuple[float, float]:
            times: list[float] = []
            for sent in (False, True):
                bucket = RateBucket(60, initial=1)  # 1/s: cap 1 request per 1 s
                start = now()
                await bucket.acquire()
                await asyncio.sleep(0.5)
                bucket.refund(1, sent=sent)  # the level is full again either way
                await bucket.acquire()
                times.append(now() - start)
            return times[0], times[1]

        assert run_in_virtual_time(main) == (0.5, 1.0)

    def test_consume_goes_into_debt(self) -> None:
        """consume() takes without waiting; the next acquire waits out the debt."""

        async def main() -> tuple[float, float]:
            bucket = RateBucket(60, initial=1)  # 1/s, capacity 1
            bucket.consume(3)  # level 1 - 3 = -2
            level = bucket.level
            await bucket.acquire(1)  # needs +3: t=3
            return level, now()

        assert run_in_virtual_time(main) == (-2.0, 3.0)

    def test_drain_empties_the_bucket(self) -> None:
        """After drain() a full 600 RPM bucket passes its next acquire only at t=0.1."""

        async def main() -> float:
            bucket = RateBucket(600, initial=10)
            bucket.drain()
            await bucket.acquire()
            return now()

        assert run_in_virtual_time(main) == pytest.approx(0.1)

    def test_set_rate_lowers_capacity_and_pace(self) -> None:
        """Lowering 600 -> 60 RPM clamps the level to 1 and spaces acquires 1 s apart."""

        async def main() -> list[float]:
            bucket = RateBucket(600, initial=10)
            bucket.set_rate(60)
            return await acquire_times(bucket, 3)

        assert run_in_virtual_time(main) == pytest.approx([0.0, 1.0, 2.0])

    def test_cancelled_waiter_takes_nothing(self) -> None:
        """A waiter cancelled mid-wait leaves the queue; the next one gets its slot on time."""

        async def main() -> tuple[int, float]:
            bucket = RateBucket(60, initial=1)
            await bucket.acquire()  # empty at t=0, next unit at t=1
            waiter = asyncio.create_task(bucket.acquire())
            await asyncio.sleep(0.5)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            waiting = bucket.waiting
            await bucket.acquire()
            return waiting, now()

        assert run_in_virtual_time(main) == (0, 1.0)

    def test_cancelled_head_hands_turn_on(self) -> None:
        """Cancelling the sleeping head wakes the next waiter, which passes at its due time."""

        async def main() -> float:
            bucket = RateBucket(60, initial=1)
            await bucket.acquire()
            head = asyncio.create_task(bucket.acquire())
            await asyncio.sleep(0)
            second = asyncio.create_task(bucket.acquire())
            await asyncio.sleep(0.25)
            head.cancel()
            with pytest.raises(asyncio.CancelledError):
                await head
            await second
            return now()

        assert run_in_virtual_time(main) == 1.0

    @pytest.mark.parametrize(
        "rate", [0, -60, math.nan, math.inf, True], ids=["zero", "negative", "nan", "inf", "bool"]
    )
    def test_rejects_nonsense_rate(self, rate: float) -> None:
        """A rate that is not a finite number > 0 is a ConfigError."""
        with pytest.raises(ConfigError):
            RateBucket(rate)

    def test_rejects_nonpositive_amount(self) -> None:
        """acquire(0) is a ValueError, not a free pass."""

        async def main() -> None:
            await RateBucket(60).acquire(0)

        with pytest.raises(ValueError, match="amount"):
            run_in_virtual_time(main)

    def test_repr_explains_state(self) -> None:
        """repr names the rate, the level out of capacity and the queue length."""
        assert repr(RateBucket(600, unit="requests")) == (
            "<RateBucket 600 requests/min, level 0.00/10, 0 waiting>"
        )

    def test_repr_shows_a_hold(self) -> None:
        """While held, repr says for how long."""

        async def main() -> str:
            bucket = RateBucket(600, unit="requests")
            bucket.hold_until(2.5)
            return repr(bucket)

        assert run_in_virtual_time(main) == (
            "<RateBucket 600 requests/min, level 0.00/10, held 2.500s, 0 waiting>"
        )


class TestRateBucketHold:
    def test_nothing_passes_during_a_hold(self) -> None:
        """A full 600 RPM bucket held until t=3 passes nothing before 3, then one per 0.1 s."""

        async def main() -> list[float]:
            bucket = RateBucket(600, initial=1)
            await asyncio.sleep(2.0)  # full: 10 units
            bucket.hold_until(3.0)
            return await acquire_times(bucket, 5)

        # Restarts from initial=1 at t=3: 3.0, then paced.
        assert run_in_virtual_time(main) == pytest.approx([3.0, 3.1, 3.2, 3.3, 3.4])

    def test_no_units_accrue_during_a_hold(self) -> None:
        """An empty bucket held for 10 s is still empty when the hold ends (no 1 s burst after)."""

        async def main() -> tuple[float, float]:
            bucket = RateBucket(600)
            bucket.hold_until(10.0)
            await asyncio.sleep(10.0)
            at_end = bucket.level
            await asyncio.sleep(0.5)
            return at_end, bucket.level

        at_end, later = run_in_virtual_time(main)
        assert at_end == 0.0
        assert later == pytest.approx(5.0)

    def test_hold_keeps_a_debt_and_the_later_time(self) -> None:
        """A hold keeps a negative level and an existing later hold."""

        async def main() -> tuple[float, float | None]:
            bucket = RateBucket(60, initial=1)
            bucket.consume(3)  # level -2
            bucket.hold_until(5.0)
            bucket.hold_until(2.0)
            return bucket.level, bucket.held_until

        assert run_in_virtual_time(main) == (-2.0, 5.0)

    def test_sleeping_head_honours_a_later_hold(self) -> None:
        """A head already sleeping for its unit waits out a hold placed meanwhile."""

        async def main() -> float:
            bucket = RateBucket(60)  # empty, 1 unit at t=1
            task = asyncio.create_task(bucket.acquire())
            await asyncio.sleep(0.5)
            bucket.hold_until(4.0)  # level 0.5 kept (<= initial? no: initial 0 -> 0)
            await task
            return now()

        # Level reset to min(0.5, initial 0) = 0 at the hold; refills from 4.0: t=5.
        assert run_in_virtual_time(main) == 5.0


class TestPauseGate:
    def test_open_gate_does_not_wait(self) -> None:
        """wait() on an open gate returns at t=0 and paused_until is None."""

        async def main() -> tuple[float, float | None]:
            gate = PauseGate()
            await gate.wait()
            return now(), gate.paused_until

        assert run_in_virtual_time(main) == (0.0, None)

    def test_nothing_passes_before_the_pause_ends(self) -> None:
        """With a pause until t=5, all 10 waiters pass at exactly t=5 (no spread)."""

        async def main() -> list[float]:
            gate = PauseGate()
            gate.pause_until(5.0)
            times: list[float] = []

            async def one() -> None:
                await gate.wait()
                times.append(now())

            async with asyncio.TaskGroup() as tg:
                for _ in range(10):
                    tg.create_task(one())
            return times

        assert run_in_virtual_time(main) == [5.0] * 10

    def test_keeps_the_later_pause(self) -> None:
        """pause_until(3) after pause_until(5) leaves the gate closed until 5."""

        async def main() -> float | None:
            gate = PauseGate()
            gate.pause_until(5.0)
            gate.pause_until(3.0)
            return gate.paused_until

        assert run_in_virtual_time(main) == 5.0

    def test_extension_while_waiting_is_honoured(self) -> None:
        """A pause extended from 2 s to 8 s while a task waits holds it until 8 s."""

        async def main() -> float:
            gate = PauseGate()
            gate.pause_until(now() + 2.0)
            waiter = asyncio.create_task(gate.wait())
            await asyncio.sleep(1.0)
            gate.pause_until(8.0)
            await waiter
            return now()

        assert run_in_virtual_time(main) == 8.0

    def test_spread_releases_waiters_at_different_times(self) -> None:
        """With spread 0.5 s, 20 held waiters leave within [5, 5.5], not in one instant."""

        async def main() -> list[float]:
            gate = PauseGate(spread_s=0.5, rng=random.Random(7))
            gate.pause_until(5.0)
            times: list[float] = []

            async def one() -> None:
                await gate.wait()
                times.append(now())

            async with asyncio.TaskGroup() as tg:
                for _ in range(20):
                    tg.create_task(one())
            return times

        times = run_in_virtual_time(main)
        assert all(5.0 <= t <= 5.5 for t in times)
        assert len(set(times)) == 20

    def test_cancelled_waiter_is_not_counted(self) -> None:
        """A waiter cancelled at the gate no longer counts as waiting."""

        async def main() -> tuple[int, int]:
            gate = PauseGate()
            gate.pause_until(now() + 10.0)
            waiter = asyncio.create_task(gate.wait())
            await asyncio.sleep(1.0)
            held = gate.waiting
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            return held, gate.waiting

        assert run_in_virtual_time(main) == (1, 0)
