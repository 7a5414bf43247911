"""Tests for the rule Splitter's source spans and abbreviations (rules/v6, issue 19)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dahl.adapters._rules import split_claims
from dahl.sentences import ABBREVIATIONS, NON_FINAL, split_sentences


def pairs(text: str) -> list[tuple[str, str]]:
    """(claim text, the text of its source span) per claim."""
    return [(claim, text[a:b]) for claim, (a, b), _ in split_claims(text)]


class TestAbbreviations:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "The tumor measured approx. 5 cm in diameter.",
                [
                    ("The tumor measured approx. 5 cm", "The tumor measured approx. 5 cm"),
                    ("The tumor measured approx. 5 cm in diameter.", "in diameter."),
                ],
            ),
            (
                "The patient weighed ca. 70 kg at admission.",
                [
                    ("The patient weighed ca. 70 kg", "The patient weighed ca. 70 kg"),
                    ("The patient weighed ca. 70 kg at admission.", "at admission."),
                ],
            ),
            (
                "Response rates were 30% and 20% resp. in the two arms.",
                [("Response rates were 30% and 20% resp. in the two arms.",) * 2],
            ),
            (
                "Streptococcus sp. causes pharyngitis.",
                [("Streptococcus sp. causes pharyngitis.",) * 2],
            ),
            (
                "Several Streptococcus spp. colonize the throat.",
                [("Several Streptococcus spp. colonize the throat.",) * 2],
            ),
            ("See Vol. 3 of the series.", [("See Vol. 3 of the series.",) * 2]),
            (
                "She earned a Ph.D. in chemistry in 1990.",
                [
                    ("She earned a Ph.D.", "She earned a Ph.D."),
                    ("The Ph.D. was in chemistry", "in chemistry"),
                    ("She earned a Ph.D. in 1990.", "in 1990."),
                ],
            ),
            (
                "Some NSAIDs, e.g. ibuprofen, reduce inflammation.",
                [("Some NSAIDs, e.g. ibuprofen, reduce inflammation.",) * 2],
            ),
            (
                "Some NSAIDs, i.e. non-selective COX inhibitors, irritate the stomach.",
                [("Some NSAIDs, i.e. non-selective COX inhibitors, irritate the stomach.",) * 2],
            ),
            (
                "The U.S. Food and Drug Administration approved the drug in 2019.",
                [
                    (
                        "The U.S. Food and Drug Administration approved the drug",
                        "The U.S. Food and Drug Administration approved the drug",
                    ),
                    ("The U.S. Food and Drug Administration approved the drug in 2019.", "in 2019."),
                ],
            ),
            (
                "Smith et al. reported the first case in 1998.",
                [
                    ("Smith et al. reported the first case", "Smith et al. reported the first case"),
                    ("Smith et al. reported the first case in 1998.", "in 1998."),
                ],
            ),
            ("Dr. Jones treated the patient.", [("Dr. Jones treated the patient.",) * 2]),
            (
                "The results are shown in Fig. 2 of the paper.",
                [("The results are shown in Fig. 2 of the paper.",) * 2],
            ),
            (
                "The drug was approved as No. 5 in the list.",
                [
                    ("The drug was approved as No. 5", "The drug was approved as No. 5"),
                    ("The drug was approved as No. 5 in the list.", "in the list."),
                ],
            ),
            ("Aspirin vs. placebo reduced pain.", [("Aspirin vs. placebo reduced pain.",) * 2]),
            (
                "Common causes include viruses, bacteria, fungi, etc. in most patients.",
                [
                    ("Common causes include viruses", "Common causes include viruses"),
                    ("Common causes include bacteria", "bacteria"),
                    ("Common causes include fungi", "fungi, etc. in most patients."),
                ],
            ),
        ],
        ids=["approx", "ca", "resp", "sp", "spp", "vol", "phd", "eg-apposition", "ie-apposition",
             "us-fda-name-whole", "et-al", "dr", "fig", "no", "vs", "etc"],
    )
    def test_issue_cases(self, text: str, expected: list[tuple[str, str]]) -> None:
        """Every abbreviation case of issue 19: no cut inside, names and appositions whole."""
        assert pairs(text) == expected

    def test_final_abbreviation_before_capital_ends_sentence(self) -> None:
        """'U.S.' and 'etc.' may close a sentence: a capital after them starts the next one."""
        text = "He lives in the U.S. He is a doctor. Causes include viruses, etc. They spread."
        assert [text[a:b] for a, b in split_sentences(text)] == [
            "He lives in the U.S.", "He is a doctor.", "Causes include viruses, etc.", "They spread.",
        ]

    def test_non_final_abbreviation_never_ends_sentence(self) -> None:
        """'Dr.' before a capitalized name and 'approx.' before a number stay in the sentence."""
        text = "He met Dr. Smith in Rome. It weighs approx. 3 kg."
        assert [text[a:b] for a, b in split_sentences(text)] == [
            "He met Dr. Smith in Rome.", "It weighs approx. 3 kg.",
        ]

    def test_one_list(self) -> None:
        """NON_FINAL is part of ABBREVIATIONS, and every issue abbreviation is in it."""
        assert NON_FINAL <= ABBREVIATIONS
        issue = "approx. ca. resp. sp. spp. Vol. Ph.D. e.g. i.e. al. U.S. Dr. Fig. No. vs. etc.".split()
        assert [a for a in issue if a not in ABBREVIATIONS] == []


class TestPersonLikeClaims:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "Takeo Miki died in Tokyo at the age of 81 due to heart failure.",
                [
                    ("Takeo Miki died in Tokyo", "Takeo Miki died in Tokyo"),
                    ("Takeo Miki died at the age of 81", "at the age of 81"),
                    ("Takeo Miki died due to heart failure.", "due to heart failure."),
                ],
            ),
            (
                "Lactic acidosis is a rare but serious side effect of metformin.",
                [("Lactic acidosis is a rare but serious side effect of metformin.",) * 2],
            ),
            (
                "X was born in 1950 and died in 2001.",
                [("X was born in 1950", "X was born in 1950"), ("X died in 2001.", "died in 2001.")],
            ),
        ],
        ids=["head-restored-adjuncts", "coordinated-adjectives-whole", "subject-restored"],
    )
    def test_issue_prefixes_gone(self, text: str, expected: list[tuple[str, str]]) -> None:
        """No truncated prefix ('Takeo Miki died', 'Lactic acidosis is a rare'); subjects restored."""
        assert pairs(text) == expected


_WORDS = st.sampled_from(
    "X Miki it was born in Tokyo 1950 and died at the age of 81 due to heart failure , ; "
    "which is a rare but serious side effect that causes nausea headache dizziness including "
    "such as approx. ca. resp. e.g. i.e. Dr. U.S. etc. et al. ( ) \" - * 1. : ? ! \n".split(" ")
    + ["\n", "\n\n", "- ", "1. ", ".", " "]
)


class TestSpansPartition:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(_WORDS, max_size=60).map(" ".join))
    def test_spans_disjoint_in_order(self, text: str) -> None:
        """For any text: every span is non-empty, inside the text, and after the one before."""
        claims = split_claims(text)
        previous_end = 0
        previous_sentence = 0
        for claim, (a, b), sentence in claims:
            assert claim
            assert previous_end <= a < b <= len(text)
            assert text[a:b] == text[a:b].strip()
            assert sentence >= previous_sentence
            previous_end, previous_sentence = b, sentence

    def test_sentence_tiled(self) -> None:
        """A sentence's claim spans tile it: only separators lie between them."""
        text = "Aspirin causes nausea, headache, and dizziness."
        out = split_claims(text)
        assert [text[a:b] for _, (a, b), _ in out] == ["Aspirin causes nausea", "headache", "dizziness."]
        gaps = [text[out[k][1][1] : out[k + 1][1][0]] for k in range(len(out) - 1)]
        assert gaps == [", ", ", and "]
