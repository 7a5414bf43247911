"""Every stage through batch mode: the retrieval-augmented Checker (--evidence) and recall's cover stage."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.batch.batch_runs import batch_stats, dahl, endpoint, ledger_events, submit_and_collect
from tests.conftest import REPO, require_data

EXAMPLES = REPO / "examples"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _claims(out: Path) -> dict[str, Any]:
    """answers.jsonl of ``out`` as {answer id: its claims (text, label, raw, reason, evidence, ...)}."""
    return {row["id"]: row["claims"] for row in _rows(out / "answers.jsonl")}


def _through_batch(folder: Path, prepare: tuple[str, ...]) -> str:
    """prepare, submit and collect one wave; the collect output."""
    code, text = dahl(*prepare)
    assert code == 0, text
    return submit_and_collect(folder)


class TestEvidenceChecker:
    def test_evidence_checks_through_batch_equal_the_online_run_and_score_sends_nothing(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """--checker openai --evidence: the batch verdicts keep their passages; score sends 0 requests and equals online."""
        unmatched = {"id": "z1", "model": "model-a", "question": "Qwxz?", "response": "Zyxwv plonked the qwerty."}
        source = tmp_path / "answers.jsonl"  # the examples and one claim no passage matches
        source.write_text((EXAMPLES / "answers.jsonl").read_text() + json.dumps(unmatched) + "\n")
        answers, corpus = str(source), str(EXAMPLES / "corpus.jsonl")
        url = mocks.start()  # one mock: the online run's requests, then the batch's
        adapters = ["--splitter", "rules", "--checker", "openai", "--evidence", corpus, "--top-k", "2"]
        code, text = dahl("score", answers, "-o", str(tmp_path / "online"), "--no-progress", "--cache-dir",
                          str(tmp_path / "cache-online"), *adapters, *endpoint(url))
        assert code == 0, text
        online_checks = mocks.stats(url)["check"]
        assert mocks.stats(url)["requests"] == online_checks
        folder, cache = tmp_path / "batch", ["--cache-dir", str(tmp_path / "cache-batch")]
        prepare = ("batch", "prepare", answers, "-o", str(folder), *adapters, *endpoint(url), *cache)
        code, text = dahl(*prepare)
        assert code == 0, text
        assert "1 claims match no corpus passage: dahl score labels them without a call" in text
        text = submit_and_collect(folder)
        assert f"collected 1 batches: {online_checks} results stored, 0 unfinished" in text
        assert batch_stats(url)["requests_check"] == online_checks
        first = json.loads((folder / "wave-01" / "check-0001.jsonl").read_text().splitlines()[0])
        assert "<evidence" in first["body"]["messages"][-1]["content"]  # the passages are in the prompt
        code, text = dahl("score", answers, "-o", str(tmp_path / "scored"), "--no-progress", *cache, *adapters,
                          *endpoint(url))
        assert code == 0, text
        assert mocks.stats(url)["requests"] == online_checks  # score sent none
        assert _rows(tmp_path / "scored" / "answers.jsonl") == _rows(tmp_path / "online" / "answers.jsonl")
        scored = _claims(tmp_path / "scored")
        assert sum(len(c["evidence"]) == 2 for claims in scored.values() for c in claims) == online_checks
        assert [(c["label"], c["reason"], c["raw"]) for c in scored["z1"]] == [
            ("unsupported", "no_evidence", "no passage of the corpus matches the claim")]
        code, text = dahl(*prepare)
        assert "requests written: 0" in text


MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")


class TestCoverStage:
    def test_pooled_factscore_recall_through_batch_and_score_sends_nothing(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """--refs --coverage openai: recall 23.2 / 35.0 / 49.2 from batch results; score sends 0 requests."""
        from tests.test_recall_factscore import EXPECTED, pool_refs, summary_recall

        files = [str(require_data(f"factscore/labeled/{m}.jsonl")) for m in MODELS]
        base = ["--format", "factscore", "--splitter", "given", "--checker", "replay"]
        runs = []
        for path, model in zip(files, MODELS, strict=True):
            code, text = dahl("score", path, *base, "-o", str(tmp_path / model), "--no-progress", "--no-cache")
            assert code == 0, text
            runs.append(tmp_path / model)
        refs = str(pool_refs(runs, tmp_path / "refs.jsonl"))
        url = mocks.start("--oracle", *files)
        options = [*base, "--refs", refs, "--coverage", "openai", *endpoint(url),
                   "--cache-dir", str(tmp_path / "cache")]
        folder = tmp_path / "batch"
        text = _through_batch(folder, ("batch", "prepare", *files, "-o", str(folder), *options))
        covers = ledger_events(folder, "collected")[0]["succeeded"]
        assert f"collected 1 batches: {covers} results stored, 0 unfinished" in text
        sizes = {row["question_id"]: len(row["facts"]) for row in _rows(Path(refs)) if row["facts"]}
        rows = [r for run in runs for r in _rows(run / "answers.jsonl")]
        expected = sum(math.ceil(sizes[r["question_id"]] / 30) for r in rows
                       if r["question_id"] in sizes and r["status"] != "abstained")
        assert batch_stats(url)["requests_cover"] == expected
        assert covers <= expected  # identical (answer, F*) pairs are one request
        code, text = dahl("score", *files, "-o", str(tmp_path / "scored"), "--no-progress", *options)
        assert code == 0, text
        assert mocks.stats(url)["requests"] == 0
        for model in MODELS:
            assert summary_recall(tmp_path / "scored", model) == (*EXPECTED[model], 8)
        code, text = dahl("batch", "prepare", *files, "-o", str(folder), *options)
        assert "requests written: 0" in text

    @pytest.mark.parametrize("provider", ["openai", "anthropic"])
    def test_cover_requests_wait_for_their_split_wave(self, provider: str, tmp_path: Path, mocks: Any) -> None:
        """--splitter openai with --refs: wave 1 splits only; wave 2 holds the checks and the covers."""
        answer = {"id": "a1", "model": "m", "question": "Who was Ada Lovelace?",
                  "response": "Ada Lovelace was a mathematician. She wrote the first published program."}
        source = tmp_path / "answers.jsonl"
        source.write_text(json.dumps(answer) + "\n")
        refs = tmp_path / "refs.jsonl"
        facts = [{"id": f"f{i}", "text": text, "relevance": 5, "salience": 5}
                 for i, text in enumerate(("Ada Lovelace was a mathematician.", "She worked with Babbage."))]
        refs.write_text(json.dumps({"question": answer["question"], "facts": facts}) + "\n")
        url = mocks.start()
        folder = tmp_path / "batch"
        prepare = ("batch", "prepare", str(source), "-o", str(folder), "--provider", provider, "--splitter", "openai",
                   "--checker", "openai",
                   "--refs", str(refs), *endpoint(url), "--cache-dir", str(tmp_path / "cache"))
        text = _through_batch(folder, prepare)
        assert "collected 1 batches: 1 results stored" in text
        code, text = dahl(*prepare)
        assert code == 0, text
        assert "wrote wave-02/check-0001.jsonl: 2 check requests" in text
        assert "wrote wave-02/cover-0001.jsonl: 1 cover requests" in text
        text = submit_and_collect(folder)
        score = ("score", str(source), "--no-progress", "--splitter", "openai", "--checker", "openai",
                 "--refs", str(refs), *endpoint(url))
        code, text = dahl(*score, "-o", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"))
        assert code == 0, text
        assert mocks.stats(url)["requests"] == 0
        code, text = dahl(*score, "-o", str(tmp_path / "online"), "--cache-dir", str(tmp_path / "cache-online"))
        assert code == 0, text
        assert mocks.stats(url)["requests"] == 1 + 2 + 1  # split, 2 checks, 1 cover, online
        assert _rows(tmp_path / "out" / "answers.jsonl") == _rows(tmp_path / "online" / "answers.jsonl")
        recall = _rows(tmp_path / "out" / "answers.jsonl")[0]["recall"]
        assert [f["label"] for f in recall["facts"]] == ["covered", "not_covered"]  # the mock: the fact is in the text
        assert recall["recall"] == 0.5


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
