"""Acceptance: pooled human recall on FActScore, replayed (--coverage exact) and through the wire (the oracle mock)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main

MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")
#: (recall %, answers with recall, abstained among them), verified by the lead with an independent script.
EXPECTED = {"InstructGPT": (23.2, 120, 1), "ChatGPT": (35.0, 120, 12), "PerplexityAI": (49.2, 120, 9)}


def pool_refs(runs: list[Path], out: Path) -> Path:
    """refs.jsonl pooled from ``runs`` by ``dahl refs build --pool`` (the feature under test)."""
    args = ["refs", "build", "-o", str(out)]
    for run in runs:
        args += ["--pool", str(run)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "128 reference sets pooled from 3 runs" in result.output
    return out


def summary_recall(run: Path, model: str) -> tuple[float, int, int, int]:
    """(100 × Rec, n, abstained, empty F*) of ``model`` in the run's summary.json."""
    block = json.loads((run / "summary.json").read_text())["models"][model]["recall"]
    return round(100 * block["recall"], 1), block["n"], block["n_abstained"], block["null_by_reason"]["empty_fstar"]


def mean_recall(run: Path) -> tuple[float, int, int]:
    """(100 × mean recall, answers with a defined recall, abstained among them) from answers.jsonl."""
    rows = _rows(run / "answers.jsonl")
    defined = [r for r in rows if "recall" in r and r["recall"]["recall"] is not None]
    mean = 100 * sum(r["recall"]["recall"] for r in defined) / len(defined)
    return mean, len(defined), sum(r["status"] == "abstained" for r in defined)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _score(path: Path, out: Path, *args: str) -> None:
    result = CliRunner().invoke(main, ["score", str(path), "--format", "factscore", "--splitter", "given",
                                       "--checker", "replay", "-o", str(out), "--no-progress", *args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], Path]:
    """The three labeled files and their pooled refs.jsonl (built from three replay runs)."""
    from tests.conftest import require_data

    files = {m: require_data(f"factscore/labeled/{m}.jsonl") for m in MODELS}
    tmp = tmp_path_factory.mktemp("pool")
    runs = []
    for model, path in files.items():
        _score(path, tmp / model, "--no-cache")
        runs.append(tmp / model)
    return files, pool_refs(runs, tmp / "refs.jsonl")


class TestPooledHumanRecall:
    def test_replayed_labels_exact_judge(self, pooled: tuple[dict[str, Path], Path], tmp_path: Path) -> None:
        """--coverage exact: recall 23.2 / 35.0 / 49.2, n = 120 each, 1 / 12 / 9 abstained."""
        files, refs = pooled
        for model, path in files.items():
            _score(path, tmp_path / model, "--no-cache", "--refs", str(refs), "--coverage", "exact")
            recall, n, abstained = mean_recall(tmp_path / model)
            assert (round(recall, 1), n, abstained) == EXPECTED[model]
            assert summary_recall(tmp_path / model, model) == (*EXPECTED[model], 8)

    def test_wire_llm_judge_against_the_oracle_mock(
        self, pooled: tuple[dict[str, Path], Path], tmp_path: Path, mocks: Any
    ) -> None:
        """--coverage openai against the oracle mock: the same figures, one request per answer and 30 facts."""
        files, refs = pooled
        url = mocks.start("--oracle", *map(str, files.values()))
        sizes = {row["question_id"]: len(row["facts"]) for row in _rows(refs) if row["facts"]}
        expected_calls = 0
        for model, path in files.items():
            _score(path, tmp_path / model, "--refs", str(refs), "--coverage", "openai", "--base-url", url,
                   "--model", "mock", "--api-key-env", "")
            recall, n, abstained = mean_recall(tmp_path / model)
            assert (round(recall, 1), n, abstained) == EXPECTED[model]
            assert summary_recall(tmp_path / model, model) == (*EXPECTED[model], 8)
            rows = _rows(tmp_path / model / "answers.jsonl")
            expected_calls += sum(math.ceil(sizes[r["question_id"]] / 30) for r in rows
                                  if r["question_id"] in sizes and r["status"] != "abstained")
        stats = mocks.stats(url)
        assert (stats["cover"], stats["check"], stats["requests"]) == (expected_calls, 0, expected_calls)
        summary = json.loads((tmp_path / "ChatGPT" / "summary.json").read_text())
        assert summary["recall_settings"]["coverage"].startswith("openai:cover|")
        assert summary["recall_settings"]["partial"] == "strict"
