"""summary.json of real ``dahl score`` runs, byte for byte against golden files.

The golden files in ``tests/golden/`` were written by the dict-building summary code that the
typed :class:`dahl.analysis.Summary` replaced; the runs' only volatile values (``started_at``,
``finished_at``, ``elapsed_s``) are set to fixed ones before comparing. Regenerate with
``DAHL_WRITE_GOLDEN=1 python -m pytest tests/test_summary_file.py`` only when a change to
summary.json is meant.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.records import content_id

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden"
_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS

QUESTION = "Who was Marie Curie?"
RESPONSE = "Marie Curie was a physicist. She won the Nobel prize in physics. She was born in Warsaw."


def recall_inputs(folder: Path) -> None:
    """Four answers of two models in two categories with given labels, and a reference set for QUESTION."""
    rows = [
        {"id": "a", "question": QUESTION, "response": RESPONSE, "model": "m", "category": "science",
         "claims": [{"text": "Marie Curie was a physicist.", "label": "supported"},
                    {"text": "Marie Curie won the Nobel prize in physics.", "label": "supported"},
                    {"text": "Marie Curie was born in Warsaw.", "label": "unsupported"}]},
        {"id": "b", "question": QUESTION, "response": "I don't know.", "model": "n", "abstained": True,
         "category": "science"},
        {"id": "c", "question": "Another question?", "response": "Something.", "model": "m", "category": "misc",
         "claims": [{"text": "Something.", "label": "supported"}]},
        {"id": "d", "question": QUESTION, "response": "Marie Curie was a physicist.", "model": "n",
         "category": "science", "claims": [{"text": "Marie Curie was a physicist.", "label": "supported"},
                                           {"text": "Marie Curie was a chemist.", "label": "unknown"}]},
    ]
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    facts = [
        {"id": "f1", "text": "Marie Curie was a physicist.", "relevance": 5, "salience": 5},
        {"id": "f2", "text": "Curie received a Nobel prize for chemistry.", "relevance": 3, "salience": 3},
        {"id": "f3", "text": "Marie Curie was born in Warsaw."},
    ]
    (folder / "refs.jsonl").write_text(
        json.dumps({"question_id": content_id(QUESTION), "question": QUESTION, "facts": facts}) + "\n")


def example_inputs(folder: Path) -> None:
    """The shipped example answers and corpus."""
    shutil.copy(EXAMPLES / "answers.jsonl", folder / "answers.jsonl")
    shutil.copy(EXAMPLES / "corpus.jsonl", folder / "corpus.jsonl")


#: name -> (inputs writer, score arguments after the input file).
RUNS: dict[str, tuple[Any, list[str]]] = {
    "example_evidence": (example_inputs, ["--evidence", "corpus.jsonl"]),
    "example_fake": (example_inputs, ["--checker", "fake"]),
    "recall_lexical": (recall_inputs, ["--splitter", "given", "--checker", "replay", "--refs", "refs.jsonl",
                                       "--coverage", "lexical", "--partial", "half"]),
}


def normalized(payload: bytes) -> bytes:
    """``payload`` with the run's clock readings set to fixed values, encoded as summary.json is."""
    summary = orjson.loads(payload)
    summary["run"]["started_at"] = summary["run"]["finished_at"] = "2000-01-01T00:00:00+00:00"
    summary["run"]["elapsed_s"] = 0.0
    return orjson.dumps(summary, option=_OPTIONS)


def score_twice(folder: Path, args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    """summary.json of a first run in ``folder`` and of an identical second (resumed) run."""
    monkeypatch.chdir(folder)
    command = ["score", "answers.jsonl", *args, "-o", "out", "--no-progress", "--cache-dir", "cache"]
    outputs = []
    for _ in range(2):
        result = CliRunner().invoke(main, command, catch_exceptions=False)
        assert result.exit_code in (0, 1), result.output
        outputs.append((folder / "out" / "summary.json").read_bytes())
    return outputs[0], outputs[1]


class TestSummaryFile:
    @pytest.mark.parametrize("name", sorted(RUNS))
    def test_same_bytes_as_the_golden_file(self, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """summary.json of a first and a resumed run has the golden keys, values and bytes."""
        write_inputs, args = RUNS[name]
        write_inputs(tmp_path)
        first, second = score_twice(tmp_path, args, monkeypatch)
        for run, payload in (("first", first), ("resumed", second)):
            assert orjson.dumps(orjson.loads(payload), option=_OPTIONS) == payload  # sorted, indented, nothing else
            golden = GOLDEN / f"summary_{name}_{run}.json"
            if os.environ.get("DAHL_WRITE_GOLDEN"):
                golden.write_bytes(normalized(payload))
            assert normalized(payload) == golden.read_bytes()
