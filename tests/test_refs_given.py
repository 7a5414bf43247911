"""Specification of dahl.formats._refs: given reference sets, dahl's layout and FactRBench's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from dahl.errors import InputError
from dahl.formats._refs import RefIndex, read_refs, refs_sha256, write_refs
from dahl.records import FactSource, RefFact, RefSet, content_id
from dahl.refs._given import convert_given


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def factrbench_row(question: str, facts: dict[str, list[str]], *, as_string: bool = True) -> dict[str, Any]:
    """A row in FactRBench's released layout (reference_fact_set is a JSON string in the release)."""
    return {"question": question, "reference_fact_set": json.dumps(facts) if as_string else facts}


LLAMA = {
    "gpt4o": ["The LLaMA model was developed by Meta.", "LLaMA 2 allows commercial use."],
    "Claude": ["LLaMA 2 allows  commercial use.", "Licences differ by version."],
    "gemini": ["The LLaMA model was developed by Meta.", "LLaMA 2 allows commercial use.", " "],
}


class TestDahlLayout:
    def test_ratings_support_and_sources_kept(self, tmp_path: Path) -> None:
        """Given facts keep their ratings, importance, support and source; a fact without id gets its position."""
        path = write_lines(tmp_path / "refs.jsonl", [{"question_id": "q1", "question": "Q?", "facts": [
            {"id": "a", "text": "A  b.", "relevance": 4, "salience": 5, "importance": 0.875, "support": 2,
             "source": {"doc_id": "d1", "span": [0, 4]}},
            {"text": "C d."},
        ]}])
        (ref_set,) = read_refs(path)
        assert ref_set.facts == (
            RefFact(id="a", text="A b.", source=FactSource(doc_id="d1", span=(0, 4)), relevance=4, salience=5,
                    importance=0.875, support=2),
            RefFact(id="2", text="C d."),
        )

    def test_question_text_gives_the_id(self, tmp_path: Path) -> None:
        """A set without question_id gets content_id(question), which RefIndex finds from an answer's question."""
        path = write_lines(tmp_path / "refs.jsonl", [{"question": "Who is  X?", "facts": []}])
        sets = list(read_refs(path))
        assert sets[0].question_id == content_id("Who is X?")
        assert RefIndex(sets).find("other", "Who is X?") is sets[0]

    @pytest.mark.parametrize(
        ("row", "message", "field"),
        [
            ({"question_id": "q", "facts": [{"text": " "}]}, "empty text", "$.facts[0].text"),
            ({"question_id": "q", "facts": [{"text": "x", "salience": 6}]}, "1-5 rating", "$.facts[0].salience"),
            ({"question_id": "q", "facts": [{"text": 3}]}, "Expected `str`", "$.facts[0].text"),
            ({"facts": []}, "needs question_id or question", "question_id"),
            ({"question_id": "q", "facts": [{"text": "x", "importance": -0.5}]}, "importance must be",
             "$.facts[0].importance"),
            ({"question_id": "q", "facts": [{"id": "1", "text": "x"}, {"id": 1, "text": "y"}]}, "duplicate fact id",
             "$.facts[1].id"),
            ({"question_id": "q", "facts": [{"text": "x", "relevance": 1}]}, "relevance without salience",
             "$.facts[0].salience"),
            ({"question_id": "q", "facts": [{"text": "x", "importance": 7}]}, r"importance must be in \[0, 1\], got 7",
             "$.facts[0].importance"),
            ('{"question_id": "q", "facts": [{"text": "x"}], "meta": {"a": ' + "[" * 1000 + "]" * 1000 + "}}",
             "nested too deeply", None),
        ],
        ids=["empty-text", "rating-range", "wrong-type", "no-question", "negative-importance", "duplicate-id",
             "one-rating", "importance-above-1", "nested-1000-deep"],
    )
    def test_errors_name_file_line_field(self, tmp_path: Path, row: dict[str, Any] | str, message: str,
                                         field: str | None) -> None:
        """A bad set on line 2 is an InputError naming the file, line 2 and the field."""
        path = write_lines(tmp_path / "refs.jsonl", [{"question_id": "ok", "facts": []}, row])
        with pytest.raises(InputError, match=message) as info:
            list(read_refs(path))
        assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, field)

    def test_utf8_bom_and_crlf_are_read(self, tmp_path: Path) -> None:
        """A file saved with a UTF-8 byte-order mark and CRLF line ends reads like the plain one, as answers do."""
        rows = [{"question_id": "q", "facts": [{"text": "A."}]}, {"question_id": "r", "facts": [{"text": "B."}]}]
        plain = write_lines(tmp_path / "plain.jsonl", rows)
        marked = tmp_path / "bom.jsonl"
        marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))
        assert list(read_refs(marked)) == list(read_refs(plain))

    def test_round_trip_and_sha256(self, tmp_path: Path) -> None:
        """write_refs then read_refs gives the same sets; refs_sha256 is the file's SHA-256."""
        sets = [RefSet(question_id="q", question="Q?", facts=(RefFact(id="1", text="A.", support=3),)),
                RefSet(question_id="e", question="E?")]
        path = tmp_path / "refs.jsonl"
        assert write_refs(path, sets) == 2
        assert list(read_refs(path)) == sets
        assert refs_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


