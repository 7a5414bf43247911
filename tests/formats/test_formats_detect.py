"""Format detection and read_answers' up-front checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.errors import ConfigError, InputError
from dahl.formats import FORMATS, detect_format, read_answers
from dahl.formats._detect import SNIFF_LINES


def write(tmp_path: Path, data: str | bytes, name: str = "input.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


class TestDetectFormat:
    @pytest.mark.parametrize(
        ("first", "fmt"),
        [
            pytest.param("question,category\nQ,all\n", "csv", id="dahl-questions"),
            pytest.param("\ufeffid, question ,response\n", "csv", id="bom-and-spaces"),
            pytest.param('\n\n{"question": "q", "response": "r"}\n', "jsonl", id="jsonl-after-blanks"),
            pytest.param('{"input": "i", "output": "o", "topic": "t"}\n', "factscore", id="factscore"),
            pytest.param('{"annotations": null}\n', "factscore", id="annotations-only"),
        ],
    )
    def test_detects(self, tmp_path: Path, first: str, fmt: str) -> None:
        """The first non-blank line decides the format."""
        assert detect_format(write(tmp_path, first)) == fmt

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            pytest.param("", "the file is empty", id="empty"),
            pytest.param("\n  \n", "the file is empty", id="blank"),
            pytest.param('{"prompt": "p"}\n', "first JSON object has keys prompt", id="json-other"),
            pytest.param("{not json\n", "malformed JSON", id="bad-json"),
            pytest.param("prompt,answer\n", "neither a JSON object nor a CSV header", id="csv-no-question"),
            pytest.param(b"\xc3\x28\n", "invalid UTF-8", id="not-utf8"),
            pytest.param(b"\xff\xfe\n", "looks like UTF-16 text", id="utf-16-bom"),
        ],
    )
    def test_cannot_tell(self, tmp_path: Path, data: str | bytes, message: str) -> None:
        """An undetectable file raises ConfigError naming the file and the reason."""
        path = write(tmp_path, data)
        with pytest.raises(ConfigError, match=message) as info:
            detect_format(path)
        assert str(path) in str(info.value)

    def test_only_deep_lines(self, tmp_path: Path) -> None:
        """A file of one line nested 1,000 levels cannot be detected: ConfigError, not RecursionError."""
        path = write(tmp_path, '{"response": "r", "meta": ' + '{"a":' * 1000 + "1" + "}" * 1001 + "\n")
        with pytest.raises(ConfigError, match="nested too deeply"):
            detect_format(path)

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file raises ConfigError naming the path."""
        with pytest.raises(ConfigError, match="not found: .*nope.jsonl"):
            detect_format(tmp_path / "nope.jsonl")


GOOD_JSONL = '{"question": "q", "response": "r"}\n'
GOOD_FACTSCORE = '{"input": "i", "output": "o", "topic": "t", "annotations": null}\n'


class TestSniffPastBadRecords:
    @pytest.mark.parametrize(
        ("bad", "good", "fmt"),
        [
            pytest.param("{not json\n", GOOD_JSONL, "jsonl", id="malformed-json"),
            pytest.param(b'{"question": "\xff", "response": "r"}\n', GOOD_JSONL, "jsonl", id="invalid-utf8"),
            pytest.param('{"question": "q"}\n', GOOD_JSONL, "jsonl", id="missing-response"),
            pytest.param('{"response": "r", "m": ' + "[" * 1000 + "]" * 1000 + "}\n", GOOD_JSONL, "jsonl",
                         id="nested-too-deeply"),
            pytest.param('{"input": "i", "outp\n', GOOD_FACTSCORE, "factscore", id="factscore-truncated"),
        ],
    )
    def test_bad_first_record_is_skipped(self, tmp_path: Path, bad: str | bytes, good: str, fmt: str) -> None:
        """A bad line 1 does not decide the format: line 2 does, and line 1 is a bad record (line 1)."""
        head = bad if isinstance(bad, bytes) else bad.encode()
        path = write(tmp_path, b"\n" + head + good.encode() + good.encode(), "M.jsonl")
        assert detect_format(path) == fmt
        errors: list[InputError] = []
        assert len(list(read_answers(path, on_error=errors.append))) == 2
        assert [(e.file, e.line) for e in errors] == [(str(path), 2)]

    def test_gives_up_after_the_bound(self, tmp_path: Path) -> None:
        """Past SNIFF_LINES bad lines the format is not guessed; the error names the first line's problem."""
        path = write(tmp_path, "{bad\n" * SNIFF_LINES + GOOD_JSONL)
        with pytest.raises(ConfigError, match=rf"malformed JSON.*no good record in the first {SNIFF_LINES} lines"):
            detect_format(path)

    def test_good_record_at_the_bound(self, tmp_path: Path) -> None:
        """A good record on line SNIFF_LINES still decides the format."""
        path = write(tmp_path, "{bad\n" * (SNIFF_LINES - 1) + GOOD_JSONL)
        assert detect_format(path) == "jsonl"


class TestOversizedFirstLine:
    def test_long_quoted_first_line_is_a_config_error(self, tmp_path: Path) -> None:
        """A first line with a quoted field over csv's 128 KiB field limit is no format, not a csv.Error."""
        path = tmp_path / "long.txt"
        path.write_text('"' + "x" * 200_000 + "\n")
        with pytest.raises(ConfigError, match=f"cannot detect the format of {path}: first line is neither"):
            detect_format(path)


class TestReadAnswersChecks:
    def test_formats_tuple(self) -> None:
        """The public format names, in order."""
        assert FORMATS == ("jsonl", "csv", "factscore", "json", "parquet", "hf", "safe", "veriscore")

    def test_unknown_format_lists_valid(self, tmp_path: Path) -> None:
        """An unknown format raises ConfigError at call time listing auto and every format."""
        path = write(tmp_path, '{"question": "q", "response": "r"}\n')
        with pytest.raises(ConfigError, match="'xml'; valid formats: auto, jsonl, csv, factscore"):
            read_answers(path, "xml")

    def test_missing_file_at_call_time(self, tmp_path: Path) -> None:
        """A missing file raises ConfigError when read_answers is called, before iteration."""
        with pytest.raises(ConfigError, match="nope.csv"):
            read_answers(tmp_path / "nope.csv", "csv")

    def test_auto_reads_each_format(self, tmp_path: Path) -> None:
        """fmt="auto" routes each file to its reader."""
        jsonl = write(tmp_path, '{"question": "q", "response": "r"}\n', "a.jsonl")
        table = write(tmp_path, "question,response\nq,r\n", "b.csv")
        fs = write(tmp_path, '{"input": "q", "output": "r", "topic": "T", "annotations": null}\n', "M.jsonl")
        models = [next(read_answers(p)).model for p in (jsonl, table, fs)]
        assert models == ["unknown", "b", "M"]

    def test_response_column_not_for_fixed_formats(self, tmp_path: Path) -> None:
        """response_column with a FActScore file is a ConfigError, not silently ignored."""
        path = write(tmp_path, '{"input": "q", "output": "r", "topic": "T", "annotations": null}\n')
        with pytest.raises(ConfigError, match="response_column applies to jsonl, csv, json, parquet, hf input"):
            read_answers(path, response_column="answer")
