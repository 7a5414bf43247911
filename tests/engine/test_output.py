"""AnswerLog.finalize: keeps this input's lines in input order, drops stale ones, feeds the summary."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import numpy as np
import pytest

from dahl.results._index import InputIndex
from dahl.results._log import AnswerLog, line_key
from dahl.results._assemble import result_of_claims
from dahl.errors import OutputWriteError
from dahl.records import Answer, AnswerResult, ClaimResult, Label, ResultDigest


def _result(i: int, labels: str) -> AnswerResult:
    """Answer ``a{i}`` whose claims carry ``labels`` (S supported, U unsupported)."""
    answer = Answer(id=f"a{i}", question=f"q{i}?", response=f"r{i}.", model="m", category="c")
    claims = tuple(
        ClaimResult(text=f"c{j}", index=j, label=Label.SUPPORTED if c == "S" else Label.UNSUPPORTED)
        for j, c in enumerate(labels)
    )
    return result_of_claims(answer, f"h{i}", claims, gamma=10.0, k=64)


def _finalize(log: AnswerLog, index: InputIndex) -> tuple[int, list[tuple[str, tuple[str, ...]]]]:
    seen: list[ResultDigest] = []
    dropped = log.finalize(index, seen.append)
    return dropped, [(d.id, tuple(str(c.label) for c in d.claims)) for d in seen]


def _order(*ids: int, first: int = 1) -> InputIndex:
    """An input of answers ``a{i}`` (input hash ``h{i}``) at positions ``first``, ``first + 1``, ..."""
    index = InputIndex()
    for pos, i in enumerate(ids, first):
        assert index.admit(pos, i, 0, line_key(f"a{i}", f"h{i}")) is None
    return index


class TestFinalize:
    def test_lines_appended_here_and_before_end_in_input_order(self, tmp_path: Path) -> None:
        """An earlier run's lines (one stale) plus this run's, out of order: 1 dropped, 4 kept in order.

        The same file finalized by a fresh AnswerLog (which decodes every line) gives the
        same file and digests: the record of appended lines only saves decoding them.
        """
        path = tmp_path / "answers.jsonl"
        earlier = AnswerLog(path)
        earlier.open()
        earlier.append([_result(2, "SU"), _result(9, "U")])  # a9: not in this input
        earlier.close()
        log = AnswerLog(path)
        log.open()
        log.append([_result(3, "S")])
        log.append([_result(0, "SS"), _result(1, "U")])
        log.close()
        copy = tmp_path / "copy.jsonl"
        shutil.copy(path, copy)

        dropped, digests = _finalize(log, _order(0, 1, 2, 3))
        assert dropped == 1
        assert digests == [
            ("a0", ("supported", "supported")),
            ("a1", ("unsupported",)),
            ("a2", ("supported", "unsupported")),
            ("a3", ("supported",)),
        ]
        lines = path.read_bytes().splitlines()
        assert [msgspec.json.decode(line)["id"] for line in lines] == ["a0", "a1", "a2", "a3"]
        assert _finalize(AnswerLog(copy), _order(0, 1, 2, 3)) == (dropped, digests)
        assert copy.read_bytes() == path.read_bytes()

    def test_a_file_changed_behind_the_log_is_decoded_whole(self, tmp_path: Path) -> None:
        """Bytes the log did not write (its record no longer matches the file) are read, not trusted."""
        path = tmp_path / "answers.jsonl"
        log = AnswerLog(path)
        log.open()
        log.append([_result(1, "S")])
        log.close()
        with path.open("ab") as f:
            f.write(msgspec.json.encode(_result(0, "U")) + b"\n")
        assert _finalize(log, _order(0, 1)) == (0, [("a0", ("unsupported",)), ("a1", ("supported",))])

    def test_in_order_lines_are_not_rewritten(self, tmp_path: Path) -> None:
        """Lines already in input order with none stale: the file keeps its inode (no rewrite)."""
        path = tmp_path / "answers.jsonl"
        log = AnswerLog(path)
        log.open()
        log.append([_result(0, "S"), _result(1, "SU")])
        log.close()
        inode = path.stat().st_ino
        assert _finalize(log, _order(0, 1)) == (0, [("a0", ("supported",)), ("a1", ("supported", "unsupported"))])
        assert path.stat().st_ino == inode

    def test_the_index_is_released_before_the_lines_are_consumed(self, tmp_path: Path) -> None:
        """Once lines are matched the index holds no answer (its memory goes before the verdict
        writer's grows); its count is kept. A new file's lines are matched on the log's record."""
        path = tmp_path / "answers.jsonl"
        log = AnswerLog(path)
        log.open()
        log.append([_result(1, "S"), _result(0, "U")])
        log.close()
        index = _order(0, 1)
        keys = np.array([line_key("a0", "h0"), line_key("a1", "h1")], dtype=np.uint64)
        seen: list[list[int]] = []
        assert log.finalize(index, lambda d: seen.append(index.take_positions(keys).tolist())) == 0
        assert seen == [[-1, -1], [-1, -1]]
        assert len(index) == 2
        assert log.positions.tolist() == [1, 2]


class TestWriteFailures:
    @pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is Linux-only")
    def test_append_on_a_full_disk_names_the_file(self) -> None:
        """A write failing with ENOSPC (/dev/full) raises OutputWriteError naming the file and the reason."""
        log = AnswerLog(Path("/dev/full"))
        log.open()
        with pytest.raises(OutputWriteError) as caught:
            log.append([_result(0, "S")])
        with pytest.raises(OutputWriteError):
            log.close()  # the buffered line fails again; the file is closed all the same
        assert caught.value.path == "/dev/full"
        assert str(caught.value).startswith("cannot write /dev/full: No space left on device. Nothing finished is lost")

    def test_a_device_holds_no_finished_answers(self) -> None:
        """finished_keys of a path that is not a regular file (a device) is empty, without reading it."""
        assert AnswerLog(Path("/dev/zero")).finished_keys() == set()


class TestResidentBound:
    def test_finalize_drops_the_mapped_log_every_window(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """40 equal lines, a 4-line window: the mapping is dropped 20 times over the 2 passes
        (keys, then digests), so at most 4 lines' pages stay resident; digests come back whole."""
        from dahl.results import _log

        path = tmp_path / "answers.jsonl"
        earlier = AnswerLog(path)
        earlier.open()
        earlier.append([_result(i, "SU") for i in range(10, 50)])
        earlier.close()
        line = path.stat().st_size // 40
        assert path.stat().st_size == 40 * line
        calls: list[int] = []
        release = _log._release
        monkeypatch.setattr(_log, "_RELEASE_BYTES", 4 * line)
        monkeypatch.setattr(_log, "_release", lambda mapped: (calls.append(1), release(mapped)))
        dropped, digests = _finalize(AnswerLog(path), _order(*range(10, 50), first=10))
        assert (dropped, len(calls)) == (0, 20)
        assert digests == [(f"a{i}", ("supported", "unsupported")) for i in range(10, 50)]
