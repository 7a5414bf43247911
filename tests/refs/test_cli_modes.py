"""``dahl refs build --pool`` and ``--given``: the modes that call no model."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dahl.cli import main
from dahl.formats._refs import read_refs
from dahl.records import content_id

QUESTION = "Tell me a bio of Ada Lovelace."


def _run(tmp_path: Path, name: str, claims: list[tuple[str, str]]) -> Path:
    answers = tmp_path / f"{name}.jsonl"
    answers.write_text(json.dumps({
        "id": name, "model": name, "question": QUESTION, "response": " ".join(t for t, _ in claims),
        "claims": [{"text": t, "label": label} for t, label in claims],
    }) + "\n")
    out = tmp_path / f"run-{name}"
    result = CliRunner().invoke(main, ["score", str(answers), "-o", str(out), "--splitter", "given",
                                       "--checker", "replay", "--no-progress", "--no-cache"])
    assert result.exit_code == 0, result.output
    return out


def test_pool_unions_supported_claims_with_support_counts(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [("Ada was born in 1815.", "S"), ("Ada wrote a program.", "S"), ("Ada was French.", "NS")])
    b = _run(tmp_path, "b", [("Ada  was born in 1815.", "S"), ("Ada was a mathematician.", "S")])
    refs = tmp_path / "refs.jsonl"
    result = CliRunner().invoke(main, ["refs", "build", "--pool", str(a), "--pool", str(b), "-o", str(refs)])
    assert result.exit_code == 0, result.output
    assert "1 reference set pooled from 2 runs" in result.output
    (ref_set,) = read_refs(refs)
    assert ref_set.question_id == content_id(QUESTION)
    # The unsupported claim is left out; the claim both answers state is one fact with support 2.
    assert [(f.text, f.support) for f in ref_set.facts] == [
        ("Ada was born in 1815.", 2), ("Ada wrote a program.", 1), ("Ada was a mathematician.", 1)]


def test_given_converts_and_checks(tmp_path: Path) -> None:
    given = tmp_path / "given.jsonl"
    given.write_text(json.dumps({"question": QUESTION, "facts": [{"text": "Ada was born in 1815.", "relevance": 6}]})
                     + "\n")
    result = CliRunner().invoke(main, ["refs", "build", "--given", str(given), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2
    assert "given.jsonl:1" in result.output and "relevance" in result.output


def test_two_modes_are_a_usage_error(tmp_path: Path) -> None:
    given = tmp_path / "given.jsonl"
    given.write_text("")
    result = CliRunner().invoke(main, ["refs", "build", "--given", str(given), "--pool", str(tmp_path), "-o",
                                       str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2
    assert "give exactly one input: QUESTIONS | --pool RUN_DIR... | --given FILE" in result.output
