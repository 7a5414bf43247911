"""Tests for dahl.adapters._parse: strict label and claim-list parsing."""

from __future__ import annotations

import pytest

from dahl.adapters._parse import parse_claims, parse_label, parse_verdict
from dahl.errors import OutputParseError
from dahl.records import Label

S, U, I, K = Label.SUPPORTED, Label.UNSUPPORTED, Label.IRRELEVANT, Label.UNKNOWN

LABEL_CASES = [
    ("Supported", S),
    ("supported.", S),
    ("**Supported**", S),
    ("Unsupported", U),
    ("Irrelevant", I),
    ("Unknown", K),
    ("True", S),
    ("False.", U),
    ("Yes", S),
    ("No", U),
    ("Correct", S),
    ("Incorrect", U),
    ("Not true", U),
    ("not true.", U),
    ("Untrue", U),
    ("It is false that Paris is the capital of Italy.", U),
    ("It is not true that aspirin cures cancer.", U),
    ("It is true that water boils at 100 °C at sea level.", S),
    ("This claim is not supported by the available evidence.", U),
    ("The claim is supported.", S),
    ("Not supported", U),
    ("Not correct", U),
    ("Partially true", U),
    ("Mostly true, but the year is wrong.", U),
    ("Not relevant to the question", I),
    ("Cannot be determined", K),
    ("It cannot be verified from the evidence.", K),
    ("Not enough information", K),
    ("No information is available about this.", K),
    ("I cannot determine whether this is true.", K),
    ("Unsupported\nThe drug was approved in 1995, not 1994.", U),
    ("Label: unsupported", U),
    ("Verdict - Irrelevant", I),
    ("The claim mentions a date.\nI checked the record.\nAnswer: Not true", U),
    ('{"label": "supported", "reason": "Well documented."}', S),
    ('{"label": "Not supported", "reason": "x"}', U),
    ('```json\n{"label": "irrelevant", "reason": "off topic"}\n```', I),
    ('{"label": "unknown", "reason": "The source does no', K),
]


#: Negations, qualifiers and hedges, each label decided by hand. A verdict restricted by a
#: qualifier ("but only ...", "not entirely", "partly") is unsupported: FActScore's annotators
#: label a partially supported fact as not supported (Min et al. 2023, §3.3).
QUALIFIED_CASES = [
    ("Supported? No.", U),
    ("Supported? Yes.", S),
    ("True or false? False.", U),
    ("Correct? No, the year was 1995.", U),
    ("Is this supported? The claim is false.", U),
    ("True, but only in children.", U),
    ("Yes, but only partially.", U),
    ("True only for adults.", U),
    ("Yes, partially.", U),
    ("Supported (partially).", U),
    ("True in part.", U),
    ("Partly.", U),
    ("Mostly.", U),
    ("Largely correct.", U),
    ("Only partially true.", U),
    ("Not entirely true.", U),
    ("Not entirely.", U),
    ("Not completely accurate; the dose is wrong.", U),
    ("Not fully supported by the evidence.", U),
    ("Not quite right.", U),
    ("Not really.", U),
    ("Not necessarily true.", U),
    ("True, but outdated.", U),
    ("Supported, with minor inaccuracies.", U),
    ("True, except for the date.", U),
    ("True, but the year is wrong.", U),
    ("True, but note that doses vary between countries.", S),
    ("Supported. Why? Because the label says so.", S),
    ("True. Is it relevant? No.", S),
    ("No, it is not supported.", U),
    ('{"label": "supported", "reason": "True, but only in children."}', S),
]


class TestQualifiedVerdicts:
    @pytest.mark.parametrize(("text", "label"), QUALIFIED_CASES, ids=[c[0][:40] for c in QUALIFIED_CASES])
    def test_table(self, text: str, label: Label) -> None:
        """A label asked as a question takes the answer after it; a qualified 'true' is unsupported."""
        assert parse_label(text) == label

    @pytest.mark.parametrize("text", ["Probably true.", "Possibly supported.", "Likely correct."],
                             ids=["probably", "possibly", "likely"])
    def test_hedged_verdicts_are_asked_again(self, text: str) -> None:
        """A hedged verdict names no label with certainty: OutputParseError (the adapter re-asks once)."""
        with pytest.raises(OutputParseError):
            parse_label(text)


class TestParseLabel:
    @pytest.mark.parametrize(("text", "label"), LABEL_CASES, ids=[c[0][:40] for c in LABEL_CASES])
    def test_table(self, text: str, label: Label) -> None:
        """Each accepted phrasing maps to its label; negations never map to supported."""
        assert parse_label(text) == label

    @pytest.mark.parametrize(
        "text",
        [
            "",
            "   \n ",
            "As an assistant I think this might be an interesting claim.",
            "The claim says the Eiffel Tower is in Paris.",
            "Supportedly, yes",
            "Notably true",
            '{"label": "maybe"}',
            '{"verdict": "supported"}',
            "[1, 2]",
        ],
        ids=["empty", "blank", "chatty", "restates-claim", "supportedly", "notably", "json-bad-label",
             "json-no-label", "json-list"],
    )
    def test_rejects(self, text: str) -> None:
        """Replies that name no label with certainty raise OutputParseError with the raw text."""
        with pytest.raises(OutputParseError) as info:
            parse_label(text)
        assert info.value.raw == text


