"""Label spellings of other scorers' outputs (SAFE, VeriScore) -> :class:`~dahl.records.Label`."""

from __future__ import annotations

from dahl.records import Label

__all__ = ["SCORER_LABELS", "scorer_label"]

#: Lower-cased, final period dropped -> Label (VeriScore counts inconclusive as unsupported).
SCORER_LABELS: dict[str, Label] = {
    "supported": Label.SUPPORTED,
    "not supported": Label.UNSUPPORTED,
    "unsupported": Label.UNSUPPORTED,
    "contradicted": Label.UNSUPPORTED,
    "inconclusive": Label.UNSUPPORTED,
    "irrelevant": Label.IRRELEVANT,
}


def scorer_label(value: str) -> Label:
    """Map one scorer label (``"Not Supported"``, ``"Supported."``) to a Label.

    Raises:
        ValueError: a spelling not in :data:`SCORER_LABELS` (the message lists them).
    """
    label = SCORER_LABELS.get(value.strip().rstrip(".").strip().lower())
    if label is None:
        raise ValueError(f"unknown label {value!r}; expected one of {', '.join(SCORER_LABELS)}")
    return label
