"""h1's input checks on h2's readers: needs (given claims, replay labels) in every format, and
compressed or binary bytes read once from a stream."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from dahl.errors import ConfigError, InputError
from dahl.formats import Needs, read_answers
from dahl.formats._lines import STDIN
from tests.formats.test_formats_arrow import save_to_disk_folder
from tests.formats.test_formats_lines import FakeStdin, feed_fifo

CLAIMED = {"question": "Q1?", "response": "R1.", "claims": [{"text": "c1", "label": "supported"}]}
BARE = {"question": "Q2?", "response": "R2."}
UNLABELED = {"question": "Q3?", "response": "R3.", "claims": [{"text": "c3", "label": "supported"}, {"text": "c4"}]}
ROWS = [CLAIMED, BARE, UNLABELED]


def write_json_array(tmp_path: Path) -> Path:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(ROWS, indent=1))
    return path


def write_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "a.parquet"
    pq.write_table(pa.Table.from_pylist([{"claims": None, **row} for row in ROWS]), path)
    return path


def write_hf(tmp_path: Path) -> Path:
    return save_to_disk_folder(tmp_path / "saved", {"train": [{"claims": None, **row} for row in ROWS]})


def write_jsonl_gz(tmp_path: Path) -> Path:
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(row) + "\n" for row in ROWS).encode()))
    return path


def write_veriscore(tmp_path: Path) -> Path:
    """Line 1 verified, line 2 with claims not yet verified (no labels)."""
    path = tmp_path / "vs.jsonl"
    lines = [
        {"question": "Q1?", "response": "R1.", "model": "m",
         "claim_verification_result": [{"claim": "c1", "verification_result": "supported"}]},
        {"question": "Q2?", "response": "R2.", "model": "m", "all_claim_lst": ["c2"]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


WRITERS = {"json": write_json_array, "parquet": write_parquet, "hf": write_hf, "jsonl.gz": write_jsonl_gz}


class TestNeedsInEveryFormat:
    @pytest.mark.parametrize("kind", list(WRITERS))
    def test_claims_and_labels(self, tmp_path: Path, kind: str) -> None:
        """--splitter given and --checker replay: record 2 (no claims) and record 3 (claim 2 unlabeled)
        are bad records named by their element, row or line number, whatever the format."""
        path = WRITERS[kind](tmp_path)
        errors: list[InputError] = []
        answers = list(read_answers(path, on_error=errors.append, needs=Needs.CLAIMS | Needs.LABELS))
        assert [a.question for a in answers] == ["Q1?"]
        assert [(e.line, e.field) for e in errors] == [(2, "claims"), (3, "$.claims[1].label")]

    @pytest.mark.parametrize("kind", list(WRITERS))
    def test_stream_lines_are_the_records(self, tmp_path: Path, kind: str) -> None:
        """The AnswerStream of every reader numbers answers by element, row or line (what duplicates cite)."""
        path = WRITERS[kind](tmp_path)
        assert [line for line, _answer in read_answers(path).pairs()] == [1, 2, 3]

    def test_veriscore_unverified_line_under_replay(self, tmp_path: Path) -> None:
        """A VeriScore line whose claims were never verified has no labels: a bad record under replay."""
        errors: list[InputError] = []
        answers = list(read_answers(write_veriscore(tmp_path), on_error=errors.append, needs=Needs.LABELS))
        assert [a.question for a in answers] == ["Q1?"]
        assert [(e.line, e.field) for e in errors] == [(2, "$.claims[0].label")]

    def test_deep_row_is_a_bad_record(self, tmp_path: Path) -> None:
        """A JSON array element nested 1,000 levels deep is a bad record (element 2), not a crash."""
        path = tmp_path / "deep.json"
        deep = '{"question":"Q?","response":"R.","meta":' + '{"a":' * 1000 + "1" + "}" * 1001
        path.write_text(f"[{json.dumps(CLAIMED)},{deep},{json.dumps(BARE)}]")
        errors: list[InputError] = []
        answers = list(read_answers(path, on_error=errors.append))
        assert [a.question for a in answers] == ["Q1?", "Q2?"]
        assert [(e.line, "nested too deeply" in e.message) for e in errors] == [(2, True)]


JSONL = b'{"id": "a", "question": "Q?", "response": "R."}\n{"id": "b", "question": "Q?", "response": "S."}\n'


class TestCompressedStreams:
    def test_gzip_on_standard_input(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``-`` given gzip bytes is decompressed from its peeked first bytes, read once."""
        monkeypatch.setattr("sys.stdin", FakeStdin(gzip.compress(JSONL)))
        assert [a.id for a in read_answers(STDIN)] == ["a", "b"]

    def test_zstd_through_a_fifo(self, tmp_path: Path) -> None:
        """A FIFO of zstd bytes is decompressed as it streams, opened once."""
        path = tmp_path / "pipe"
        thread = feed_fifo(path, zstandard.ZstdCompressor().compress(JSONL))
        answers = [a.id for a in read_answers(path)]
        thread.join()
        assert answers == ["a", "b"]

    def test_plain_fifo_loses_no_bytes(self, tmp_path: Path) -> None:
        """Peeking a plain FIFO's first bytes consumes nothing: its first record is read."""
        path = tmp_path / "pipe"
        thread = feed_fifo(path, JSONL)
        answers = [a.id for a in read_answers(path)]
        thread.join()
        assert answers == ["a", "b"]

    def test_parquet_on_standard_input(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Parquet bytes on stdin are named, with the fix, instead of an invalid UTF-8 error per line."""
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist([BARE]), buffer)
        monkeypatch.setattr("sys.stdin", FakeStdin(buffer.getvalue()))
        with pytest.raises(ConfigError, match=r"<stdin> looks like a Parquet file, not text; save it to a file"):
            list(read_answers(STDIN))

    def test_veriscore_on_standard_input(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """VeriScore output is JSON Lines: ``--format veriscore`` reads it from stdin, bad lines named <stdin>:N."""
        monkeypatch.setattr("sys.stdin", FakeStdin(write_veriscore(tmp_path).read_bytes()))
        errors: list[InputError] = []
        answers = list(read_answers(STDIN, "veriscore", on_error=errors.append, needs=Needs.LABELS))
        assert [(a.question, a.model) for a in answers] == [("Q1?", "m")]
        assert [(e.file, e.line) for e in errors] == [("<stdin>", 2)]

    @pytest.mark.parametrize("fmt", ["json", "parquet", "safe"])
    def test_whole_file_formats_refuse_a_stream(self, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
        """A format read in more than one pass, or not by lines, cannot come from standard input."""
        monkeypatch.setattr("sys.stdin", FakeStdin(b"[]"))
        with pytest.raises(ConfigError, match=rf"{fmt} input cannot be read from standard input or a pipe \(<stdin>\)"):
            read_answers(STDIN, fmt)
