"""Unbatched: a stage's workers share batches taken from one channel, one item each at a time."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest

from dahl.engine._channel import Channel
from dahl.engine._stage import Stage, Unbatched, run_stages


class TestUnbatched:
    async def test_items_of_a_batch_go_to_different_workers_in_order(self) -> None:
        """Batches [0..3] and [4..5], 3 workers that each hold their item: every item once, taken in order, spread."""
        batches: Channel[list[int]] = Channel(2)
        batches.open_sender()
        taken: list[int] = []
        holders: dict[int, str] = {}
        release = anyio.Event()

        async def work(item: int) -> None:
            taken.append(item)
            holders[item] = str(anyio.get_current_task().id)  # not id(TaskInfo): a freed one is reused
            await release.wait()

        stage: Stage[int] = Stage("t", Unbatched(batches, lambda b: b), work, workers=3)

        async def feed() -> None:
            await batches.send([0, 1, 2, 3])
            await batches.send([4, 5])
            batches.close_sender()
            while len(taken) < 3:
                await anyio.sleep(0)
            assert taken == [0, 1, 2]  # three workers each hold one item of the first batch
            assert len(set(holders.values())) == 3
            release.set()

        await run_stages([stage], [feed])
        assert taken == [0, 1, 2, 3, 4, 5]

    async def test_an_empty_batch_is_skipped_and_the_end_ends_every_worker(self) -> None:
        """An empty batch hands nothing out; after the last sender closes, all 4 workers return."""
        batches: Channel[list[str]] = Channel(4)
        batches.open_sender()
        taken: list[str] = []

        async def work(item: str) -> None:
            taken.append(item)

        stage: Stage[str] = Stage("t", Unbatched(batches, lambda b: b), work, workers=4)

        async def feed() -> None:
            for batch in ([], ["a"], [], ["b", "c"]):
                await batches.send(batch)
            batches.close_sender()

        with anyio.fail_after(5):
            await run_stages([stage], [feed])
        assert taken == ["a", "b", "c"]


class TestStageTurns:
    async def test_work_that_never_waits_lets_the_loop_run_others(self) -> None:
        """One worker on 100 ready items whose work never waits: another task runs after 8 of them,
        and again after each further 8 (without the checkpoint it would run only after all 100)."""
        batches: Channel[list[int]] = Channel(1)
        batches.open_sender()
        events: list[str] = []

        async def work(item: int) -> None:
            events.append("item")

        async def other() -> None:
            while events.count("item") < 100:
                events.append("other")
                await anyio.lowlevel.checkpoint()

        await batches.send(list(range(100)))
        batches.close_sender()
        stage: Stage[int] = Stage("t", Unbatched(batches, lambda b: b), work, workers=1)
        with anyio.fail_after(5):
            await run_stages([stage], [other])
        runs = [len(run) for run in "".join("i" if e == "item" else " " for e in events).split()]
        assert sum(runs) == 100
        assert max(runs) == 8

    async def test_work_that_waits_is_not_interrupted(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Work that waits on every item lets the loop run already: 100 items, no extra checkpoint."""
        batches: Channel[list[int]] = Channel(1)
        batches.open_sender()
        checkpoints: list[None] = []
        real_checkpoint = anyio.lowlevel.checkpoint

        async def counting_checkpoint() -> None:
            checkpoints.append(None)
            await real_checkpoint()

        done: list[int] = []

        async def work(item: int) -> None:
            await asyncio.sleep(0)
            done.append(item)

        await batches.send(list(range(100)))
        batches.close_sender()
        monkeypatch.setattr(anyio.lowlevel, "checkpoint", counting_checkpoint)
        stage: Stage[int] = Stage("t", Unbatched(batches, lambda b: b), work, workers=1)
        with anyio.fail_after(5):
            await run_stages([stage])
        assert done == list(range(100))
        assert checkpoints == []
