"""SAFE / LongFact result JSON and VeriScore outputs, replayed with their own labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import require_data
from dahl.errors import InputError
from dahl.formats import detect_format, read_answers
from dahl.records import GivenClaim, Label


def safe_result(per_prompt: list[dict[str, object]]) -> str:
    # Pretty-printed as SAFE's utils.save_json writes it: the first line is a lone "{".
    return json.dumps({"per_prompt_data": per_prompt, "side_1": "gpt-4", "side_2": "claude-3"}, indent=2)


def rated(*pairs: tuple[str, str]) -> dict[str, object]:
    return {
        "checked_statements": [
            {"atomic_fact": f"raw {fact}", "self_contained_atomic_fact": fact, "annotation": label}
            for fact, label in pairs
        ],
        "Supported": 0,
    }


class TestSafe:
    def test_both_sides_with_labels(self, tmp_path: Path) -> None:
        """Each rated side is an answer named after its model; SAFE's labels map to dahl's."""
        path = tmp_path / "2024-SAFE.json"
        path.write_text(safe_result([{
            "prompt": "Who is X?",
            "side1_response": "X is a poet.",
            "side2_response": "X is a painter.",
            "side1_posthoc_eval_data": rated(("X is a poet.", "Supported"), ("X was born in 1900.", "Not Supported")),
            "side2_posthoc_eval_data": rated(("X is a painter.", "Irrelevant")),
        }]), encoding="utf-8")
        assert detect_format(path) == "safe"
        answers = list(read_answers(path))
        assert [(a.id, a.model, a.question, a.response) for a in answers] == [
            ("gpt-4/1", "gpt-4", "Who is X?", "X is a poet."),
            ("claude-3/1", "claude-3", "Who is X?", "X is a painter."),
        ]
        assert answers[0].claims == (
            GivenClaim(text="X is a poet.", label=Label.SUPPORTED),
            GivenClaim(text="X was born in 1900.", label=Label.UNSUPPORTED),
        )
        assert answers[1].claims == (GivenClaim(text="X is a painter.", label=Label.IRRELEVANT),)

    def test_unrated_side_is_left_out(self, tmp_path: Path) -> None:
        """A prompt SAFE rated on side 1 only gives one answer."""
        path = tmp_path / "r.json"
        path.write_text(safe_result([
            {"prompt": "P?", "side1_response": "R.", "side1_posthoc_eval_data": rated(("R.", "Supported"))},
        ]), encoding="utf-8")
        assert [a.model for a in read_answers(path, "safe")] == ["gpt-4"]

    def test_unknown_label_names_statement(self, tmp_path: Path) -> None:
        """An annotation SAFE does not produce is an InputError naming the statement; the next prompt is read."""
        path = tmp_path / "r.json"
        path.write_text(safe_result([
            {"prompt": "P1?", "side1_response": "R.", "side1_posthoc_eval_data": rated(("R.", "Maybe"))},
            {"prompt": "P2?", "side1_response": "R.", "side1_posthoc_eval_data": rated(("R.", "Supported"))},
        ]), encoding="utf-8")
        errors: list[InputError] = []
        answers = list(read_answers(path, on_error=errors.append))
        assert [a.question for a in answers] == ["P2?"]
        assert [(e.line, e.field) for e in errors] == [
            (1, "$.side1_posthoc_eval_data.checked_statements[0].annotation")
        ]


class TestVeriScore:
    def test_shared_sample(self) -> None:
        """The VeriScore sample is one gpt-4o answer with its 25 verified claims: 24 supported, 1 not."""
        path = require_data("veriscore/data/data_sample.jsonl")
        assert detect_format(path) == "veriscore"
        [answer] = list(read_answers(path))
        assert answer.model == "gpt-4o"
        labels = [c.label for c in answer.claims or ()]
        assert (len(labels), labels.count(Label.SUPPORTED), labels.count(Label.UNSUPPORTED)) == (25, 24, 1)
        assert answer.meta == {"prompt_source": "ShareGPT"}

    @pytest.mark.parametrize(
        ("label", "expected"),
        [("supported", Label.SUPPORTED), ("unsupported", Label.UNSUPPORTED),
         ("Contradicted.", Label.UNSUPPORTED), ("Inconclusive.", Label.UNSUPPORTED)],
        ids=["supported", "unsupported", "contradicted", "inconclusive"],
    )
    def test_labels(self, tmp_path: Path, label: str, expected: Label) -> None:
        """VeriScore's verdicts, and its demos' spellings, map to dahl labels."""
        path = tmp_path / "vs.jsonl"
        line = {"question": "Q?", "response": "R.", "claim_verification_result": [
            {"claim": "C.", "search_results": "", "verification_result": label}]}
        path.write_text(json.dumps(line) + "\n", encoding="utf-8")
        [answer] = list(read_answers(path))
        assert (answer.model, answer.claims) == ("vs", (GivenClaim(text="C.", label=expected),))

    def test_unverified_line_gives_unlabelled_claims(self, tmp_path: Path) -> None:
        """Before verification, all_claim_lst gives the claims without labels."""
        path = tmp_path / "vs.jsonl"
        path.write_text(json.dumps({"question": "Q?", "response": "R.", "all_claim_lst": ["A.", "B."]}) + "\n",
                        encoding="utf-8")
        [answer] = list(read_answers(path))
        assert answer.claims == (GivenClaim(text="A."), GivenClaim(text="B."))
