"""Compressed JSON Lines (.gz, .zst) and binary files handed to a text reader."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from dahl.errors import ConfigError, InputError
from dahl.formats import read_answers

LINES = b'{"question": "q1", "response": "r1"}\n{"question": "q2", "response": "r2"}\n'


class TestCompressed:
    def test_gzip_jsonl(self, tmp_path: Path) -> None:
        """answers.jsonl.gz is decompressed as it streams, format detected inside."""
        path = tmp_path / "answers.jsonl.gz"
        path.write_bytes(gzip.compress(LINES))
        assert [a.response for a in read_answers(path)] == ["r1", "r2"]

    def test_zstd_jsonl(self, tmp_path: Path) -> None:
        """answers.jsonl.zst is decompressed as it streams."""
        path = tmp_path / "answers.jsonl.zst"
        path.write_bytes(zstandard.ZstdCompressor().compress(LINES))
        assert [a.response for a in read_answers(path, "jsonl")] == ["r1", "r2"]

    def test_gzip_csv(self, tmp_path: Path) -> None:
        """A gzipped CSV is read too; the model is the stem before the first suffix."""
        path = tmp_path / "m.csv.gz"
        path.write_bytes(gzip.compress(b"question,response\nQ?,A.\n"))
        assert [(a.model, a.response) for a in read_answers(path)] == [("m", "A.")]

    def test_truncated_gzip(self, tmp_path: Path) -> None:
        """A gzip file cut short is an InputError naming the file, after the lines that were whole."""
        path = tmp_path / "cut.jsonl.gz"
        data = gzip.compress(LINES * 200)
        path.write_bytes(data[: len(data) // 2])
        read: list[str] = []
        with pytest.raises(InputError, match=r"cut\.jsonl\.gz:\d+: compressed data is damaged or cut short"):
            for answer in read_answers(path, "jsonl"):
                read.append(answer.response)
        assert len(read) > 0

    def test_zstd_frames_in_sequence(self, tmp_path: Path) -> None:
        """Concatenated zstd frames (as zstd writes for appended files) read as one stream."""
        path = tmp_path / "two.jsonl.zst"
        compress = zstandard.ZstdCompressor().compress
        path.write_bytes(compress(LINES) + compress(LINES.replace(b"r1", b"r3").replace(b"r2", b"r4")))
        assert [a.response for a in read_answers(path, "jsonl")] == ["r1", "r2", "r3", "r4"]

    @pytest.mark.parametrize("fmt", ["auto", "jsonl", "json"])
    @pytest.mark.parametrize(
        ("name", "damage", "reason"),
        [
            ("cut.jsonl.gz", lambda data: data[: len(data) // 2], "end-of-stream marker"),
            ("bad.jsonl.gz", lambda data: data[:20] + bytes(b ^ 0x55 for b in data[20:40]) + data[40:],
             "Error -3 while decompressing"),
            ("cut.jsonl.zst", lambda data: data[: len(data) // 2], "the stream ends inside a zstd frame"),
            ("cut2.jsonl.zst", lambda data: data + data[: len(data) // 2], "the stream ends inside a zstd frame"),
        ],
        ids=["gzip-cut", "gzip-damaged", "zstd-cut", "zstd-second-frame-cut"],
    )
    def test_damage_names_file_and_offsets(self, tmp_path: Path, name: str, damage: Callable[[bytes], bytes],
                                           reason: str, fmt: str) -> None:
        """Cut or damaged compressed data, small enough to be met by format detection, is an InputError
        naming the file and the decompressed and compressed offsets, whichever reader meets it."""
        text = LINES if fmt != "json" else b"[" + LINES.strip().replace(b"\n", b",") + b"]"
        compress = gzip.compress if name.endswith(".gz") else zstandard.ZstdCompressor().compress
        path = tmp_path / name
        path.write_bytes(damage(compress(text)))
        with pytest.raises(InputError, match=r"compressed data is damaged or cut short after decompressed byte "
                                             rf"[\d,]+ \(compressed byte [\d,]+ read\): .*{reason}") as info:
            list(read_answers(path, fmt))
        assert info.value.file == str(path)

    def test_suffix_without_compression(self, tmp_path: Path) -> None:
        """A .gz name on plain text is a ConfigError saying so."""
        path = tmp_path / "plain.jsonl.gz"
        path.write_bytes(LINES)
        with pytest.raises(ConfigError, match=r"plain\.jsonl\.gz is named \.gz but is not gzip-compressed"):
            list(read_answers(path, "jsonl"))


class TestBinaryInput:
    @pytest.mark.parametrize(
        ("data", "message"),
        [
            (gzip.compress(LINES), r"looks like a gzip file, not text; name it \.gz"),
            (zstandard.ZstdCompressor().compress(LINES), r"looks like a zstd file, not text; name it \.zst"),
            (b"PAR1\x15\x04\x15", r"looks like a Parquet file, not text; use --format parquet"),
            ('{"question": "q"}'.encode("utf-16"), r"looks like UTF-16 text, not UTF-8; save it as UTF-8"),
        ],
        ids=["gzip", "zstd", "parquet", "utf-16"],
    )
    def test_named_jsonl(self, tmp_path: Path, data: bytes, message: str) -> None:
        """A binary file named .jsonl gets what it is and how to read it, not a UTF-8 byte error."""
        path = tmp_path / "answers.jsonl"
        path.write_bytes(data)
        with pytest.raises(ConfigError, match=message):
            list(read_answers(path, "jsonl"))

    def test_auto_detect_says_it_too(self, tmp_path: Path) -> None:
        """Format detection of a gzip file without .gz names the format (no 'invalid UTF-8 byte 0x8b')."""
        path = tmp_path / "answers.jsonl"
        path.write_bytes(gzip.compress(LINES))
        with pytest.raises(ConfigError, match=r"answers\.jsonl looks like a gzip file"):
            read_answers(path)

    def test_parquet_detected_by_magic(self, tmp_path: Path) -> None:
        """A Parquet file under any name is routed to the Parquet reader by its magic bytes."""
        pq = pytest.importorskip("pyarrow.parquet")
        import pyarrow as pa

        path = tmp_path / "answers.data"
        pq.write_table(pa.table({"question": ["Q?"], "response": ["A."]}), path)
        assert [a.response for a in read_answers(path)] == ["A."]
