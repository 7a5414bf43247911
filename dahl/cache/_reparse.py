"""A stored raw reply parsed again by the adapter's current parser (after a parser change).

The cache keeps each LLM reply's raw text beside its parsed value, so a parser
change re-parses old replies instead of calling again. The caching wrappers, the
dry run and the batch planner all decide "does this entry answer the call?" here.
"""

from __future__ import annotations

import logging
from typing import TypeGuard

from dahl.adapters._base import RawSplitter, ReparsingChecker
from dahl.errors import DahlError
from dahl.records import Answer, Claim, Label, Verdict

__all__ = ["reparse_claims", "reparse_verdict"]

log = logging.getLogger(__name__)


_CLASS_HAS: dict[tuple[type, type], bool] = {}


def _has(cls: type, protocol: type) -> bool:
    """Whether instances of ``cls`` have ``protocol``'s methods, decided once per class: a
    runtime protocol check costs ~10 µs and a re-score asks it for every stored entry (both
    protocols have methods only, which an instance cannot add without its class)."""
    known = _CLASS_HAS.get((cls, protocol))
    if known is None:
        known = _CLASS_HAS[cls, protocol] = issubclass(cls, protocol)
    return known


def _is_raw_splitter(splitter: object) -> TypeGuard[RawSplitter]:
    return _has(type(splitter), RawSplitter)


def _is_reparsing(checker: object) -> TypeGuard[ReparsingChecker]:
    return _has(type(checker), ReparsingChecker)


def reparse_claims(splitter: object, raw: str | None, answer: Answer) -> list[Claim] | None:
    """``splitter.parse_raw(raw, answer)``, or None when there is no raw reply, the Splitter
    is no :class:`~dahl.adapters._base.RawSplitter`, or the current parser rejects the reply
    (a split call is needed)."""
    if raw is None or not _is_raw_splitter(splitter):
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
    if raw is None or not _is_reparsing(checker):
        return None
    try:
        verdict = checker.parse_raw(raw)
    except DahlError as exc:
        log.debug("stored reply no longer parses (%s); checking again", exc)
        return None
    return verdict if verdict.label is not Label.ERROR else None
