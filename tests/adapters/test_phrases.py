from __future__ import annotations

import pytest

from dahl.adapters._phrases import own_claim, phrase_claims
from dahl.adapters._rules import split_claims


class TestPhraseClaims:
    def test_noun_phrase_is_stated_about_its_noun(self) -> None:
        """A phrase that modifies the noun before it is a claim about that noun; segments are disjoint."""
        assert phrase_claims("Insulin binds receptors on muscle cells in the liver.") == [
            ("Insulin binds receptors", "Insulin binds receptors"),
            ("The receptors are on muscle cells", "on muscle cells"),
            ("The muscle cells are in the liver.", "in the liver."),
        ]

    def test_adjunct_gets_head_restored(self) -> None:
        """A time or place phrase attaches to the verb: the head is restored before it."""
        assert phrase_claims("Takeo Miki died in Tokyo at the age of 81 due to heart failure.") == [
            ("Takeo Miki died in Tokyo", "Takeo Miki died in Tokyo"),
            ("Takeo Miki died at the age of 81", "at the age of 81"),
            ("Takeo Miki died due to heart failure.", "due to heart failure."),
        ]

    def test_prefix_on_participle_dropped(self) -> None:
        """'Insulin is secreted' stops on a participle: the first claim adds 'by beta cells' to it."""
        assert phrase_claims("Insulin is secreted by beta cells in the pancreas.") == [
            ("Insulin is secreted by beta cells", "Insulin is secreted by beta cells"),
            ("The beta cells are in the pancreas.", "in the pancreas."),
        ]

    def test_prefix_ending_on_verb_is_dropped_and_its_words_carried(self) -> None:
        """'He was born' says nothing alone: not emitted; 'in 1900' gets it restored as its head."""
        assert phrase_claims("He was born in Rome in 1900") == [
            ("He was born in Rome", "He was born in Rome"),
            ("He was born in 1900", "in 1900"),
        ]

    def test_reporting_verb_prefix_dropped(self) -> None:
        """'Our results suggest' (before 'that') is not a claim of its own."""
        assert phrase_claims("Our results suggest that X lowers Y") == [
            ("Our results suggest that X lowers Y", "Our results suggest that X lowers Y"),
        ]

    @pytest.mark.parametrize(
        "claim",
        [
            "X (found in soil with water) is common",
            "She starred in Bring It On",  # "She starred" stops on a verb: dropped
            "It was studied between 1985 and 2014",
            "Without doubt X is common",
        ],
        ids=["inside-parentheses", "capitalized-title-word", "between-and", "first-word"],
    )
    def test_no_cut(self, claim: str) -> None:
        """Parentheses, capitalized markers, 'between A and B' and a leading marker are not cut."""
        assert phrase_claims(claim) == [(claim, claim)]

    @pytest.mark.parametrize(
        "claim",
        ["X reduces pain and fever", "Lactic acidosis is a rare but serious side effect"],
        ids=["and", "but"],
    )
    def test_no_conjunction_cut(self, claim: str) -> None:
        """'and' / 'but' are the coordination rule's, not this rule's: no truncated 'is a rare'."""
        assert phrase_claims(claim) == [(claim, claim)]

    def test_no_cut_after_binding_abbreviation(self) -> None:
        """'resp.' binds to the words after it: no cut before 'in the two arms'."""
        claim = "Rates were 30% and 20% resp. in the two arms."
        assert phrase_claims(claim) == [(claim, claim)]

    def test_no_marker(self) -> None:
        """A claim without a marker comes back whole, as its own text."""
        assert phrase_claims("Zinc is a metal.") == [("Zinc is a metal.", "Zinc is a metal.")]


class TestOwnSpans:
    def test_span_points_at_added_phrase(self) -> None:
        """In split_claims, a phrase claim's span covers only the phrase it adds."""
        text = "He joined the army in 1990."
        out = split_claims(text)
        assert [(claim, text[a:b]) for claim, (a, b), _ in out] == [
            ("He joined the army", "He joined the army"),
            ("He joined the army in 1990.", "in 1990."),
        ]


class TestOwnClaim:
    @pytest.mark.parametrize(
        ("before", "own", "expected"),
        [
            ("She earned a Ph.D.", "in physics", "The Ph.D. was in physics"),
            ("Samantha is an Indian actress", "who works in Tamil films", "Samantha works in Tamil films"),
            ("Morton was inducted into the Hall of Fame", "in 1992", "Morton was inducted in 1992"),
            ("Samantha made her acting debut", "in 2010", "Her acting debut was in 2010"),
            ("Botak Chin remains a figure", "while others see him as a terrorist", "Others see him as a terrorist"),
            ("The tumor measured approx. 5 cm", "in diameter", None),
            ("The song topped the charts", "in 1963", None),
            ("He married his wife", "in 1990", None),
            ("Therapy combines a proton pump inhibitor", "with antibiotics", None),
            ("He has managed a number of clubs", "in Italy", None),
        ],
        ids=["noun-phrase", "who-after-copula", "passive-time", "event-time", "contrast-clause",
             "number", "time-on-a-definite-object", "time-on-a-person", "with-may-attach-to-verb", "quantity"],
    )
    def test_added_words_stated_on_their_own(self, before: str, own: str, expected: str | None) -> None:
        """An extension is a claim about what it modifies where that reads as a fact, else None."""
        assert own_claim(before, own) == expected
