"""Acceptance through the Anthropic adapter: ``dahl score --provider anthropic`` against the oracle mock's /v1/messages.

FActScore (the shared split) must give factscore_init 41.9 / 57.5 / 69.3 as replay and the
OpenAI wire do; a split + check run, an evidence check and recall's LLM coverage judge go
over the same route.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.formats import read_answers
from dahl.records import normalize_text
from tests.conftest import require_data
from tests.test_recall_factscore import EXPECTED, mean_recall, pool_refs, summary_recall

MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")
KEY_ENV = "DAHL_ANTHROPIC_WIRE_KEY"
ANTHROPIC = ("--provider", "anthropic", "--model", "claude-mock", "--api-key-env", KEY_ENV)


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-ant-wire-0123456789abcdef")


def _score(files: list[str], out: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["score", *files, "-o", str(out), "--no-progress", *args])
    return result.exit_code, result.output


class TestFActScoreThroughAnthropic:
    def test_factscore_figures_and_one_request_per_unique_claim(self, tmp_path: Path, mocks: Any) -> None:
        """--provider anthropic: factscore_init 41.9 / 57.5 / 69.3, one /v1/messages check per unique claim, all 200."""
        paths = [require_data(f"factscore/labeled/{m}.jsonl") for m in MODELS]
        url = mocks.start("--oracle", *map(str, paths))
        code, text = _score([str(p) for p in paths], tmp_path / "run", "--format", "factscore",
                            "--splitter", "given", "--checker", "openai", "--base-url", url, *ANTHROPIC)
        assert code == 0, text
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        models = summary["models"]
        assert [round(100 * models[m]["factscore_init"], 1) for m in MODELS] == [41.9, 57.5, 69.3]
        unique = {(normalize_text(a.question), normalize_text(c.text))
                  for p in paths for a in read_answers(p, "factscore") for c in a.claims or ()}
        stats = mocks.stats(url)
        assert (stats["check"], stats["requests"], stats["status"]) == (len(unique), len(unique),
                                                                        {"200": len(unique)})
        assert "sk-ant-wire" not in (tmp_path / "run" / "summary.json").read_text()


class TestStagesThroughAnthropic:
    def test_split_and_check(self, tmp_path: Path, mocks: Any) -> None:
        """--splitter openai --checker openai: one claim per sentence; 2 split + 5 check requests."""
        answers = tmp_path / "answers.jsonl"
        rows = [{"id": "a1", "question": "Q1?", "response": "Alpha is one. Beta is two. Gamma is three."},
                {"id": "a2", "question": "Q2?", "response": "Delta is four. Epsilon is five."}]
        answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
        url = mocks.start()
        code, text = _score([str(answers)], tmp_path / "run", "--splitter", "openai", "--checker", "openai",
                            "--base-url", url, *ANTHROPIC)
        assert code == 0, text
        out = [json.loads(line) for line in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
        assert [[c["text"] for c in r["claims"]] for r in out] == [
            ["Alpha is one.", "Beta is two.", "Gamma is three."], ["Delta is four.", "Epsilon is five."]]
        stats = mocks.stats(url)
        assert (stats["split"], stats["check"], stats["status"]) == (2, 5, {"200": 7})

    def test_evidence_check(self, tmp_path: Path, mocks: Any) -> None:
        """--evidence: the passages reach the Messages prompt (the mock names their ids back) and labels follow the oracle."""
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text(json.dumps({"id": "metformin", "title": "Metformin",
                                      "text": "Metformin lowers glucose production in the liver."}) + "\n")
        claims = [("Metformin lowers glucose production in the liver.", "supported", None),
                  ("Metformin was approved in 1970.", "unsupported", "contradicted")]
        base = {"id": "a1", "question": "What is metformin?", "response": " ".join(c for c, _, _ in claims)}
        answers, oracle = tmp_path / "answers.jsonl", tmp_path / "oracle.jsonl"
        answers.write_text(json.dumps({**base, "claims": [{"text": c} for c, _, _ in claims]}) + "\n")
        oracle.write_text(json.dumps({**base, "claims": [{"text": c, "label": lab, **({"reason": r} if r else {})}
                                                         for c, lab, r in claims]}) + "\n")
        url = mocks.start("--oracle", str(oracle))
        code, text = _score([str(answers)], tmp_path / "run", "--splitter", "given", "--checker", "openai",
                            "--evidence", str(corpus), "--top-k", "1", "--base-url", url, *ANTHROPIC)
        assert code == 0, text
        row = json.loads((tmp_path / "run" / "answers.jsonl").read_text().splitlines()[0])
        assert [(c["label"], c["reason"]) for c in row["claims"]] == [
            ("supported", None), ("unsupported", "contradicted")]
        assert [c["raw"] for c in row["claims"]] == [
            '{"label":"supported","reason":"Oracle label; passages: metformin#0-49."}',
            '{"label":"contradicted","reason":"Oracle label; passages: metformin#0-49."}']


class TestRecallThroughAnthropic:
    def test_coverage_judge_recall(self, tmp_path: Path, mocks: Any) -> None:
        """--coverage openai over /v1/messages: InstructGPT recall 23.2, n = 120, 1 abstained (as the chat route)."""
        files = {m: require_data(f"factscore/labeled/{m}.jsonl") for m in MODELS}
        runs = []
        for model, path in files.items():
            code, text = _score([str(path)], tmp_path / "pool" / model, "--format", "factscore",
                                "--splitter", "given", "--checker", "replay", "--no-cache")
            assert code == 0, text
            runs.append(tmp_path / "pool" / model)
        refs = pool_refs(runs, tmp_path / "refs.jsonl")
        url = mocks.start("--oracle", *map(str, files.values()))
        code, text = _score([str(files["InstructGPT"])], tmp_path / "run", "--format", "factscore",
                            "--splitter", "given", "--checker", "replay", "--refs", str(refs),
                            "--coverage", "openai", "--base-url", url, *ANTHROPIC)
        assert code == 0, text
        recall, n, abstained = mean_recall(tmp_path / "run")
        assert (round(recall, 1), n, abstained) == EXPECTED["InstructGPT"]
        assert summary_recall(tmp_path / "run", "InstructGPT") == (*EXPECTED["InstructGPT"], 8)
        sizes = {json.loads(line)["question_id"]: len(json.loads(line)["facts"])
                 for line in refs.read_text().splitlines() if json.loads(line)["facts"]}
        out = [json.loads(line) for line in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
        calls = sum(math.ceil(sizes[r["question_id"]] / 30) for r in out
                    if r["question_id"] in sizes and r["status"] != "abstained")
        stats = mocks.stats(url)
        assert (stats["cover"], stats["requests"], stats["status"]) == (calls, calls, {"200": calls})