class TestFactRBenchLayout:
    def test_union_of_sources(self, tmp_path: Path) -> None:
        """A FactRBench row becomes the union of its sources' facts, support = sources stating each fact."""
        path = write_lines(tmp_path / "factrbench.jsonl", [factrbench_row("What licensing terms cover LLaMA?", LLAMA)])
        (ref_set,) = read_refs(path)
        assert ref_set.question_id == content_id("What licensing terms cover LLaMA?")
        assert [(f.id, f.text, f.support, f.source) for f in ref_set.facts] == [
            ("1", "The LLaMA model was developed by Meta.", 2, FactSource(answer_id="gpt4o")),
            ("2", "LLaMA 2 allows commercial use.", 3, FactSource(answer_id="gpt4o")),
            ("3", "Licences differ by version.", 1, FactSource(answer_id="Claude")),
        ]
        assert ref_set.meta == {"layout": "factrbench", "sources": {"gpt4o": 2, "Claude": 2, "gemini": 3}}

    def test_object_or_string(self, tmp_path: Path) -> None:
        """reference_fact_set as an object converts the same as the release's JSON string."""
        as_string = write_lines(tmp_path / "s.jsonl", [factrbench_row("Q?", LLAMA)])
        as_object = write_lines(tmp_path / "o.jsonl", [factrbench_row("Q?", LLAMA, as_string=False)])
        assert list(read_refs(as_string)) == list(read_refs(as_object))

    def test_question_id_kept(self, tmp_path: Path) -> None:
        """A row's own question_id is kept."""
        row = {**factrbench_row("Q?", {"m": ["A."]}), "question_id": "fb-7"}
        (ref_set,) = read_refs(write_lines(tmp_path / "f.jsonl", [row]))
        assert ref_set.question_id == "fb-7"

    @pytest.mark.parametrize(
        ("row", "message", "field"),
        [
            ({"question": "", "reference_fact_set": "{}"}, "non-empty question", "question"),
            ({"question": "Q?", "reference_fact_set": "{not json"}, "malformed JSON", "reference_fact_set"),
            ({"question": "Q?", "reference_fact_set": "[1]"}, "object of fact lists", "reference_fact_set"),
            ({"question": "Q?", "reference_fact_set": {"m": "A."}}, "list of facts", "reference_fact_set.m"),
            ({"question": "Q?", "reference_fact_set": {"m": ["A.", 5]}}, "must be a string", "reference_fact_set.m[1]"),
            ({"question_id": "q", "facts": []}, "no reference_fact_set", "reference_fact_set"),
            ({"question": "Q?", "reference_fact_set": "[" * 1000 + "]" * 1000}, "nested too deeply",
             "reference_fact_set"),
            ('{"question": "Q?", "reference_fact_set": {}, "x": ' + "[" * 1000 + "]" * 1000 + "}", "nested too deeply",
             None),
        ],
        ids=["no-question", "bad-json", "not-object", "not-list", "not-string", "dahl-line-in-factrbench-file",
             "cell-nested-1000-deep", "row-nested-1000-deep"],
    )
    def test_errors_name_file_line_field(self, tmp_path: Path, row: dict[str, Any] | str, message: str,
                                         field: str | None) -> None:
        """A bad row on line 2 of a FactRBench file is an InputError naming the file, line 2 and the field."""
        path = write_lines(tmp_path / "f.jsonl", [factrbench_row("Q?", {"m": ["A."]}), row])
        with pytest.raises(InputError, match=message) as info:
            list(read_refs(path))
        assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, field)

    def test_layout_detected_per_file(self, tmp_path: Path) -> None:
        """A dahl file and a FactRBench file are each read in their own layout."""
        dahl = write_lines(tmp_path / "d.jsonl", [{"question_id": "q", "facts": [{"text": "A."}]}])
        fact = write_lines(tmp_path / "f.jsonl", [factrbench_row("Q?", {"m": ["A."]})])
        assert [s.meta for s in read_refs(dahl)] == [{}]
        assert [s.meta["layout"] for s in read_refs(fact)] == ["factrbench"]

    def test_parquet(self, tmp_path: Path) -> None:
        """The release's Parquet file converts row by row as its JSONL lines do; a row error names its row."""
        pq = pytest.importorskip("pyarrow.parquet")
        pa = pytest.importorskip("pyarrow")
        rows = [factrbench_row("Q1?", LLAMA), factrbench_row("Q2?", {"u1": ["B."]})]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "factbench.parquet")
        as_jsonl = write_lines(tmp_path / "f.jsonl", rows)
        assert list(read_refs(tmp_path / "factbench.parquet")) == list(read_refs(as_jsonl))
        pq.write_table(pa.Table.from_pylist([{"question": "Q?", "other": "x"}]), tmp_path / "bad.parquet")
        with pytest.raises(InputError) as info:
            list(read_refs(tmp_path / "bad.parquet"))
        assert (info.value.line, info.value.field) == (1, "reference_fact_set")


