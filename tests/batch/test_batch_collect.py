"""Result lines into cache entries: what is stored, and how failures are counted."""

from __future__ import annotations

from typing import Any

from dahl.batch._collect import parse_outcomes
from dahl.batch._extras import Extra, read_extras, write_extras
from dahl.batch._requests import StageMeta
from dahl.batch._providers import parse_openai_line
from dahl.records import Claim, Evidence, Label, Usage, Verdict

META = {"check": StageMeta("fp-check", "3", "http://x/v1", "m", ""), "split": StageMeta("fp-split", "1", "u", "m", "")}


def _ok(custom_id: str, content: str) -> dict[str, Any]:
    body = {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}}
    return {"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None}


class TestParseOutcomes:
    def test_check_reply_becomes_the_online_verdict(self) -> None:
        """A 200 check reply is stored as the Verdict the online Checker builds: label, raw, usage."""
        puts, got = parse_outcomes([parse_openai_line(_ok("k1", "Supported\nIt is."))], {"k1": "check"}, META)
        assert [(p.key, p.raw, p.version) for p in puts] == [("k1", "Supported\nIt is.", "3")]
        assert puts[0].value == Verdict(label=Label.SUPPORTED, checker="fp-check", raw="Supported\nIt is.",
                                        usage=Usage(prompt_tokens=40, completion_tokens=3))
        assert (got.stored, got.prompt_tokens, got.completion_tokens) == (1, 40, 3)

    def test_split_reply_becomes_claims(self) -> None:
        """A 200 split reply in text form is stored as its claims, in order, with the raw reply."""
        puts, _ = parse_outcomes([parse_openai_line(_ok("k2", "- A is B.\n- C is D."))], {"k2": "split"}, META)
        assert puts[0].value == [Claim(text="A is B.", index=0), Claim(text="C is D.", index=1)]

    def test_failures_are_counted_by_class_and_never_stored(self) -> None:
        """Off-format reply, HTTP 500 line and expired line: 0 entries, one count each, tokens still counted."""
        lines = [_ok("k1", "I would rather chat about the weather."),
                 {"custom_id": "k2", "response": {"status_code": 500, "body": {"error": {"type": "server_error"}}},
                  "error": None},
                 {"custom_id": "k3", "response": None, "error": {"code": "batch_expired", "message": "expired"}}]
        puts, got = parse_outcomes(map(parse_openai_line, lines), dict.fromkeys(("k1", "k2", "k3"), "check"), META)
        assert puts == []
        assert dict(got.errors) == {"OutputParseError": 1, "http_500:server_error": 1}
        assert (got.unfinished, got.prompt_tokens) == (1, 40)
        assert got.classes == {"k1": "OutputParseError", "k2": "http_500:server_error", "k3": "expired"}


class TestCoverAndEvidenceOutcomes:
    META = {"cover": StageMeta("fp-cover", "1", "u", "m", ""), "check": StageMeta("fp-ev", "3", "u", "m", "", True)}

    def test_cover_reply_stores_each_label_under_its_facts_key(self) -> None:
        """A 3-label reply for facts k1..k3 gives 3 entries (label bytes, no raw), one stored request."""
        extras = {"c1": Extra("c1", keys=("k1", "k2", "k3"))}
        line = _ok("c1", '{"coverage": ["covered", "not_covered", "partial"]}')
        puts, got = parse_outcomes([parse_openai_line(line)], {"c1": "cover"}, self.META, extras)
        assert [(p.key, p.value, p.raw, p.version) for p in puts] == [
            ("k1", b"covered", None, "1"), ("k2", b"not_covered", None, "1"), ("k3", b"partial", None, "1")]
        assert got.stored == 1

    def test_cover_reply_with_another_count_of_labels_is_not_stored(self) -> None:
        """2 labels for 3 facts cannot be aligned: nothing stored, counted OutputParseError; no extras: missing_extras."""
        extras = {"c1": Extra("c1", keys=("k1", "k2", "k3"))}
        lines = [_ok("c1", '["covered", "partial"]'), _ok("c2", '["covered"]')]
        puts, got = parse_outcomes(map(parse_openai_line, lines), {"c1": "cover", "c2": "cover"}, self.META, extras)
        assert puts == []
        assert dict(got.errors) == {"OutputParseError": 1, "missing_extras": 1}

    def test_evidence_check_keeps_its_passages_and_reason(self) -> None:
        """A check against passages stores the passages as evidence and the reason the reply gives."""
        passage = Evidence(text="Metformin was approved in 1994.", source="metformin", score=1.25,
                           passage_id="metformin#0-31")
        extras = {"k1": Extra("k1", evidence=(passage,))}
        puts, _ = parse_outcomes([parse_openai_line(_ok("k1", "Contradicted\nThe passage says 1994."))],
                                 {"k1": "check"}, self.META, extras)
        verdict = puts[0].value
        assert isinstance(verdict, Verdict)
        assert (verdict.label, verdict.reason, verdict.evidence) == (Label.UNSUPPORTED, "contradicted", (passage,))


class TestExtras:
    def test_written_extras_read_back_for_the_asked_ids_only(self, tmp_path: Any) -> None:
        """Two extras written; reading one id gives exactly that one, equal to what was written."""
        passage = Evidence(text="t", source="d", score=0.5, title="T", passage_id="d#0-1")
        written = [Extra("a", keys=("k1",)), Extra("b", evidence=(passage,))]
        assert write_extras(tmp_path, written)
        assert read_extras(tmp_path, {"b"}) == {"b": written[1]}
        assert not write_extras(tmp_path / "none", [])
