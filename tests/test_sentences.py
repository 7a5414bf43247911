"""Tests for dahl.sentences: sentence spans around abbreviations, numbers and lists."""

from __future__ import annotations

import pytest

from dahl.sentences import is_list_item, split_sentences


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


CASES = [
    pytest.param(
        "Aspirin inhibits COX, e.g. COX-1 and COX-2. It is cheap.",
        ["Aspirin inhibits COX, e.g. COX-1 and COX-2.", "It is cheap."],
        id="e.g.",
    ),
    pytest.param(
        "It binds the receptor, i.e. the β1 site. It works.",
        ["It binds the receptor, i.e. the β1 site.", "It works."],
        id="i.e.",
    ),
    pytest.param(
        "Smith et al. reported this in 2019. Others disagreed.",
        ["Smith et al. reported this in 2019.", "Others disagreed."],
        id="et-al",
    ),
    pytest.param(
        "Drug A vs. drug B was compared. B won.",
        ["Drug A vs. drug B was compared.", "B won."],
        id="vs.",
    ),
    pytest.param(
        "Dr. Smith treated him. He recovered.",
        ["Dr. Smith treated him.", "He recovered."],
        id="Dr.",
    ),
    pytest.param(
        "It lowers factors II, VII, IX and X. Its effect is monitored with the INR.",
        ["It lowers factors II, VII, IX and X.", "Its effect is monitored with the INR."],
        id="capital-letter-then-opener",
    ),
    pytest.param(
        "He took vitamin K. It helped. J. A. Smith wrote it. It was made in the U.S. The end.",
        ["He took vitamin K.", "It helped.", "J. A. Smith wrote it.", "It was made in the U.S.", "The end."],
        id="letter-stop-keeps-initials",
    ),
    pytest.param(
        "The dose is 2.5 mg daily. Take it with food.",
        ["The dose is 2.5 mg daily.", "Take it with food."],
        id="decimal-dose",
    ),
    pytest.param(
        "The effect was significant (p < 0.05). It was large.",
        ["The effect was significant (p < 0.05).", "It was large."],
        id="p-value",
    ),
    pytest.param(
        "α-synuclein aggregates in PD. β-blockers reduce heart rate.",
        ["α-synuclein aggregates in PD.", "β-blockers reduce heart rate."],
        id="greek-letters",
    ),
    pytest.param(
        "Causes include:\n1. Smoking\n2. Obesity\n3. Diabetes",
        ["Causes include:", "1. Smoking", "2. Obesity", "3. Diabetes"],
        id="numbered-list",
    ),
    pytest.param(
        "Risk factors:\n- Smoking\n* Age\n• Sex",
        ["Risk factors:", "- Smoking", "* Age", "• Sex"],
        id="bulleted-list",
    ),
    pytest.param(
        "Steps:\n  3. Rest well. Drink water.\n4) Sleep",
        ["Steps:", "3. Rest well.", "Drink water.", "4) Sleep"],
        id="indented-item-with-two-sentences",
    ),
    pytest.param(
        "This sentence is hard\nwrapped here. Next one.",
        ["This sentence is hard\nwrapped here.", "Next one."],
        id="soft-wrap-joined",
    ),
    pytest.param(
        "First paragraph\n\nSecond paragraph",
        ["First paragraph", "Second paragraph"],
        id="blank-line-splits",
    ),
]


class TestSplitSentences:
    @pytest.mark.parametrize(("text", "expected"), CASES)
    def test_case(self, text: str, expected: list[str]) -> None:
        """Each case yields exactly the expected sentences, in order."""
        assert sentences(text) == expected

    @pytest.mark.parametrize("text", ["", "   \n\t "], ids=["empty", "whitespace"])
    def test_blank_text(self, text: str) -> None:
        """Blank text has no sentences."""
        assert split_sentences(text) == []

    def test_spans_exclude_whitespace(self) -> None:
        """Spans start and end on non-space characters and index the original text."""
        text = "  One here.   Two there.  "
        assert split_sentences(text) == [(2, 11), (14, 24)]

    def test_repeated_sentence_gets_its_own_span(self) -> None:
        """A sentence that occurs twice gets two different spans (not the first match twice)."""
        text = "Same words. Same words."
        assert split_sentences(text) == [(0, 11), (12, 23)]


class TestIsListItem:
    @pytest.mark.parametrize(
        ("line", "expected"),
        [
            ("- a", True),
            ("12. b", True),
            ("a) c", True),
            ("## Heading", True),
            ("2019. A year", False),
            ("-5 degrees", False),
            ("Plain text", False),
        ],
        ids=["dash", "number", "letter", "heading", "year-not-marker", "negative-number", "plain"],
    )
    def test_marker(self, line: str, expected: bool) -> None:
        """List markers need a following space; four-digit years are not markers."""
        assert is_list_item(line) is expected
