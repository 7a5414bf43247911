"""The two ends every job shares: the reader, the writer, and reading back what was written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

from dahl.engine._channel import Channel
from dahl.engine._ends import Reader, Writer, read_back
from dahl.errors import InputError


class _Line(msgspec.Struct):
    id: str


_DECODE = msgspec.json.Decoder(_Line).decode


class TestReader:
    async def test_batches_reach_take_then_outputs_end(self) -> None:
        """Seven items in batches of three reach ``take`` as [3, 3, 1]; the output then ends."""
        out: Channel[int] = Channel(16)
        sizes: list[int] = []

        async def take(batch: list[int]) -> None:
            sizes.append(len(batch))
            for item in batch:
                await out.send(item)

        reader = Reader(range(7), take, outputs=[out], batch=3)
        await reader()
        assert sizes == [3, 3, 1]
        assert [item async for item in out] == list(range(7))

    async def test_a_failing_source_still_ends_the_outputs(self) -> None:
        """A source that raises ends the reader's outputs (no stage waits forever) and raises."""
        out: Channel[int] = Channel(4)

        def source() -> Iterator[int]:
            yield 1
            raise InputError("bad line", file="q.jsonl", line=2)

        async def take(batch: list[int]) -> None:
            for item in batch:
                await out.send(item)

        reader = Reader(source(), take, outputs=[out], batch=1)
        with pytest.raises(InputError):
            await reader()
        assert [item async for item in out] == [1]


class TestWriter:
    async def test_one_item_per_write_by_default(self) -> None:
        """With the default policy every item is its own write, in arrival order, then counted."""
        inbox: Channel[str] = Channel(8)
        inbox.open_sender()
        writes: list[list[str]] = []
        counted: list[str] = []
        for item in "abc":
            await inbox.send(item)
        inbox.close_sender()
        await Writer(inbox, lambda batch: writes.append(list(batch)), written=counted.extend)()
        assert (writes, counted) == ([["a"], ["b"], ["c"]], ["a", "b", "c"])

    async def test_batches_of_flush_items(self) -> None:
        """With ``flush_items=2`` five items are written as 2 + 2 + 1."""
        inbox: Channel[int] = Channel(8)
        inbox.open_sender()
        writes: list[list[int]] = []
        for item in range(5):
            await inbox.send(item)
        inbox.close_sender()
        await Writer(inbox, lambda batch: writes.append(list(batch)), flush_items=2, flush_interval_s=60.0)()
        assert writes == [[0, 1], [2, 3], [4]]

    async def test_cancelled_writer_writes_what_it_holds(self) -> None:
        """Cancelled while holding items (batch not full, interval not reached), the writer still writes them."""
        inbox: Channel[int] = Channel(8)
        inbox.open_sender()
        writes: list[list[int]] = []
        for item in range(3):
            await inbox.send(item)
        with anyio.move_on_after(0.2):
            await Writer(inbox, lambda batch: writes.append(list(batch)), flush_items=100, flush_interval_s=60.0)()
        assert writes == [[0, 1, 2]]


class TestReadBack:
    def test_missing_file_is_nothing_finished(self, tmp_path: Path) -> None:
        """No file yet: no finished items."""
        assert read_back(tmp_path / "out.jsonl", _DECODE, "test") == []

    def test_torn_last_line_is_cut(self, tmp_path: Path) -> None:
        """A last line without its newline (a kill mid-write) is dropped and truncated away."""
        path = tmp_path / "out.jsonl"
        path.write_bytes(b'{"id": "a"}\n{"id": "b"}\n{"id": "c')
        assert [item.id for item in read_back(path, _DECODE, "test")] == ["a", "b"]
        assert path.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n'

    def test_a_complete_foreign_line_raises(self, tmp_path: Path) -> None:
        """A complete line that is not the job's names file and line, and leaves the file as it was."""
        path = tmp_path / "out.jsonl"
        content = b'{"id": "a"}\nnot json\n'
        path.write_bytes(content)
        with pytest.raises(InputError, match="not a test line") as info:
            read_back(path, _DECODE, "test")
        assert (info.value.line, path.read_bytes()) == (2, content)
