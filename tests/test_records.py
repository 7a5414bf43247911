"""Tests of dahl.records helpers: text normalization used by every cache key."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from dahl.records import normalize_text


def _reference(text: str) -> str:
    # The definition: NFC, then runs of whitespace collapsed to one space, stripped.
    return " ".join(unicodedata.normalize("NFC", text).split())


class TestNormalizeText:
    def test_collapses_and_strips_whitespace(self) -> None:
        """Tabs, newlines, double and edge spaces become single inner spaces."""
        assert normalize_text("  Insulin\tis \n\n made  here. ") == "Insulin is made here."

    def test_composes_to_nfc(self) -> None:
        """A decomposed e + combining acute becomes the single code point é."""
        assert normalize_text("Caf\u0065\u0301 au lait") == "Caf\u00e9 au lait"

    def test_unicode_spaces_are_whitespace(self) -> None:
        """No-break, ideographic and line-separator spaces count as whitespace."""
        assert normalize_text("a\u00a0b\u3000c\u2028d\x1fe") == "a b c d e"

    def test_normalized_text_is_returned_as_is(self) -> None:
        """An already normalized text comes back unchanged (the fast path)."""
        text = "The fortress was founded in 1748 (fact 0.0)."
        assert normalize_text(text) is text

    @settings(max_examples=500, deadline=None)
    @given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
    def test_equals_the_definition(self, text: str) -> None:
        """The fast paths give the same text as NFC + split + join on any input."""
        assert normalize_text(text) == _reference(text)

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=" \t\n\u00a0\u0301e\u00e9ab\u200b\x00", max_size=20))
    def test_equals_the_definition_on_whitespace_heavy_text(self, text: str) -> None:
        """Texts built mostly of whitespace and combining marks agree with the definition."""
        assert normalize_text(text) == _reference(text)
