"""The mock's answers to coverage prompts (bench.mock_coverage), on dahl's own cover/v1 messages."""

from __future__ import annotations

import json

from bench.mock_coverage import cover_content, default_coverage, numbered_facts
from bench.mock_oracle import Oracle
from bench.mock_reply import parse_prompt, reply_content
from dahl.adapters._coverage import cover_messages

RESPONSE = "Ada Lovelace wrote the first program. She   worked with Babbage."


def _body(facts: list[str], *, json_reply: bool = False) -> dict[str, object]:
    body: dict[str, object] = {"model": "mock", "messages": cover_messages("Who was Ada?", RESPONSE, facts,
                                                                            json_reply=json_reply)}
    if json_reply:
        body["response_format"] = {"type": "json_object"}
    return body


class TestCoverPrompts:
    def test_dahl_cover_messages_are_a_cover_prompt(self) -> None:
        """The <facts> block makes kind cover; the response and the numbered facts are read back verbatim."""
        prompt = parse_prompt(_body(["Ada wrote a program.", "Ada met Byron."]))
        assert (prompt.kind, prompt.question, prompt.data) == ("cover", "Who was Ada?", RESPONSE)
        assert prompt.facts == ("Ada wrote a program.", "Ada met Byron.")

    def test_oracle_covers_exactly_the_supported_claims_of_the_response(self) -> None:
        """With the response in the oracle: covered iff a supported claim (normalized); NS and unknown facts not."""
        oracle = Oracle([(RESPONSE, [("Who was Ada?", "Ada wrote the first program.", "supported"),
                                     ("Who was Ada?", "Ada was French.", "unsupported")])])
        facts = ["Ada  wrote the first program.", "Ada was French.", "Ada met Byron."]
        assert json.loads(reply_content(parse_prompt(_body(facts)), oracle)) == ["covered", "not_covered",
                                                                                 "not_covered"]
        assert json.loads(reply_content(parse_prompt(_body(facts, json_reply=True)), oracle)) == {
            "coverage": ["covered", "not_covered", "not_covered"]}

    def test_unknown_response_gets_the_pinned_hash_label(self) -> None:
        """A response the oracle lacks (or no oracle) gets default_coverage, the same every time."""
        label = default_coverage(RESPONSE, "Ada met Byron.")
        assert label in ("covered", "partial", "not_covered")
        assert json.loads(cover_content(RESPONSE, ["Ada met Byron."], None, json_mode=False)) == [label]
        assert json.loads(cover_content(RESPONSE, ["Ada met Byron."], Oracle([]), json_mode=False)) == [label]
        labels = [default_coverage(RESPONSE, f"fact {i}") for i in range(2000)]
        assert 0.45 < labels.count("covered") / 2000 < 0.55

    def test_numbered_facts_skip_other_lines(self) -> None:
        """Only 'N. text' lines are facts."""
        assert numbered_facts("1. a b\nnot a fact\n12. c.") == ("a b", "c.")
