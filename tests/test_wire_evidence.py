"""The retrieval-augmented LLM Checker through the real wire path: dahl score -> oracle mock.

``--checker openai --evidence CORPUS``: each claim's top-k passages reach the prompt in
delimited blocks (the mock names the passage ids it parsed from them in its reply), the
verdicts in answers.jsonl keep the passages, unsupported claims are counted by reason in
summary.json, an unchanged re-run sends no request, and a changed corpus changes the keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main

QUESTION = "What is metformin?"
CORPUS = [
    {"id": "metformin", "title": "Metformin", "url": "https://example.org/metformin",
     "text": "Metformin lowers glucose production in the liver. It was approved by the FDA in 1994."},
    {"id": "aspirin", "title": "Aspirin", "text": "Aspirin was approved for pain relief."},
    {"id": "insulin", "title": "Insulin", "text": "Insulin lowers blood glucose."},
]
CLAIMS = [
    ("Metformin lowers glucose production in the liver.", "supported", None),
    ("Metformin was approved by the FDA in 1970.", "unsupported", "contradicted"),
    ("Metformin lowers glucose production and cures liver cancer.", "unsupported", None),
]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    answer = {"id": "a1", "model": "m", "category": "drugs", "question": QUESTION, "response": " ".join(c for c, _, _ in CLAIMS)}
    oracle_claims = [{"text": c, "label": lab, **({"reason": r} if r else {})} for c, lab, r in CLAIMS]
    return {
        "corpus": _jsonl(tmp_path / "corpus.jsonl", CORPUS),
        "answers": _jsonl(tmp_path / "answers.jsonl", [{**answer, "claims": [{"text": c} for c, _, _ in CLAIMS]}]),
        "oracle": _jsonl(tmp_path / "oracle.jsonl", [{**answer, "claims": oracle_claims}]),
    }


def _score(files: dict[str, Path], out: Path, url: str, cache: Path) -> None:
    result = CliRunner().invoke(main, [
        "score", str(files["answers"]), "--splitter", "given", "--checker", "openai",
        "--evidence", str(files["corpus"]), "--top-k", "2", "--base-url", url, "--model", "mock",
        "--api-key-env", "", "--cache-dir", str(cache), "-o", str(out), "--no-progress",
    ])
    assert result.exit_code == 0, result.output


def _claims(out: Path) -> list[dict[str, Any]]:
    lines = (out / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    claims: list[dict[str, Any]] = json.loads(lines[0])["claims"]
    return claims


class TestEvidenceCheckerThroughTheWire:
    def test_passages_reach_the_prompt_and_stay_in_the_verdict(
        self, tmp_path: Path, files: dict[str, Path], mocks: Any
    ) -> None:
        """Each verdict keeps its 2 passages (id, title, text); the mock saw exactly those ids in delimited blocks."""
        url = mocks.start("--oracle", str(files["oracle"]))
        _score(files, tmp_path / "out", url, tmp_path / "cache")
        claims = _claims(tmp_path / "out")
        first = claims[0]["evidence"]
        assert first[0] == {
            "text": "Metformin lowers glucose production in the liver. It was approved by the FDA in 1994.",
            "source": "metformin", "score": first[0]["score"], "title": "Metformin", "passage_id": "metformin#0-85",
        }
        assert first[0]["score"] > 0
        for claim in claims:
            ids = [e["passage_id"] for e in claim["evidence"]]
            assert len(ids) == 2
            assert claim["raw"].endswith(f"Oracle label; passages: {', '.join(ids)}.")
        assert [(c["label"], c["reason"]) for c in claims] == [
            ("supported", None), ("unsupported", "contradicted"), ("unsupported", "no_evidence")
        ]

    def test_reasons_counted_and_rerun_sends_nothing(
        self, tmp_path: Path, files: dict[str, Path], mocks: Any
    ) -> None:
        """summary.json counts 1 contradicted and 1 no_evidence; a re-run sends 0 requests; a changed corpus re-checks."""
        url = mocks.start("--oracle", str(files["oracle"]))
        cache = tmp_path / "cache"
        _score(files, tmp_path / "one", url, cache)
        assert mocks.stats(url)["check"] == 3
        block = json.loads((tmp_path / "one" / "summary.json").read_text())["models"]["m"]
        assert block["unsupported_by_reason"] == {"contradicted": 1, "no_evidence": 1, "unstated": 0}
        assert block["categories"]["drugs"]["unsupported_by_reason"] == block["unsupported_by_reason"]
        assert len(list((cache / "corpus-index").iterdir())) == 1

        _score(files, tmp_path / "two", url, cache)
        assert mocks.stats(url)["check"] == 3  # every verdict from the cache
        assert _claims(tmp_path / "two") == _claims(tmp_path / "one")

        changed = [dict(CORPUS[0], text=CORPUS[0]["text"] + " It is taken by mouth."), *CORPUS[1:]]
        _jsonl(files["corpus"], changed)
        _score(files, tmp_path / "three", url, cache)
        assert mocks.stats(url)["check"] == 6  # the corpus is in every key
        assert len(list((cache / "corpus-index").iterdir())) == 2
        assert _claims(tmp_path / "three")[0]["evidence"][0]["passage_id"] == "metformin#0-107"
