"""summary.json of real ``dahl score`` runs byte for byte against golden files, and Summary.merge.

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

import msgspec
import orjson
import pytest
from click.testing import CliRunner

from dahl.analysis._summary import CostSummary, RunSummary, StageCost, Summary
from dahl.cli import main
from dahl.errors import ConfigError
from dahl.lanes._lane import LaneStatistics
from dahl.records import content_id
from dahl.run._plan import AdapterSettings
from dahl.run._score import ScoreConfig, score

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

    @pytest.mark.parametrize("golden", sorted(p.name for p in GOLDEN.glob("summary_*.json")))
    def test_decodes_and_encodes_back_to_the_same_bytes(self, golden: str) -> None:
        """Every golden summary.json decodes to a Summary whose encoding is the file's bytes."""
        payload = (GOLDEN / golden).read_bytes()
        assert Summary.decode(payload).encode() == payload


#: (id, model, category, claim labels: S supported, U unsupported; "" with abstained).
ANSWERS: list[tuple[str, str, str, str]] = [
    ("a1", "m", "x", "SSU"),   # precision 2/3
    ("b1", "n", "x", "SS"),    # 1
    ("a3", "m", "x", ""),      # abstained
    ("a2", "m", "y", "S"),     # 1
    ("a4", "m", "x", "SUUU"),  # 1/4
    ("b2", "n", "y", "U"),     # 0
]
_LABEL = {"S": "supported", "U": "unsupported"}


def write_answers(path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    """Given claims with replayed labels, one JSONL line per answer."""
    lines = []
    for rid, model, category, labels in rows:
        row: dict[str, Any] = {"id": rid, "question": f"Question {rid[1]}?", "response": f"Answer {rid}.",
                               "model": model, "category": category}
        if labels:
            row["claims"] = [{"text": f"Claim {i} of {rid}.", "label": _LABEL[c]} for i, c in enumerate(labels)]
        else:
            row["abstained"] = True
        lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines))
    return path


def scored(path: Path, out: Path) -> Summary:
    """The typed summary of a given/replay run of ``path`` into ``out``."""
    report = score(ScoreConfig(inputs=(path,), out_dir=out, n_boot=200, use_cache=False,
                               adapters=AdapterSettings(splitter="given", checker="replay")))
    assert report.result is not None
    assert report.result.as_builtins() == report.summary
    return report.result


class TestSummaryMerge:
    @pytest.fixture
    def runs(self, tmp_path: Path) -> tuple[Summary, Summary, Summary]:
        """The whole of ANSWERS scored in one run, and its first and last three answers scored apart."""
        whole = scored(write_answers(tmp_path / "all.jsonl", ANSWERS), tmp_path / "all")
        first = scored(write_answers(tmp_path / "one.jsonl", ANSWERS[:3]), tmp_path / "one")
        second = scored(write_answers(tmp_path / "two.jsonl", ANSWERS[3:]), tmp_path / "two")
        return whole, first, second

    def test_counts_add(self, runs: tuple[Summary, Summary, Summary]) -> None:
        """Answers, claims and labels of the halves add up: 6 answers, 11 claims, m 4 S + 4 U, n 2 S + 1 U."""
        whole, first, second = runs
        merged = first.merge(second)
        assert merged.run.answers_read == merged.run.answers_done == 6
        assert merged.run.claims_done == merged.run.claims_checked == 11
        assert merged.run.status == whole.run.status == {"scored": 5, "abstained": 1}
        assert merged.n_claims == 11
        m, n = merged.models["m"], merged.models["n"]
        assert (m.n_answers, m.n_scored, m.n_abstained, m.n_excluded) == (4, 3, 1, 1)
        assert (m.labels["supported"], m.labels["unsupported"]) == (4, 4)
        assert (n.n_answers, n.labels["supported"], n.labels["unsupported"]) == (2, 2, 1)
        assert merged.changes.answers_scored == 6
        assert merged.question_set == whole.question_set
        assert merged.question_set.questions == 4  # a1 and b1 answer "Question 1?", a2 and b2 "Question 2?"
        assert merged.config.inputs == [first.config.inputs[0], second.config.inputs[0]]

    def test_means_recomputed(self, runs: tuple[Summary, Summary, Summary]) -> None:
        """DAHL Score m = (2/3 + 1 + 1/4) / 3 = 23/36, its category x (2/3 + 1/4) / 2 = 11/24, n = (1 + 0) / 2."""
        _, first, second = runs
        merged = first.merge(second)
        assert merged.models["m"].dahl_score == pytest.approx(23 / 36)
        assert merged.models["m"].categories["x"].dahl_score == pytest.approx(11 / 24)
        assert merged.models["m"].categories["y"].dahl_score == 1.0
        assert merged.models["n"].dahl_score == pytest.approx(0.5)
        assert first.models["m"].dahl_score == pytest.approx(2 / 3)  # before the merge: a1 alone was scored

    def test_merge_equals_the_whole_run(self, runs: tuple[Summary, Summary, Summary]) -> None:
        """Every figure, bootstrap intervals included, of the merged halves is the whole run's, either way round."""
        whole, first, second = runs
        assert first.merge(second).figures == whole.figures
        assert second.merge(first).figures == whole.figures
        assert first.merge(second).statistics == whole.statistics

    def test_decoded_summary_is_the_written_one_and_cannot_be_merged(self, runs: tuple[Summary, Summary, Summary],
                                                                      tmp_path: Path) -> None:
        """summary.json decodes to the same figures, without statistics: merging it is a ConfigError."""
        whole, first, _ = runs
        decoded = Summary.decode((tmp_path / "all" / "summary.json").read_bytes())
        assert decoded.encode() == (tmp_path / "all" / "summary.json").read_bytes()
        assert decoded.figures == whole.figures
        with pytest.raises(ConfigError, match="cannot be merged"):
            decoded.merge(first)

    def test_other_settings_are_refused(self, tmp_path: Path) -> None:
        """Shards scored with another K do not merge."""
        path = write_answers(tmp_path / "in.jsonl", ANSWERS)
        one = scored(path, tmp_path / "one")
        report = score(ScoreConfig(inputs=(path,), out_dir=tmp_path / "k", k=3, n_boot=200, use_cache=False,
                                   adapters=AdapterSettings(splitter="given", checker="replay")))
        assert report.result is not None
        with pytest.raises(ConfigError, match="different configurations"):
            one.merge(report.result)


