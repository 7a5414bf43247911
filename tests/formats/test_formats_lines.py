"""What an input path may be: a file, standard input (``-``), a FIFO; a directory is named as such."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from dahl.errors import ConfigError, InputError
from dahl.formats import read_answers
from dahl.formats._lines import STDIN, check_input_path

LINES = b'{"id": "a", "question": "Q?", "response": "R."}\n{bad\n{"id": "c", "question": "Q?", "response": "R."}\n'


class FakeStdin:
    """Stands in for sys.stdin: its bytes are in ``buffer``."""

    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def feed_fifo(path: Path, data: bytes) -> threading.Thread:
    """Make ``path`` a FIFO and write ``data`` into it from a thread (the open blocks until read)."""
    os.mkfifo(path)

    def write() -> None:
        with path.open("wb") as f:
            f.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


class TestCheckInputPath:
    def test_missing(self, tmp_path: Path) -> None:
        """A path that does not exist is "input file not found"."""
        with pytest.raises(ConfigError, match="input file not found: .*nope.jsonl"):
            check_input_path(tmp_path / "nope.jsonl")

    def test_directory_is_named_as_such(self, tmp_path: Path) -> None:
        """A directory gets its own message, which suggests passing the files in it."""
        with pytest.raises(ConfigError, match=rf"input path is a directory, not a file: {tmp_path}"):
            check_input_path(tmp_path)

    def test_directory_at_read_time(self, tmp_path: Path) -> None:
        """read_answers says the same for a directory."""
        with pytest.raises(ConfigError, match="is a directory"):
            read_answers(tmp_path)

    def test_stdin_and_fifo_are_accepted(self, tmp_path: Path) -> None:
        """``-`` and a FIFO are inputs (streams), read once."""
        os.mkfifo(tmp_path / "pipe")
        assert check_input_path(STDIN) == STDIN
        assert check_input_path(tmp_path / "pipe") == tmp_path / "pipe"


class TestStreams:
    def test_dash_reads_standard_input(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``-`` streams stdin as JSONL; a bad line is named <stdin>:2."""
        monkeypatch.setattr("sys.stdin", FakeStdin(LINES))
        errors: list[InputError] = []
        answers = list(read_answers(STDIN, on_error=errors.append))
        assert [a.id for a in answers] == ["a", "c"]
        assert [(e.file, e.line) for e in errors] == [("<stdin>", 2)]

    def test_fifo_is_read_as_a_stream(self, tmp_path: Path) -> None:
        """A FIFO is read once, as JSONL, with no format sniffing that would eat its first lines."""
        path = tmp_path / "pipe"
        thread = feed_fifo(path, LINES)
        errors: list[InputError] = []
        answers = list(read_answers(path, on_error=errors.append))
        thread.join()
        assert [a.id for a in answers] == ["a", "c"]
        assert [e.line for e in errors] == [2]

    def test_csv_cannot_come_from_a_stream(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A csv header is read before its rows (two passes): csv from a stream is a ConfigError."""
        monkeypatch.setattr("sys.stdin", FakeStdin(b"question,response\nq,r\n"))
        with pytest.raises(ConfigError, match="csv input cannot be read from standard input"):
            read_answers(STDIN, "csv")
