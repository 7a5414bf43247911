"""Tests for dahl.adapters._given: claims supplied with the input."""

from __future__ import annotations

import pytest

from dahl.adapters._base import Splitter
from dahl.adapters._given import GivenSplitter
from dahl.errors import ConfigError
from dahl.records import Answer, Claim, GivenClaim, Label


class TestGivenSplitter:
    async def test_claims_in_order_with_labels(self) -> None:
        """Given claims come back normalized, indexed in order, with their labels."""
        answer = Answer(
            id="a1",
            question="q",
            response="r",
            claims=(
                GivenClaim(text="  Zinc is\na metal. ", label=Label.SUPPORTED),
                GivenClaim(text="Zinc is blue."),
                GivenClaim(text="Cafe\u0301 is French.", label=Label.IRRELEVANT),
            ),
        )
        assert await GivenSplitter().split(answer) == [
            Claim(text="Zinc is a metal.", index=0, given_label=Label.SUPPORTED),
            Claim(text="Zinc is blue.", index=1),
            Claim(text="Café is French.", index=2, given_label=Label.IRRELEVANT),
        ]

    async def test_empty_claims(self) -> None:
        """An empty claim tuple gives no claims (not an error)."""
        answer = Answer(id="a1", question="q", response="r", claims=())
        assert await GivenSplitter().split(answer) == []

    async def test_missing_claims(self) -> None:
        """An answer without claims raises ConfigError naming the answer id."""
        answer = Answer(id="bio-17", question="q", response="r")
        with pytest.raises(ConfigError, match=r"--splitter given needs claims in the input.*bio-17"):
            await GivenSplitter().split(answer)

    def test_protocol_and_fingerprint(self) -> None:
        """GivenSplitter satisfies the Splitter protocol with fingerprint given/v1."""
        assert isinstance(GivenSplitter(), Splitter)
        assert GivenSplitter.fingerprint == "given/v1"
