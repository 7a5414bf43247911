"""dahl score --refs end to end: defaults, offline judges with hand-computed recall, and refused option mixes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.records import content_id

QUESTION = "Who was Marie Curie?"
RESPONSE = "Marie Curie was a physicist. She won the Nobel prize in physics. She was born in Warsaw."


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """One answer with two supported and one unsupported given claim, and one abstained answer."""
    path = tmp_path / "in.jsonl"
    rows = [
        {"id": "a", "question": QUESTION, "response": RESPONSE, "model": "m",
         "claims": [{"text": "Marie Curie was a physicist.", "label": "supported"},
                    {"text": "Marie Curie won the Nobel prize in physics.", "label": "supported"},
                    {"text": "Marie Curie was born in Warsaw.", "label": "unsupported"}]},
        {"id": "b", "question": QUESTION, "response": "I don't know.", "model": "n", "abstained": True},
        {"id": "c", "question": "Another question?", "response": "Something.", "model": "m",
         "claims": [{"text": "Something.", "label": "supported"}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def refs(tmp_path: Path) -> Path:
    """Four facts of QUESTION: two rated (imp 1.0 and 0.5), two unrated (weight 1)."""
    path = tmp_path / "refs.jsonl"
    facts = [
        {"id": "f1", "text": "Marie Curie was a physicist.", "relevance": 5, "salience": 5},
        {"id": "f2", "text": "Curie received a Nobel prize for chemistry.", "relevance": 3, "salience": 3},
        {"id": "f3", "text": "Marie Curie was born in Warsaw."},
        {"id": "f4", "text": "Polonium was discovered in 1898."},
    ]
    path.write_text(json.dumps({"question_id": content_id(QUESTION), "question": QUESTION, "facts": facts}) + "\n")
    return path


def _score(inputs: Path, out: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    result = CliRunner().invoke(main, ["score", str(inputs), "--splitter", "given", "--checker", "replay",
                                       "-o", str(out), "--no-progress", *args])
    rows = {}
    if (out / "answers.jsonl").exists():
        rows = {r["id"]: r for r in map(json.loads, (out / "answers.jsonl").read_text().splitlines())}
    return result.exit_code, result.output, rows


class TestScoreRefs:
    def test_replay_defaults_to_the_exact_judge(self, inputs: Path, refs: Path, tmp_path: Path) -> None:
        """exact: only f1 is a supported claim: Rec = 1/4; Rec^w = 1/(1+1+1+0.5); F1 with P = 2/3; the abstainer 0."""
        code, output, rows = _score(inputs, tmp_path / "out", "--refs", str(refs))
        assert code == 0, output
        recall = rows["a"]["recall"]
        assert [f["id"] for f in recall["facts"]] == ["f1", "f3", "f4", "f2"]  # importance order, ties in file order
        assert [f["label"] for f in recall["facts"]] == ["covered", "not_covered", "not_covered", "not_covered"]
        assert recall["recall"] == pytest.approx(0.25)
        assert recall["recall_w"] == pytest.approx(1 / 3.5)
        assert recall["f1"] == pytest.approx(2 * (2 / 3) * 0.25 / (2 / 3 + 0.25))
        assert rows["b"]["recall"]["recall"] == 0.0
        assert "recall" not in rows["c"]  # no reference set for that question
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["recall_settings"]["coverage"] == "exact/v1"

    def test_lexical_judge_with_half_credit(self, inputs: Path, refs: Path, tmp_path: Path) -> None:
        """lexical: f1, f3 all terms; f2 3 of 5 (curi, nobel, prize; not receiv, chemistri): partial; f4 0 of 3."""
        code, output, rows = _score(inputs, tmp_path / "out", "--refs", str(refs), "--coverage", "lexical",
                                    "--partial", "half")
        assert code == 0, output
        labels = {f["id"]: f["label"] for f in rows["a"]["recall"]["facts"]}
        assert labels == {"f1": "covered", "f2": "partial", "f3": "covered", "f4": "not_covered"}
        assert rows["a"]["recall"]["recall"] == pytest.approx(2.5 / 4)
        assert rows["a"]["recall"]["recall_w"] == pytest.approx((1 + 1 + 0.5 * 0.5) / 3.5)

    def test_fstar_k_and_changed_settings_rescore(self, inputs: Path, refs: Path, tmp_path: Path) -> None:
        """--fstar-k 1 keeps f1 only (Rec 1); re-running the folder without it recomputes every answer (Rec 1/4)."""
        out = tmp_path / "out"
        code, output, rows = _score(inputs, out, "--refs", str(refs), "--fstar-k", "1")
        assert code == 0, output
        assert (rows["a"]["recall"]["recall"], len(rows["a"]["recall"]["facts"])) == (1.0, 1)
        code, output, rows = _score(inputs, out, "--refs", str(refs))
        assert code == 0, output
        assert rows["a"]["recall"]["recall"] == pytest.approx(0.25)

    def test_unrated_facts_have_no_recall_at_k(self, inputs: Path, tmp_path: Path) -> None:
        """Facts with neither importance nor support have no order: R@k is null (not file order), Rec stays;
        summary.json says how each set's F* was ordered."""
        path = tmp_path / "unrated.jsonl"
        facts = [{"id": f"f{i}", "text": text} for i, text in enumerate(
            ["Marie Curie was a physicist.", "Polonium was discovered in 1898.", "Radium glows."], 1)]
        path.write_text(json.dumps({"question_id": content_id(QUESTION), "question": QUESTION, "facts": facts}) + "\n")
        code, output, rows = _score(inputs, tmp_path / "out", "--refs", str(path))
        assert code == 0, output
        recall = rows["a"]["recall"]
        assert recall["recall"] == pytest.approx(1 / 3)
        assert (recall["recall_at_5"], recall["recall_at_10"], recall["recall_at_20"]) == (None, None, None)
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["recall_settings"]["recall_at_order"] == {"importance": 0, "support": 0, "none": 1}
        assert summary["models"]["m"]["recall"]["recall_at_5"] is None

    def test_pooled_facts_are_ranked_by_support(self, inputs: Path, tmp_path: Path) -> None:
        """A pooled set (support, no importance): F* and R@k follow support, most stated first."""
        path = tmp_path / "pooled.jsonl"
        facts = [{"id": f"f{i}", "text": f"Fact number {i} of the pool.", "support": 1} for i in range(1, 6)]
        facts.append({"id": "f6", "text": "Marie Curie was a physicist.", "support": 3})
        path.write_text(json.dumps({"question_id": content_id(QUESTION), "question": QUESTION, "facts": facts}) + "\n")
        code, output, rows = _score(inputs, tmp_path / "out", "--refs", str(path))
        assert code == 0, output
        recall = rows["a"]["recall"]
        assert [f["id"] for f in recall["facts"]] == ["f6", "f1", "f2", "f3", "f4", "f5"]
        assert (recall["recall"], recall["recall_at_5"]) == (pytest.approx(1 / 6), pytest.approx(1 / 5))
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["recall_settings"]["recall_at_order"] == {"importance": 0, "support": 1, "none": 0}

    def test_stored_importance_unless_alpha_beta_given(self, inputs: Path, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
        """The importance stored by the build is used as it is; --alpha/--beta recompute it from the ratings,
        with a warning when they differ from the α, β the build recorded."""
        path = tmp_path / "built.jsonl"
        facts = [{"id": "f1", "text": "Marie Curie was a physicist.", "relevance": 5, "salience": 1, "importance": 1.0},
                 {"id": "f2", "text": "Polonium was discovered in 1898.", "relevance": 1, "salience": 5,
                  "importance": 0.0}]
        line = {"question_id": content_id(QUESTION), "question": QUESTION, "facts": facts,
                "meta": {"alpha": 1.0, "beta": 0.0}}
        path.write_text(json.dumps(line) + "\n")
        code, output, rows = _score(inputs, tmp_path / "stored", "--refs", str(path))
        assert code == 0, output
        assert [f["weight"] for f in rows["a"]["recall"]["facts"]] == [1.0, 0.0]
        assert rows["a"]["recall"]["recall_w"] == 1.0  # f1 covered, all the weight
        assert "differ from" not in output
        summary = json.loads((tmp_path / "stored" / "summary.json").read_text())
        assert (summary["recall_settings"]["alpha"], summary["recall_settings"]["beta"]) == (None, None)
        with caplog.at_level("WARNING", logger="dahl.run._recall"):
            code, output, rows = _score(inputs, tmp_path / "given", "--refs", str(path), "--alpha", "0.5", "--beta", "0.5")
        assert code == 0, output
        assert [f["weight"] for f in rows["a"]["recall"]["facts"]] == [0.5, 0.5]
        assert rows["a"]["recall"]["recall_w"] == 0.5
        assert any("recall α 0.5, β 0.5 (given) differ from the α, β the reference sets" in r.getMessage()
                   and "α 1, β 0" in r.getMessage() for r in caplog.records)
        caplog.clear()
        with caplog.at_level("WARNING", logger="dahl.run._recall"):
            code, output, rows = _score(inputs, tmp_path / "same", "--refs", str(path), "--alpha", "1", "--beta", "0")
        assert code == 0 and not any("differ from" in r.getMessage() for r in caplog.records)

    @pytest.mark.parametrize(("args", "message"), [
        (["--coverage", "exact"], "need --refs"),
        (["--refs", "missing.jsonl"], "reference facts file not found"),
        (["--refs", "REFS", "--fstar-k", "2", "--fstar-min-importance", "0.5"], "not both"),
        (["--refs", "REFS", "--coverage", "openai"], "needs --base-url"),
        (["--partial", "half"], "need --refs"),
        (["--alpha", "1"], "need --refs"),
    ], ids=["no-refs", "missing-file", "both-cuts", "openai-without-endpoint", "partial-no-refs", "alpha-no-refs"])
    def test_refused(self, inputs: Path, refs: Path, tmp_path: Path, args: list[str], message: str) -> None:
        """Bad option mixes exit 2 with one line naming the problem, before any answer is written."""
        args = [str(refs) if a == "REFS" else str(tmp_path / a) if a.endswith(".jsonl") else a for a in args]
        code, output, rows = _score(inputs, tmp_path / "out", *args)
        assert code == 2
        assert message in output
        assert rows == {}

    def test_bad_refs_line_names_file_line_and_field(self, inputs: Path, tmp_path: Path) -> None:
        """A fact with empty text stops the run with exit 2 and names file, line and field."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"question": "Q?", "facts": [{"text": "ok"}]}\n{"question": "R?", "facts": [{"text": " "}]}\n')
        code, output, _ = _score(inputs, tmp_path / "out", "--refs", str(bad))
        assert code == 2
        assert f"{bad}:2, field '$.facts[0].text': a reference fact has empty text" in " ".join(output.split())


class TestRecallSettingsFromOptions:
    def test_coverage_model_replaces_the_checkers_model_and_max_tokens(self, refs: Path) -> None:
        """--coverage-model gives the judge the Checker's endpoint with its own model; max_tokens left to the judge."""
        from dahl.cli._score_options import recall_settings
        from dahl.config import EndpointConfig

        check = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="checker-model", api_key_env="", max_tokens=128)
        values = {"refs": refs, "coverage": None, "partial": "strict", "fstar_k": None, "fstar_min_importance": None,
                  "alpha": 0.5, "beta": 0.5, "coverage_model": "judge-model"}
        settings = recall_settings(values, checker="openai", check_endpoint=check, config_file=None, overrides={})
        assert settings is not None and settings.endpoint is not None
        assert (settings.endpoint.model, settings.endpoint.base_url, settings.endpoint.max_tokens) == (
            "judge-model", "http://127.0.0.1:9/v1", None)
        replay = recall_settings(values | {"coverage_model": None}, checker="replay", check_endpoint=None,
                                 config_file=None, overrides={})
        assert replay is not None and replay.endpoint is None  # exact judge: no endpoint


