"""A stored raw reply parsed again by the adapter's current parser (after a parser change).

The cache keeps each LLM reply's raw text beside its parsed value, so a parser
change re-parses old replies instead of calling again. The caching wrappers, the
dry run and the batch planner all decide "does this entry answer the call?" here.
"""

from __future__ import annotations

import logging
from dahl.adapters._base import RawSplitter, ReparsingChecker
from dahl.errors import DahlError
from dahl.records import Answer, Claim, Label, Verdict

__all__ = ["reparse_claims", "reparse_verdict"]

log = logging.getLogger(__name__)


def reparse_claims(splitter: object, raw: str | None, answer: Answer) -> list[Claim] | None:
    """``splitter.parse_raw(raw, answer)``, or None when there is no raw reply, the Splitter
    is no :class:`~dahl.adapters._base.RawSplitter`, or the current parser rejects the reply
    (a split call is needed)."""
    if raw is None or not isinstance(splitter, RawSplitter):
        return None
    try:
        claims = splitter.parse_raw(raw, answer)
    except DahlError as exc:
        log.debug("stored split reply no longer parses (%s); splitting again", exc)
        return None
    return claims


def reparse_verdict(checker: object, raw: str | None) -> Verdict | None:
    """``checker.parse_raw(raw)``, or None when there is no raw reply, the Checker is no
    :class:`~dahl.adapters._base.ReparsingChecker` (or None), the current parser rejects
    the reply, or it parses to an error verdict (then the claim is checked again)."""
    if raw is None or not isinstance(checker, ReparsingChecker):
        return None
    try:
        verdict = checker.parse_raw(raw)
    except DahlError as exc:
        log.debug("stored reply no longer parses (%s); checking again", exc)
        return None
    return verdict if verdict.label is not Label.ERROR else None