class TestConvertGiven:
    def test_factrbench_to_dahl_layout(self, tmp_path: Path) -> None:
        """A FactRBench file converts to refs.jsonl that reads back as the same sets, in dahl's layout."""
        src = write_lines(tmp_path / "f.jsonl", [factrbench_row("Q1?", LLAMA), factrbench_row("Q2?", {"m": ["B."]})])
        out = tmp_path / "refs.jsonl"
        assert convert_given(src, out) == 2
        assert list(read_refs(out)) == list(read_refs(src))
        first = json.loads(out.read_text().splitlines()[0])
        assert "reference_fact_set" not in first and len(first["facts"]) == 3

    def test_duplicate_question_refused(self, tmp_path: Path) -> None:
        """Two sets for one question are an input error naming both, and nothing is written."""
        rows = [factrbench_row("Q?", {"m": ["A."]}), factrbench_row("Q?", {"n": ["B."]})]
        src = write_lines(tmp_path / "f.jsonl", rows)
        with pytest.raises(InputError, match="sets 1 and 2 are both for question"):
            convert_given(src, tmp_path / "refs.jsonl")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl"]  # no output, no temp file

    def test_not_over_itself(self, tmp_path: Path) -> None:
        """Converting a file onto itself is refused."""
        src = write_lines(tmp_path / "refs.jsonl", [{"question_id": "q", "facts": []}])
        with pytest.raises(InputError, match="overwrite"):
            convert_given(src, src)