class TestDryRun:
    def test_dry_run_counts_one_cover_call_per_answer_and_30_facts(self, inputs: Path, refs: Path,
                                                                   tmp_path: Path) -> None:
        """Answer a has a set of 4 facts (1 call), b abstains (0), c has no set (0): 1 cover request."""
        result = CliRunner().invoke(main, ["score", str(inputs), "--splitter", "given", "--checker", "replay",
                                           "-o", str(tmp_path / "out"), "--refs", str(refs), "--coverage", "openai",
                                           "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env", "",
                                           "--dry-run"])
        assert result.exit_code == 0, result.output
        assert "cover: 1 requests to http://127.0.0.1:9/v1 m" in result.output
        assert not (tmp_path / "out" / "answers.jsonl").exists()


class TestRefsFileErrors:
    def test_two_sets_for_one_question_are_refused(self, inputs: Path, refs: Path, tmp_path: Path) -> None:
        """A refs file with two sets for one question exits 2 naming the file and both sets; none is dropped silently."""
        line = refs.read_text()
        refs.write_text(line + line.replace("Marie Curie was a physicist.", "Curie was French."))
        code, output, rows = _score(inputs, tmp_path / "out", "--refs", str(refs))
        assert code == 2, output
        assert str(refs) in output and "sets 1 and 2 are both for question" in output and not rows
