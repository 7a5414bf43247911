"""What a run needs each answer to carry, checked as records are read.

A Splitter or Checker that takes its work from the input (``--splitter given``
reads the claims, ``--checker replay`` their labels) makes a record without it
a bad record, named by file, line and field, rather than an error deep in the
run (a run stopped at the first answer without claims) or a silent default
(a claim without a label scored as ``unknown``).
"""

from __future__ import annotations

import enum

from dahl.errors import InputError
from dahl.records import Answer

__all__ = ["Needs", "check_needs"]


class Needs(enum.Flag):
    """What every answer must carry.

    Attributes:
        NOTHING: no requirement (the default).
        CLAIMS: a ``claims`` list, unless the answer is abstained (``--splitter given``);
            an empty list is claims given, none of them (the answer is excluded, as
            FactBench's HaluEval rows are), not a bad record.
        LABELS: a label on every given claim (``--checker replay``); an explicit
            ``"unknown"`` is a label.
    """

    NOTHING = 0
    CLAIMS = enum.auto()
    LABELS = enum.auto()


def check_needs(answer: Answer, needs: Needs, *, file: str, line: int) -> None:
    """Raise if ``answer``, read from ``file`` at ``line``, lacks what ``needs`` asks for.

    Raises:
        InputError: no claims (field ``claims``), or a claim without a label
            (field ``$.claims[i].label``, the first such claim).
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
