"""JSON array files: a top-level [...] of dahl records, parsed one element at a time."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from dahl.errors import InputError
from dahl.formats import read_answers


def write(tmp_path: Path, text: str, name: str = "a.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestJsonArray:
    def test_pretty_printed_array(self, tmp_path: Path) -> None:
        """An indented array is detected as json and read element by element."""
        path = write(tmp_path, '[\n  {"question": "q1", "response": "r1", "model": "m"},\n  {"question": "q2", "response": "r2"}\n]\n')
        assert [(a.model, a.response) for a in read_answers(path)] == [("m", "r1"), ("unknown", "r2")]

    def test_mapping_and_nulls(self, tmp_path: Path) -> None:
        """Field mapping applies; a null value counts as absent (defaults apply)."""
        path = write(tmp_path, '[{"prompt": "q", "output": "r", "category": null}]')
        [answer] = list(read_answers(path, fields={"question": "prompt", "response": "output"}))
        assert (answer.question, answer.response, answer.category) == ("q", "r", "all")

    @pytest.mark.parametrize("text", ['{"a": [{"question": "q", "response": "r"}]}', '"text"', "  \n 7"])
    def test_not_an_array_is_refused(self, tmp_path: Path, text: str) -> None:
        """A top-level object (or scalar) is an InputError naming the file, even with on_error, not 0 records."""
        path = write(tmp_path, text)
        errors: list[InputError] = []
        with pytest.raises(InputError, match="expected a JSON array of records") as info:
            read_answers(path, "json", on_error=errors.append)
        assert (info.value.file, info.value.line, errors) == (str(path), None, [])

    def test_bad_element_is_skipped_and_named(self, tmp_path: Path) -> None:
        """A bad element is reported with its 1-based position as the line; the rest is read."""
        path = write(tmp_path, '[{"question": "q1", "response": ""}, 7, {"question": "q3", "response": "r3"}]')
        errors: list[InputError] = []
        answers = list(read_answers(path, on_error=errors.append))
        assert [a.question for a in answers] == ["q3"]
        assert [(e.line, e.field, e.message) for e in errors] == [
            (1, "response", "response is empty"),
            (2, None, "expected a JSON object, got int"),
        ]

    def test_malformed_json_ends_the_file(self, tmp_path: Path) -> None:
        """Broken JSON is reported at the element after the last good one, and reading stops there."""
        path = write(tmp_path, '[{"question": "q1", "response": "r1"}, {"question": }]')
        errors: list[InputError] = []
        answers = list(read_answers(path, "json", on_error=errors.append))
        assert [a.question for a in answers] == ["q1"]
        assert [(e.line, e.message.split(":")[0]) for e in errors] == [(2, "malformed JSON")]

    def test_gzip_array(self, tmp_path: Path) -> None:
        """A gzipped array (.json.gz) streams through the same reader."""
        path = tmp_path / "a.json.gz"
        path.write_bytes(gzip.compress(b'[{"question": "q", "response": "r"}]'))
        assert [a.response for a in read_answers(path)] == ["r"]

    def test_raises_without_sink(self, tmp_path: Path) -> None:
        """Without on_error the first bad element raises."""
        path = write(tmp_path, '[{"question": "q1"}]')
        with pytest.raises(InputError, match="missing required field `response`"):
            list(read_answers(path))


class TestStreaming:
    def test_memory_is_one_element(self, tmp_path: Path) -> None:
        """Reading a 4 MB array keeps well under a tenth of it in Python memory at any time."""
        import json
        import tracemalloc

        path = tmp_path / "big.json"
        element = {"question": "q", "response": "r" * 200}
        path.write_text(json.dumps([element] * 20000), encoding="utf-8")
        size = path.stat().st_size
        tracemalloc.start()
        try:
            count = sum(1 for _ in read_answers(path))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert count == 20000
        assert peak < size / 10, (peak, size)