def _stage(calls: int, usd: float | None) -> StageCost:
    return StageCost(model="gpt", calls=calls, calls_without_usage=1, input_tokens=100 * calls,
                     output_tokens=10 * calls, usd=usd, price=None)


class TestRunBlockMerge:
    def test_cost_adds_per_stage(self) -> None:
        """Stages in both add calls, tokens and USD; a stage in one is kept; caps add; an unknown price stays None."""
        one = CostSummary(usd=0.5, max_cost_usd=1.0, batch=False, price_table_date="2025-05-01",
                          lanes={"check": _stage(2, 0.5)})
        two = CostSummary(usd=0.25, max_cost_usd=2.0, batch=False, price_table_date="2025-05-01",
                          lanes={"check": _stage(3, 0.25), "split": _stage(1, None)})
        merged = one.merge(two)
        assert (merged.usd, merged.max_cost_usd) == (0.75, 3.0)
        check = merged.lanes["check"]
        assert (check.calls, check.calls_without_usage, check.input_tokens, check.output_tokens, check.usd) == (
            5, 2, 500, 50, 0.75)
        assert merged.lanes["split"] == _stage(1, None)
        assert msgspec.structs.replace(one, max_cost_usd=None).merge(two).max_cost_usd is None

    def test_other_price_table_refused(self) -> None:
        """Runs priced with different tables do not merge."""
        one = CostSummary(usd=0.0, max_cost_usd=None, batch=False, price_table_date="2025-05-01", lanes={})
        with pytest.raises(ConfigError, match="priced differently"):
            one.merge(msgspec.structs.replace(one, price_table_date="2026-01-01"))

    def test_run_counts_lanes_and_clock(self) -> None:
        """Counters and errors add, a lane in both adds its counts with the later pause, cover counts add to UNSET."""
        lane = LaneStatistics(in_flight=0, waiting=0, requests=10, successes=9, retries=2, rate_limited=1,
                              transient_errors=1, fatal_errors=0, tokens_reserved=0, tokens_used=500,
                              paused_until=None, rpm=60.0, tpm=None)
        cost = CostSummary(usd=0.0, max_cost_usd=None, batch=False, price_table_date="2025-05-01", lanes={})
        one = RunSummary(answers_read=3, answers_resumed=1, answers_done=2, answers_cached=0,
                         status={"scored": 2}, input_errors=1, claims_done=5, claims_checked=4, claims_cached=1,
                         claims_deduped=0, claims_failed=1, errors={"TransientAPIError": 1}, elapsed_s=2.0,
                         lanes={"a": lane}, dahl_version="1", started_at="2026-01-01T00:00:05+00:00",
                         finished_at="2026-01-01T00:00:07+00:00", cost=cost)
        two = msgspec.structs.replace(
            one, status={"scored": 1, "abstained": 1}, errors={"OutputParseError": 2}, elapsed_s=3.0,
            lanes={"a": msgspec.structs.replace(lane, paused_until=12.5), "b": lane}, answers_covered=2,
            started_at="2026-01-01T00:00:04+00:00", finished_at="2026-01-01T00:00:06+00:00")
        merged = one.merge(two)
        assert (merged.answers_read, merged.answers_resumed, merged.claims_done, merged.claims_failed) == (6, 2, 10, 2)
        assert merged.status == {"scored": 3, "abstained": 1}
        assert merged.errors == {"TransientAPIError": 1, "OutputParseError": 2}
        assert (merged.lanes["a"].requests, merged.lanes["a"].tokens_used, merged.lanes["a"].paused_until) == (
            20, 1000, 12.5)
        assert merged.lanes["b"] == lane
        assert merged.answers_covered == 2 and merged.facts_judged is msgspec.UNSET
        assert (merged.started_at, merged.finished_at, merged.elapsed_s) == (
            "2026-01-01T00:00:04+00:00", "2026-01-01T00:00:07+00:00", 3.0)
        with pytest.raises(ConfigError, match="dahl 1 and 2"):
            one.merge(msgspec.structs.replace(two, dahl_version="2"))
