"""Field mapping (--field question=prompt): every record reader reads dahl's fields from the file's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.config import load_fields
from dahl.errors import ConfigError, InputError
from dahl.formats import describe_input, read_answers
from dahl.formats._fields import check_fields, parse_field_options
from dahl.records import GivenClaim, Label


def write(tmp_path: Path, text: str, name: str = "a.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


FELM_LINE = (
    '{"index": "0", "prompt": "Which country has most plants?", "response": "The US. France too.",'
    ' "segmented_response": ["The US.", "France too."], "labels": [false, true]}\n'
)


class TestParseFieldOptions:
    def test_pairs(self) -> None:
        """Repeated TARGET=SOURCE options become one mapping; identity pairs are dropped."""
        assert parse_field_options(["question=prompt", "response = output", "id=id"]) == {
            "question": "prompt",
            "response": "output",
        }

    def test_unknown_target_is_named(self) -> None:
        """A target dahl does not have is a ConfigError naming it and listing the valid ones."""
        with pytest.raises(ConfigError, match=r"unknown field 'questoin' in the field mapping; valid fields: id, question"):
            parse_field_options(["questoin=prompt"])

    def test_missing_equals(self) -> None:
        """An option without '=' says what is expected."""
        with pytest.raises(ConfigError, match=r"--field 'prompt': expected TARGET=SOURCE"):
            parse_field_options(["prompt"])

    def test_one_source_twice(self) -> None:
        """Two targets read from one source are refused (a record cannot give one key twice)."""
        with pytest.raises(ConfigError, match="reads both 'question' and 'id' from 'prompt'"):
            check_fields({"question": "prompt", "id": "prompt"})


class TestJsonlMapping:
    def test_felm_as_shipped(self, tmp_path: Path) -> None:
        """A FELM line maps question, claims and their parallel labels with three --field options."""
        path = write(tmp_path, FELM_LINE)
        fields = {"question": "prompt", "claims": "segmented_response", "claim_labels": "labels"}
        [answer] = list(read_answers(path, fields=fields))
        assert answer.question == "Which country has most plants?"
        assert answer.claims == (
            GivenClaim(text="The US.", label=Label.UNSUPPORTED),
            GivenClaim(text="France too.", label=Label.SUPPORTED),
        )

    def test_unmapped_felm_names_the_field(self, tmp_path: Path) -> None:
        """Without the mapping the record is rejected naming the missing 'question' field."""
        path = write(tmp_path, FELM_LINE)
        with pytest.raises(InputError, match="missing required field `question`") as info:
            list(read_answers(path))
        assert (info.value.line, info.value.field) == (1, "question")

    def test_missing_source_is_named_as_in_file(self, tmp_path: Path) -> None:
        """A mapped source the line lacks is reported under the file's own name."""
        path = write(tmp_path, '{"question": "q", "response": "r"}\n')
        with pytest.raises(InputError, match="missing required field `prompt`") as info:
            list(read_answers(path, fields={"question": "prompt"}))
        assert info.value.field == "prompt"

    def test_mapped_source_wins_over_own_key(self, tmp_path: Path) -> None:
        """With question=prompt the line's own 'question' key is ignored."""
        path = write(tmp_path, '{"question": "old", "prompt": "new", "response": "r"}\n')
        assert next(read_answers(path, fields={"question": "prompt"})).question == "new"

    def test_claim_labels_length_mismatch(self, tmp_path: Path) -> None:
        """claim_labels of another length than claims is an InputError naming claim_labels."""
        path = write(tmp_path, '{"question": "q", "response": "r", "claims": ["a", "b"], "claim_labels": [true]}\n')
        with pytest.raises(InputError, match="claim_labels has 1 labels for 2 claims") as info:
            list(read_answers(path))
        assert info.value.field == "claim_labels"

    def test_bare_nan_is_named(self, tmp_path: Path) -> None:
        """FELM's line with "response": NaN is rejected saying NaN is not JSON, not just 'invalid character'."""
        path = write(tmp_path, '{"prompt": "q", "response": NaN}\n')
        with pytest.raises(InputError, match=r"invalid character \(byte 28\) \(a bare NaN or Infinity"):
            list(read_answers(path, "jsonl", fields={"question": "prompt"}))

    def test_fixed_format_refuses_fields(self, tmp_path: Path) -> None:
        """A FActScore file (fixed fields) with a mapping is a ConfigError, not silently ignored."""
        path = write(tmp_path, '{"input": "q", "output": "r", "topic": "T", "annotations": null}\n')
        with pytest.raises(ConfigError, match="fields applies to jsonl, csv, json, parquet, hf input"):
            read_answers(path, fields={"question": "prompt"})


class TestCsvMapping:
    def test_columns_renamed_before_checks(self, tmp_path: Path) -> None:
        """question=prompt and response=output rename CSV columns before the header checks."""
        path = write(tmp_path, "prompt,output,topic\nQ?,A.,t\n", "m.csv")
        [answer] = list(read_answers(path, fields={"question": "prompt", "response": "output"}))
        assert (answer.question, answer.response, answer.model, answer.meta) == ("Q?", "A.", "m", {"topic": "t"})

    def test_inspect_questions_only_csv(self, tmp_path: Path) -> None:
        """dahl inspect applies the mapping to a questions-only CSV: question=prompt, category=domain."""
        path = write(tmp_path, "prompt,domain\nWho?,wk\nWhat?,wk\nWho?,math\n", "q.csv")
        stats = describe_input(path, fields={"question": "prompt", "category": "domain"})
        assert (stats.rows, stats.unique_questions, stats.with_response, stats.categories) == (
            3, 2, 0, {"wk": 2, "math": 1})


class TestConfigFields:
    def test_toml_fields(self, tmp_path: Path) -> None:
        """fields = {question = "prompt"} in the TOML config file is read as a mapping."""
        path = write(tmp_path, 'fields = {question = "prompt"}\n[check]\nbase_url = "http://x"\nmodel = "m"\n', "c.toml")
        assert load_fields(path) == {"question": "prompt"}

    def test_toml_unknown_target(self, tmp_path: Path) -> None:
        """An unknown target in the TOML file is a ConfigError naming the file and the field."""
        path = write(tmp_path, "[fields]\nprompt = \"question\"\n", "c.toml")
        with pytest.raises(ConfigError, match=r"c\.toml: unknown field 'prompt'"):
            load_fields(path)
