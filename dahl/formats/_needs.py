"""What a run needs each answer to carry (claims, labels), checked as records are read, so a
record without it is a bad record named by file, line and field."""

from __future__ import annotations

import enum

from dahl.errors import InputError
from dahl.records import Answer

__all__ = ["Needs", "check_needs"]


class Needs(enum.Flag):
    """What every answer must carry.

    Attributes:
        NOTHING: no requirement (the default).
        CLAIMS: a ``claims`` list (possibly empty), unless abstained (``--splitter given``).
        LABELS: a label on every given claim (``--checker replay``); ``"unknown"`` is one.
    """

    NOTHING = 0
    CLAIMS = enum.auto()
    LABELS = enum.auto()


def check_needs(answer: Answer, needs: Needs, *, file: str, line: int) -> None:
    """Raise if ``answer``, read from ``file`` at ``line``, lacks what ``needs`` asks for.

    Raises:
        InputError: no claims (field ``claims``), or the first claim without a label.
    """
    if Needs.CLAIMS in needs and answer.claims is None and not answer.abstained:
        raise InputError(
            "no claims; --splitter given needs claims on every answer that is not abstained",
            file=file, line=line, field="claims",
        )
    if Needs.LABELS in needs:
        for i, claim in enumerate(answer.claims or ()):
            if claim.label is None:
                raise InputError(
                    "claim has no label; --checker replay needs a label on every claim",
                    file=file, line=line, field=f"$.claims[{i}].label",
                )
