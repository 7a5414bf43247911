"""dahl JSONL reader: happy path, defaults, label spellings and every error case."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.errors import InputError
from dahl.formats import read_answers
from dahl.errors import ConfigError
from dahl.formats._jsonl import parse_label
from dahl.formats._needs import Needs
from dahl.records import Answer, GivenClaim, Label, content_id


def write(tmp_path: Path, text: str | bytes, name: str = "answers.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


GOOD = (
    '{"id": "a1", "question": "What is BRCA1?", "response": "A tumour suppressor gene.", '
    '"model": "m1", "category": "genetics", "meta": {"run": 3}}\n'
    "\n"
    '{"question": "Q2?", "response": "R2.", '
    '"claims": [{"text": "c0", "label": "S"}, {"text": "c1", "label": "ns"}, '
    '{"text": "c2", "label": "IR"}, {"text": "c3", "label": true}, '
    '{"text": "c4", "label": "False"}, {"text": "c5"}, {"text": "c6", "label": "Unknown"}]}\n'
)


class TestReadJsonl:
    def test_reads_every_field(self, tmp_path: Path) -> None:
        """A full record maps field by field onto Answer."""
        answers = list(read_answers(write(tmp_path, GOOD), "jsonl"))
        assert answers[0] == Answer(
            id="a1",
            question="What is BRCA1?",
            response="A tumour suppressor gene.",
            model="m1",
            category="genetics",
            meta={"run": 3},
        )

    def test_defaults_and_content_id(self, tmp_path: Path) -> None:
        """Missing id/model/category default to content_id(model, question, response), unknown, all."""
        second = list(read_answers(write(tmp_path, GOOD), "jsonl"))[1]
        assert second.id == content_id("unknown", "Q2?", "R2.")
        assert (second.model, second.category, second.abstained) == ("unknown", "all", False)

    def test_blank_lines_skipped(self, tmp_path: Path) -> None:
        """Three lines with one blank give two answers."""
        assert len(list(read_answers(write(tmp_path, GOOD), "jsonl"))) == 2

    def test_claim_label_spellings(self, tmp_path: Path) -> None:
        """S/NS/IR, JSON booleans, "False" and "Unknown" map to Labels; a missing label stays None."""
        claims = list(read_answers(write(tmp_path, GOOD), "jsonl"))[1].claims
        assert claims == (
            GivenClaim(text="c0", label=Label.SUPPORTED),
            GivenClaim(text="c1", label=Label.UNSUPPORTED),
            GivenClaim(text="c2", label=Label.IRRELEVANT),
            GivenClaim(text="c3", label=Label.SUPPORTED),
            GivenClaim(text="c4", label=Label.UNSUPPORTED),
            GivenClaim(text="c5", label=None),
            GivenClaim(text="c6", label=Label.UNKNOWN),
        )

    def test_abstained_may_have_empty_response(self, tmp_path: Path) -> None:
        """An answer marked abstained is accepted with an empty response."""
        path = write(tmp_path, '{"question": "q", "response": "", "abstained": true}\n')
        (answer,) = read_answers(path, "jsonl")
        assert answer.abstained and answer.response == ""

    def test_is_lazy(self, tmp_path: Path) -> None:
        """Records after the first are not read until asked for: a bad line 2 does not stop line 1."""
        path = write(tmp_path, '{"question": "q", "response": "r"}\n{oops\n')
        answers = read_answers(path, "jsonl")
        assert next(answers).question == "q"
        with pytest.raises(InputError):
            next(answers)


class TestJsonlErrors:
    @pytest.mark.parametrize(
        ("line2", "field"),
        [
            pytest.param('{"response": "r"}', "question", id="missing-question"),
            pytest.param('{"question": "q"}', "response", id="missing-response"),
            pytest.param('{"question": "q", "response": "  \\n "}', "response", id="empty-response"),
            pytest.param('{"question": " ", "response": "r"}', "question", id="empty-question"),
            pytest.param('{"question": 7, "response": "r"}', "question", id="question-not-str"),
            pytest.param(
                '{"question": "q", "response": "r", "claims": [{"text": "a"}, {"text": "b"}, '
                '{"text": "c", "label": "maybe"}]}',
                "$.claims[2].label",
                id="bad-label",
            ),
            pytest.param(
                '{"question": "q", "response": "r", "claims": [{"text": "a", "label": 3}]}',
                "$.claims[0].label",
                id="label-wrong-type",
            ),
            pytest.param(
                '{"question": "q", "response": "r", "claims": [{"label": "S"}]}',
                "$.claims[0].text",
                id="claim-missing-text",
            ),
            pytest.param(
                '{"question": "q", "response": "r", "meta": [1]}', "meta", id="meta-not-object"
            ),
        ],
    )
    def test_bad_field_named(self, tmp_path: Path, line2: str, field: str) -> None:
        """A bad record raises InputError naming file, line 2 and the field."""
        path = write(tmp_path, '{"question": "q", "response": "r"}\n' + line2 + "\n")
        with pytest.raises(InputError) as info:
            list(read_answers(path, "jsonl"))
        assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, field)

    def test_malformed_json_names_line(self, tmp_path: Path) -> None:
        """Malformed JSON on line 3 raises InputError whose message says line 3."""
        path = write(tmp_path, '{"question": "q", "response": "r"}\n\n{"question": "q",\n')
        with pytest.raises(InputError, match=r"answers\.jsonl:3: malformed JSON") as info:
            list(read_answers(path, "jsonl"))
        assert info.value.line == 3

    def test_invalid_utf8_names_line(self, tmp_path: Path) -> None:
        """An invalid UTF-8 byte on line 3 raises InputError for line 3."""
        ok = b'{"question": "q", "response": "r"}\n'
        path = write(tmp_path, ok + ok + b'{"question": "q\xff", "response": "r"}\n' + ok)
        with pytest.raises(InputError, match="invalid UTF-8 byte 0xff") as info:
            list(read_answers(path, "jsonl"))
        assert info.value.line == 3

    def test_on_error_skips_and_continues(self, tmp_path: Path) -> None:
        """With on_error, bad lines 2 and 3 are reported and lines 1 and 4 still read."""
        ok = b'{"question": "q", "response": "r"}\n'
        path = write(tmp_path, ok + b"{bad\n" + b'{"question": "\xff", "response": "r"}\n' + ok)
        errors: list[InputError] = []
        answers = list(read_answers(path, "jsonl", on_error=errors.append))
        assert len(answers) == 2
        assert [e.line for e in errors] == [2, 3]


def deep_line(depth: int = 1000) -> str:
    """A record whose ``meta`` nests ``depth`` objects (issue 15 §1.1)."""
    return '{"question":"Q?","response":"A.","meta":' + '{"a":' * depth + "1" + "}" * (depth + 1)


class TestDeepNesting:
    def test_deep_line_is_a_bad_record(self, tmp_path: Path) -> None:
        """A line nested 1,000 levels is skipped as "nested too deeply" (file, line 2); lines 1 and 3 are read."""
        ok = '{"question": "q", "response": "r"}\n'
        path = write(tmp_path, ok + deep_line() + "\n" + ok.replace('"q"', '"q3"'))
        errors: list[InputError] = []
        answers = list(read_answers(path, "jsonl", on_error=errors.append))
        assert [a.question for a in answers] == ["q", "q3"]
        assert [(e.file, e.line) for e in errors] == [(str(path), 2)]
        assert "nested too deeply" in errors[0].message

    def test_deep_line_raises_input_error_without_sink(self, tmp_path: Path) -> None:
        """Without on_error the deep line raises InputError, not RecursionError."""
        path = write(tmp_path, deep_line() + "\n")
        with pytest.raises(InputError, match=r"answers\.jsonl:1: nested too deeply"):
            list(read_answers(path, "jsonl"))

    def test_deep_factscore_line_is_a_bad_record(self, tmp_path: Path) -> None:
        """The FActScore reader shares the record loop: a deep line is a bad record there too."""
        ok = '{"input": "i", "output": "o", "topic": "t"}\n'
        deep = '{"input": "i", "output": "o", "topic": "u", "x": ' + "[" * 1000 + "]" * 1000 + "}\n"
        path = write(tmp_path, ok + deep, name="M.jsonl")
        errors: list[InputError] = []
        assert len(list(read_answers(path, "factscore", on_error=errors.append))) == 1
        assert [e.line for e in errors] == [2]


class TestNeeds:
    OK = '{"question": "q", "response": "r", "claims": [{"text": "c", "label": "S"}]}\n'

    def test_claims_missing_is_a_bad_record(self, tmp_path: Path) -> None:
        """With Needs.CLAIMS an answer without claims is a bad record (file, line 2, field claims)."""
        path = write(tmp_path, self.OK + '{"question": "q2", "response": "r"}\n' + self.OK)
        errors: list[InputError] = []
        answers = list(read_answers(path, "jsonl", needs=Needs.CLAIMS, on_error=errors.append))
        assert len(answers) == 2
        assert [(e.file, e.line, e.field) for e in errors] == [(str(path), 2, "claims")]
        assert "--splitter given needs claims" in errors[0].message

    def test_abstained_or_empty_claims_are_kept(self, tmp_path: Path) -> None:
        """An abstained answer needs no claims, and an empty claims list is a valid (claimless) answer."""
        path = write(tmp_path, '{"question": "q", "response": "", "abstained": true}\n'
                               '{"question": "q", "response": "r", "claims": []}\n')
        assert len(list(read_answers(path, "jsonl", needs=Needs.CLAIMS))) == 2

    def test_label_missing_is_a_bad_record(self, tmp_path: Path) -> None:
        """With Needs.LABELS a claim without a label is a bad record naming $.claims[2].label."""
        line = ('{"question": "q", "response": "r", "claims": [{"text": "a", "label": "S"}, '
                '{"text": "b", "label": "unknown"}, {"text": "c"}]}\n')
        path = write(tmp_path, self.OK + line)
        errors: list[InputError] = []
        answers = list(read_answers(path, "jsonl", needs=Needs.CLAIMS | Needs.LABELS, on_error=errors.append))
        assert len(answers) == 1
        assert [(e.line, e.field) for e in errors] == [(2, "$.claims[2].label")]
        assert "--checker replay needs a label" in errors[0].message

    def test_nothing_needed_by_default(self, tmp_path: Path) -> None:
        """Without needs, answers without claims or labels are read as before."""
        path = write(tmp_path, '{"question": "q", "response": "r", "claims": [{"text": "c"}]}\n'
                               '{"question": "q", "response": "r"}\n')
        assert len(list(read_answers(path, "jsonl"))) == 2

    def test_csv_cannot_give_claims(self, tmp_path: Path) -> None:
        """A CSV carries no claims: Needs.CLAIMS on csv input is a ConfigError when read_answers is called."""
        path = write(tmp_path, "question,response\nq,r\n", name="a.csv")
        with pytest.raises(ConfigError, match="csv input carries no claims"):
            read_answers(path, needs=Needs.CLAIMS)


class TestParseLabel:
    @pytest.mark.parametrize(
        ("value", "label"),
        [
            ("supported", Label.SUPPORTED),
            (" NS ", Label.UNSUPPORTED),
            ("Irrelevant", Label.IRRELEVANT),
            ("TRUE", Label.SUPPORTED),
            (False, Label.UNSUPPORTED),
            (None, None),
        ],
    )
    def test_spellings(self, value: bool | str | None, label: Label | None) -> None:
        """Each accepted spelling maps to its Label."""
        assert parse_label(value) is label

    def test_error_label_rejected(self) -> None:
        """"error" is a pipeline outcome, not an input label."""
        with pytest.raises(ValueError, match="unknown label 'error'"):
            parse_label("error")
