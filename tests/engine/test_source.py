"""dahl.engine.source: the answers a run scores, with bad records, duplicates and needs (claims, labels)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dahl.cache import CacheStore
from dahl.cache.database import DB_NAME
from dahl.cache.whole_input import WholeInputProcess
from dahl.cache.whole_input_child import Bad, Start
from dahl.engine.pipeline import QueuedAnswer
from dahl.engine.source import InputErrors, answer_source
from dahl.formats import Needs

RUN_FP = b'{"run": "source-test"}'


def record(answer_id: str, **fields: Any) -> str:
    return json.dumps({"id": answer_id, "question": "Q?", "response": f"Answer {answer_id}.", **fields}) + "\n"


def read(inputs: list[Path], needs: Needs = Needs.NOTHING) -> tuple[list[str], InputErrors]:
    """Ids of the answers answer_source yields (read here), and its error collector."""
    errors = InputErrors()
    items = answer_source(inputs, "auto", None, RUN_FP, set(), {}, errors, [0], None, needs)
    return [item.answer.id for item in items if isinstance(item, QueuedAnswer)], errors


class TestNeeds:
    CLAIMED = record("a", claims=[{"text": "c"}]) + record("b") + record("c", claims=[{"text": "c"}])

    def test_claimless_answer_is_rejected_here(self, tmp_path: Path) -> None:
        """With Needs.CLAIMS the answer without claims is an input error (line 2, field claims)."""
        path = tmp_path / "a.jsonl"
        path.write_text(self.CLAIMED)
        ids, errors = read([path], Needs.CLAIMS)
        assert ids == ["a", "c"]
        assert [(e.file, e.line, e.field) for e in errors.first] == [(str(path), 2, "claims")]

    def test_the_input_child_rejects_it_too(self, tmp_path: Path) -> None:
        """The whole-answer input child reads with the run's needs: the same record is its Bad (line 2, claims)."""
        path = tmp_path / "a.jsonl"
        path.write_text(self.CLAIMED)
        CacheStore(tmp_path / "cache").close()
        child = WholeInputProcess()
        try:
            child.begin(Start([str(path)], "auto", None, RUN_FP, b"material", str(tmp_path / "cache" / DB_NAME),
                              10.0, 64, 4, Needs.CLAIMS.value))
            records = list(child.records())
        finally:
            child.close()
        bad = [(r.line, r.field) for r in records if isinstance(r, Bad)]
        assert (len(records), bad) == (3, [(2, "claims")])
