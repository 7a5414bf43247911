"""dahl score --refs through the engine against the mock: what a re-score re-judges, and what changing the refs does."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dahl.cli import main
from dahl.records import content_id

N = 6
CLAIMS = ["The sky is blue.", "Water boils at 100 C.", "Paris is in France."]


def _answers(path: Path, edited: int | None = None) -> Path:
    """N answers with given claims; answer ``edited`` gets a new response (same claims); the last abstains."""
    with path.open("w") as handle:
        for i in range(N):
            row: dict[str, Any] = {"id": f"a{i}", "question": f"Question {i}?", "model": "m",
                                   "response": f"Answer {i}. " + " ".join(CLAIMS), "claims": CLAIMS}
            if i == edited:
                row["response"] += " Edited."
            if i == N - 1:
                row = {"id": f"a{i}", "question": f"Question {i}?", "model": "m", "response": "I don't know.",
                       "abstained": True}
            handle.write(json.dumps(row) + "\n")
    return path


def _refs(path: Path, extra: bool = False) -> Path:
    """Four facts per question (five for question 0 when ``extra``)."""
    with path.open("w") as handle:
        for i in range(N):
            facts = [{"id": str(j), "text": f"Fact {j} of question {i}."} for j in range(4)]
            if extra and i == 0:
                facts.append({"id": "4", "text": "A new fact of question 0."})
            handle.write(json.dumps({"question_id": content_id(f"Question {i}?"), "facts": facts}) + "\n")
    return path


def _score(inputs: Path, out: Path, url: str, refs: Path, *, exits: tuple[int, ...] = (0,)) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["score", str(inputs), "--splitter", "given", "--checker", "openai",
                                       "--base-url", url, "--model", "mock", "--api-key-env", "", "-o", str(out),
                                       "--no-progress", "--refs", str(refs)])
    assert result.exit_code in exits, result.output
    return {row["id"]: row for row in map(json.loads, (out / "answers.jsonl").read_text().splitlines())}


class TestRecallRescore:
    def test_only_changed_answers_are_rejudged_and_new_refs_recover(self, tmp_path: Path, mocks: Any) -> None:
        """Run 1: 3 checks, 5 coverage calls; edit one answer: 0 checks, 1 call; add a fact: 1 call for it alone."""
        url = mocks.start()
        refs = _refs(tmp_path / "refs.jsonl")
        first = _score(_answers(tmp_path / "in.jsonl"), tmp_path / "out1", url, refs)
        stats = mocks.stats(url)
        # The check key holds the question: 3 claims x 5 responding answers; one coverage call each.
        assert (stats["check"], stats["cover"]) == (15, 5)
        assert first["a5"]["recall"]["recall"] == 0.0 and first["a5"]["status"] == "abstained"

        # A fresh output folder: every answer is assembled again, claims and coverage from the cache.
        second = _score(_answers(tmp_path / "in2.jsonl", edited=2), tmp_path / "out2", url, refs)
        stats2 = mocks.stats(url)
        assert (stats2["check"] - stats["check"], stats2["cover"] - stats["cover"]) == (0, 1)
        for i in (0, 1, 3, 4, 5):
            assert second[f"a{i}"]["recall"] == first[f"a{i}"]["recall"]

        # New refs change the run fingerprint: every answer is redone, only the new fact is judged.
        third = _score(tmp_path / "in2.jsonl", tmp_path / "out2", url, _refs(tmp_path / "refs.jsonl", extra=True))
        stats3 = mocks.stats(url)
        assert (stats3["check"] - stats2["check"], stats3["cover"] - stats2["cover"]) == (0, 1)
        assert len(third["a0"]["recall"]["facts"]) == 5
        summary = json.loads((tmp_path / "out2" / "summary.json").read_text())
        settings = summary["recall_settings"]
        assert settings["refs_sha256"] == hashlib.sha256((tmp_path / "refs.jsonl").read_bytes()).hexdigest()
        # No --alpha/--beta: the stored importances are used, and recorded as such (null).
        assert (settings["partial"], settings["fstar_k"], settings["alpha"], settings["beta"]) == ("strict", None,
                                                                                                   None, None)

    def test_coverage_errors_are_judged_again_on_a_rerun(self, tmp_path: Path, mocks: Any) -> None:
        """Off-format replies (half of them) leave claims and facts in error; re-runs ask only for those, until
        the recall equals a clean mock's (its labels are hashes of the texts, whatever the URL)."""
        refs = _refs(tmp_path / "refs.jsonl")
        inputs = _answers(tmp_path / "in.jsonl")
        clean = _score(inputs, tmp_path / "clean", mocks.start(), refs)
        url = mocks.start("--fault", "offformat=0.5", "--seed", "3")
        sent: list[int] = []
        for _ in range(20):
            rows = _score(inputs, tmp_path / "faulty", url, refs, exits=(0, 6))
            sent.append(mocks.stats(url)["cover"] - sum(sent))
            errors = [r for r in rows.values() if r["counts"]["error"] or r["recall"].get("reason") == "coverage_error"]
            if not errors:
                break
        assert len(sent) > 1 and sent[-1] < sent[0]  # the first run had errors; later runs ask less
        assert {i: r["recall"] for i, r in rows.items()} == {i: r["recall"] for i, r in clean.items()}
