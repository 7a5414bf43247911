"""The bounded channel between pipeline stages: backpressure, end of stream, many receivers."""

from __future__ import annotations

import asyncio

import pytest

from dahl.engine._channel import Channel, EndOfChannel


class TestChannel:
    async def test_items_then_end_for_every_receiver(self) -> None:
        """Three receivers share 10 items exactly once, then all see the end."""
        channel: Channel[int] = Channel(4)
        channel.open_sender()
        got: list[int] = []

        async def receiver() -> None:
            async for item in channel:
                got.append(item)

        async def sender() -> None:
            try:
                for i in range(10):
                    await channel.send(i)
            finally:
                channel.close_sender()

        await asyncio.wait_for(asyncio.gather(sender(), *(receiver() for _ in range(3))), 5)
        assert sorted(got) == list(range(10))

    async def test_send_waits_while_full(self) -> None:
        """With size 2, a third send waits until a receive frees a slot."""
        channel: Channel[int] = Channel(2)
        channel.open_sender()
        await channel.send(1)
        await channel.send(2)
        third = asyncio.ensure_future(channel.send(3))
        await asyncio.sleep(0.01)
        assert not third.done()
        assert channel.statistics().queued == 2
        assert await channel.receive() == 1
        await asyncio.wait_for(third, 1)
        assert channel.statistics().queued == 2

    async def test_close_on_a_full_queue_ends_after_draining(self) -> None:
        """The last sender closing while the queue is full still ends the channel once drained."""
        channel: Channel[int] = Channel(2)
        channel.open_sender()
        await channel.send(1)
        await channel.send(2)
        channel.close_sender()
        assert [await channel.receive(), await channel.receive()] == [1, 2]
        with pytest.raises(EndOfChannel):
            await channel.receive()

    async def test_end_waits_for_every_sender(self) -> None:
        """With two senders, the channel ends only after both close."""
        channel: Channel[int] = Channel(4)
        channel.open_sender()
        channel.open_sender()
        channel.close_sender()
        waiting = asyncio.ensure_future(channel.receive())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        channel.close_sender()
        with pytest.raises(EndOfChannel):
            await asyncio.wait_for(waiting, 1)

    async def test_end_reaches_receivers_woken_for_an_item_another_took(self) -> None:
        """Closed on a full queue, the end still reaches receivers whose woken item was taken first.

        Two receivers wait on an empty channel of 1; the item sent wakes one, the close
        finds the queue full, and a third receiver takes the item before the woken one
        runs: both waiting receivers wait again, and used to wait forever.
        """
        channel: Channel[int] = Channel(1)
        channel.open_sender()
        waiting = [asyncio.create_task(channel.receive()) for _ in range(2)]
        await asyncio.sleep(0)  # both are blocked on the empty queue
        await channel.send(7)  # wakes the first; it has not run yet
        channel.close_sender()  # the queue is full: no room for the end marker
        assert await channel.receive() == 7  # taken before the woken receiver runs
        for _ in range(5):
            await asyncio.sleep(0)
        assert all(t.done() for t in waiting)
        assert all(isinstance(t.exception(), EndOfChannel) for t in waiting)

    def test_size_must_be_positive(self) -> None:
        """A channel of size 0 is a ValueError."""
        with pytest.raises(ValueError):
            Channel(0)
