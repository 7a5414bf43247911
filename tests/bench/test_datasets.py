"""Tests for bench.datasets: PubMedQA and MedHallu converters on the shared data."""

from __future__ import annotations

import json
from pathlib import Path

from bench.datasets import main, medhallu, pubmedqa


class TestConverters:
    def test_pubmedqa_one_answer_and_document_per_pmid(self, shared_data: Path) -> None:
        """1,000 answers and documents; the first is pmid 21645374, category its final decision."""
        answers, corpus = pubmedqa(shared_data)
        assert (len(answers), len(corpus)) == (1000, 1000)
        first = answers[0]
        assert (first["id"], first["model"], first["category"]) == ("21645374", "pubmedqa-long-answer", "yes")
        assert first["meta"] == {"evidence_ids": ["21645374"]}
        assert corpus[0]["text"].startswith("Programmed cell death (PCD) is the regulated death")
        assert sorted({a["category"] for a in answers}) == ["maybe", "no", "yes"]

    def test_medhallu_two_answers_per_row(self, shared_data: Path) -> None:
        """2,000 answers (gt then hal per row), one document per Knowledge passage (3,358)."""
        answers, corpus = medhallu(shared_data)
        assert (len(answers), len(corpus)) == (2000, 3358)
        gt, hal = answers[0], answers[1]
        assert (gt["id"], gt["model"], hal["id"], hal["model"]) == ("0-gt", "ground-truth", "0-hal", "hallucinated")
        assert gt["meta"] == {"qid": 0, "label": "true", "evidence_ids": ["0-0", "0-1"]}
        assert gt["category"] == hal["category"] == "medium"
        assert hal["response"].startswith("Mitochondria regulate the formation of perforations")

    def test_cli_writes_both_files(self, shared_data: Path, tmp_path: Path) -> None:
        """The CLI writes answers and corpus JSONL with one object per line."""
        assert main(["medhallu", str(tmp_path), "--data", str(shared_data)]) == 0
        lines = (tmp_path / "medhallu_answers.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 2000
        assert set(json.loads(lines[0])) == {"id", "question", "response", "model", "category", "meta"}
        assert len((tmp_path / "medhallu_corpus.jsonl").read_text(encoding="utf-8").splitlines()) == 3358
