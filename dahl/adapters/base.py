"""The Splitter and Checker protocols every adapter implements (DESIGN.md §6)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dahl.records import Answer, Claim, Verdict

__all__ = ["Checker", "Splitter"]


@runtime_checkable
class Splitter(Protocol):
    """Turns an answer into atomic claims.

    Attributes:
        fingerprint: stable string naming the Splitter and every setting that
            changes its output (goes into cache keys).
    """

    fingerprint: str

    async def split(self, answer: Answer) -> list[Claim]:
        """Split ``answer.response`` (already preprocessed) into claims, in answer order.

        Raises:
            AdapterError: the split failed (the answer gets status ``error``).
        """
        ...


@runtime_checkable
class Checker(Protocol):
    """Decides whether one claim is supported.

    Attributes:
        fingerprint: stable string naming the Checker and every setting that
            changes its output (goes into cache keys).
    """

    fingerprint: str

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return the verdict on ``claim`` (``answer`` gives the question for context).

        A Checker returns a Verdict with label ``unknown`` when it cannot decide.

        Raises:
            AdapterError: the call failed; the pipeline records label ``error``.
        """
        ...
