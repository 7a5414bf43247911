"""bench.omission: PubMedQA answers with and without the sentence covering the most reference facts."""

from __future__ import annotations

import json
from pathlib import Path

from bench.omission import key_sentence, omission, sentence_covers
from tests.conftest import require_data
from dahl.records import RefFact, RefSet


class TestKeySentence:
    def test_sentence_covering_most_weight(self) -> None:
        """Two facts lexically in sentence 2, none in the others: sentence 2 is the key (2 of 3 weight)."""
        text = "Metformin lowers glucose. Insulin is made in the pancreas. Beta cells secrete insulin."
        ref_set = RefSet(question_id="q", facts=(
            RefFact(id="1", text="Metformin lowers glucose levels"),  # 3 of 4 terms in s1: < 80 %, not covered
            RefFact(id="2", text="Insulin is made by the pancreas"),  # insulin, made, pancrea: all in s2
            RefFact(id="3", text="Insulin is made in the pancreas."),
        ))
        assert key_sentence(text, ref_set) == (26, 58, 2.0, 3.0)
        assert key_sentence("One sentence only.", ref_set) is None

    def test_match_share(self) -> None:
        """Four of five terms (80 %) cover a fact; three of five do not; a fact without terms never."""
        fact = {"a", "b", "c", "d", "e"}
        assert sentence_covers(fact, {"a", "b", "c", "d"}) and not sentence_covers(fact, {"a", "b", "c"})
        assert not sentence_covers(set(), {"a"})


class TestOmission:
    def test_answer_files(self, tmp_path: Path) -> None:
        """Five records: A is LONG_ANSWER, B lacks exactly one of its sentences; single-sentence ones left out."""
        data = require_data("pubmedqa/ori_pqal.json")
        figures = omission(data, tmp_path, limit=5)
        answers_a = [json.loads(line) for line in (tmp_path / "answers_A.jsonl").read_text().splitlines()]
        answers_b = [json.loads(line) for line in (tmp_path / "answers_B.jsonl").read_text().splitlines()]
        assert figures["answers"] + figures["single_sentence_left_out"] == 5
        assert [a["id"] for a in answers_a] == [b["id"] for b in answers_b] and len(answers_a) == figures["answers"]
        records = json.loads(data.read_text())
        for a, b in zip(answers_a, answers_b, strict=True):
            assert a["response"] == records[a["id"]]["LONG_ANSWER"] and (a["model"], b["model"]) == ("A", "B")
            assert len(b["response"]) < len(a["response"])
        assert len((tmp_path / "refs.jsonl").read_text().splitlines()) == 5
        assert [json.loads(line)["id"] for line in (tmp_path / "corpus.jsonl").read_text().splitlines()] == list(records)[:5]