class TestParseClaims:
    def test_bullets_and_preamble(self) -> None:
        """Markers are stripped, blank lines and a leading preamble are dropped."""
        text = "Here are the claims:\n- Metformin treats type 2 diabetes.\n\n2. It was approved in 1994.\n* (c) Fine."
        assert parse_claims(text) == [
            "Metformin treats type 2 diabetes.",
            "It was approved in 1994.",
            "(c) Fine.",
        ]

    def test_plain_lines(self) -> None:
        """One claim per line, whitespace normalized."""
        assert parse_claims("  Marie Curie was a physicist.  \nMarie  Curie won a Nobel Prize.") == [
            "Marie Curie was a physicist.",
            "Marie Curie won a Nobel Prize.",
        ]

    def test_json_object(self) -> None:
        """JSON {"claims": [...]} is accepted; empty strings are dropped."""
        assert parse_claims('{"claims": ["A is B.", " ", "C  is D."]}') == ["A is B.", "C is D."]

    def test_fenced_json_list(self) -> None:
        """A fenced bare JSON list of strings is accepted."""
        assert parse_claims('```json\n["A is B."]\n```') == ["A is B."]

    @pytest.mark.parametrize("text", ["NONE", "None.", '{"claims": []}'], ids=["NONE", "None.", "json-empty"])
    def test_explicit_none(self, text: str) -> None:
        """An explicit 'no claims' reply gives an empty list."""
        assert parse_claims(text) == []

    @pytest.mark.parametrize(
        "text",
        [
            "",
            "Claims:\n\n",
            "As an assistant I think this might be an interesting claim.",
            "Sure!\nI'm sorry, I can't help with that.",
            "- A is B.\nLet me know if you need more.",
            '{"claims": "A is B."}',
            '{"claims": [1, 2]}',
            '{"claims": ["A"',
            " ".join(["word"] * 81),
        ],
        ids=["empty", "only-heading", "chatty", "refusal", "chat-tail", "json-not-list", "json-not-strings",
             "json-truncated", "paragraph"],
    )
    def test_rejects(self, text: str) -> None:
        """Empty, chatty or malformed replies raise OutputParseError with the raw text."""
        with pytest.raises(OutputParseError) as info:
            parse_claims(text)
        assert info.value.raw == text


class TestParseVerdict:
    @pytest.mark.parametrize(
        ("reply", "knowledge", "evidence"),
        [
            ("Contradicted\n[2] gives 1994.", ("unsupported", "contradicted"), ("unsupported", "contradicted")),
            ("False.", ("unsupported", "contradicted"), ("unsupported", "contradicted")),
            ("Not true: it treats type 2 only.", ("unsupported", "contradicted"), ("unsupported", "contradicted")),
            ('{"label": "contradicted", "reason": "x"}', ("unsupported", "contradicted"), ("unsupported", "contradicted")),
            ("Not supported by the evidence", ("unsupported", None), ("unsupported", "no_evidence")),
            ('{"label": "not_supported", "reason": "x"}', ("unsupported", None), ("unsupported", "no_evidence")),
            ("Not_supported", ("unsupported", None), ("unsupported", "no_evidence")),
            ("Not enough information.", ("unknown", None), ("unsupported", "no_evidence")),
            ("Unsupported", ("unsupported", None), ("unsupported", None)),
            ("Partially true.", ("unsupported", None), ("unsupported", None)),
            ("Supported", ("supported", None), ("supported", None)),
            ("Irrelevant", ("irrelevant", None), ("irrelevant", None)),
        ],
        ids=["contradicted", "false", "not-true", "json-contradicted", "not-supported-by-evidence",
             "json-not-supported", "underscore", "not-enough-info", "bare-unsupported", "partially", "supported",
             "irrelevant"],
    )
    def test_reason(self, reply: str, knowledge: tuple[str, str | None], evidence: tuple[str, str | None]) -> None:
        """Contradiction words give contradicted; 'not supported' / 'no evidence' give no_evidence against passages only."""
        for with_evidence, expected in ((False, knowledge), (True, evidence)):
            label, reason = parse_verdict(reply, with_evidence=with_evidence)
            assert (str(label), None if reason is None else str(reason)) == expected

    def test_parse_label_unchanged_by_reasons(self) -> None:
        """parse_label gives the label parse_verdict gives, without evidence."""
        assert parse_label("Contradicted") is Label.UNSUPPORTED
        assert parse_label("Not enough information") is Label.UNKNOWN
