"""B8 (recall through the LLM coverage judge against the mock) at tiny size."""

from __future__ import annotations

import json
from pathlib import Path

from bench.scenarios import b8_recall


class TestB8:
    async def test_tiny(self, tmp_path: Path) -> None:
        """300 answers x 20 facts: 300 coverage requests, every answer with recall; the 1 % re-score sends 3."""
        data = json.loads(json.dumps((await b8_recall.run("tiny", tmp_path)).as_dict(1.0)))
        first, rescore = data["runs"]["first"], data["runs"]["rescore"]
        assert (first["requests"], first["answers_with_recall"]) == (300, 300)
        assert (rescore["requests"], rescore["answers_with_recall"]) == (3, 300)
        assert data["claims_in"] == data["claims_out"] == 2 * 300 * b8_recall.CLAIMS

    def test_inputs(self, tmp_path: Path) -> None:
        """write_inputs edits every 100th response: 3 of 250 (answers 0, 100, 200); 20 facts per question."""
        edited = b8_recall.write_inputs(tmp_path / "a.jsonl", tmp_path / "r.jsonl", 250, edit_every=100)
        refs = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
        assert edited == 3 and len(refs) == 250 and {len(r["facts"]) for r in refs} == {20}
