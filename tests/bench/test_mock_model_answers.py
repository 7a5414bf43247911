"""The mock's per-model answer oracle: ``--oracle-answers MODEL=FILE`` beside a plain FILE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.mock_generate import AnswerOracle, generated_text
from bench.mockserver import config_from_args
from dahl.errors import ConfigError


def _answers(path: Path, rows: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"question": q, "response": r}) + "\n" for q, r in rows.items()),
                    encoding="utf-8")
    return path


class TestOracleAnswersFlag:
    def test_model_files_and_one_file_for_every_model(self, tmp_path: Path) -> None:
        """MODEL=FILE values name a model; the one plain FILE answers every model."""
        config = config_from_args(["--port", "0", "--oracle-answers", "truthful=t.jsonl", "--oracle-answers",
                                   "all.jsonl", "--oracle-answers", "hallucinating=h.jsonl"])
        assert config.oracle_answers == Path("all.jsonl")
        assert config.model_answers == (("truthful", Path("t.jsonl")), ("hallucinating", Path("h.jsonl")))

    def test_existing_file_with_equals_sign_is_a_plain_file(self, tmp_path: Path) -> None:
        """A value that is an existing file is that file, even with '=' in its name."""
        path = _answers(tmp_path / "run=1.jsonl", {"Q?": "A."})
        config = config_from_args(["--port", "0", "--oracle-answers", str(path)])
        assert (config.oracle_answers, config.model_answers) == (path, ())

    def test_two_plain_files_are_refused(self) -> None:
        """Two files for every model: a ConfigError saying to name the others' models."""
        with pytest.raises(ConfigError, match="one FILE for every model"):
            config_from_args(["--port", "0", "--oracle-answers", "a.jsonl", "--oracle-answers", "b.jsonl"])


class TestAnswerOracleByModel:
    def test_each_model_answers_from_its_own_file_first(self, tmp_path: Path) -> None:
        """truthful and hallucinating answer one question differently; the shared file fills in; others default."""
        oracle = AnswerOracle.load_all(
            _answers(tmp_path / "all.jsonl", {"Is X good?": "Shared.", "Is Y good?": "Only shared."}),
            [("truthful", _answers(tmp_path / "t.jsonl", {"Is X good?": "X is good."})),
             ("hallucinating", _answers(tmp_path / "h.jsonl", {"Is  X good?": "X is bad."}))],
        )
        assert len(oracle) == 4
        assert generated_text("Is X good?", "truthful", oracle) == "X is good."
        assert generated_text("Is X good?", "hallucinating", oracle) == "X is bad."  # compared normalized
        assert generated_text("Is X good?", "other", oracle) == "Shared."
        assert generated_text("Is Y good?", "truthful", oracle) == "Only shared."
        assert generated_text("Is Z good?", "truthful", oracle) == generated_text("Is Z good?", "truthful", None)

    def test_model_given_twice_is_refused(self, tmp_path: Path) -> None:
        """Two files for one model: ConfigError naming it."""
        path = _answers(tmp_path / "t.jsonl", {"Q?": "A."})
        with pytest.raises(ConfigError, match="a model is given twice: m, m"):
            AnswerOracle.load_all(None, [("m", path), ("m", path)])
