"""Sentence segmentation: character spans of the sentences of a text.

Lines are first grouped into blocks (a list item, a heading, or a line after a blank line or a
terminal mark starts one; a lowercase line joins the one before); each block is segmented by
pysbd (Sadvilkar & Neumann 2020, "PySBD"), then breaks after :data:`NON_FINAL` abbreviations are
joined, and those after other :data:`ABBREVIATIONS` unless a capital letter follows.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import pysbd  # type: ignore[import-untyped]

__all__ = ["ABBREVIATIONS", "LIST_MARKER", "NON_FINAL", "ends_with_abbreviation", "is_list_item", "split_sentences"]

log = logging.getLogger(__name__)

#: A list-item marker at the start of a line: bullets, "1." / "1)" / "(1)", "a)".
LIST_MARKER = re.compile(r"[ \t]*(?:[-*•‣◦▪–]|\(?\d{1,3}[.)]|\(?[a-zA-Z][)]|#{1,6})[ \t]+")

_TERMINAL_LINE_END = re.compile(r"[.!?:;…)\]\"'”’»]\s*$")
_STARTS_LOWER = re.compile(r"\s*[a-z]")
_INNER_STOP = re.compile(r"[.!?…]")
# pysbd takes a lone capital before ". " for an initial ("J. Smith"): a capital or roman numeral
# (not after "." or a letter) followed by a common sentence opener ends a sentence.
_OPENERS = (
    "It Its He His She Her They Their Them This These That Those There The A An We Our "
    "In On At For From After Before During When While Although Though Because If As Since "
    "However Therefore Thus Also Other Another Both Each Many Most Some Such"
)
_LETTER_STOP = re.compile(
    r"(?<![.\w])(?:[A-Z]|[IVXLCDM]{2,})\.(?=\s+(?:" + "|".join(_OPENERS.split()) + r")\s)"
)

#: Abbreviations that never end a sentence: a word (or number) of the same sentence follows.
NON_FINAL = frozenset(
    "approx. ca. c. cf. e.g. i.e. vs. viz. Dr. Mr. Mrs. Ms. Prof. St. Fig. Figs. No. Nos. "
    "Vol. Vols. Eq. Ref. Refs. Ch. Sec. p. pp. resp. var. subsp. ssp.".split()
)
#: Every abbreviation kept whole; those outside :data:`NON_FINAL` may end a sentence.
ABBREVIATIONS = NON_FINAL | frozenset(
    "etc. al. sp. spp. Ph.D. M.D. B.Sc. M.Sc. U.S. U.K. U.N. E.U. Inc. Ltd. Co. Corp. Jr. Sr.".split()
)
_LOWER_ABBREVIATIONS = frozenset(a.lower() for a in ABBREVIATIONS)
_NON_FINAL_LOWER = frozenset(a.lower() for a in NON_FINAL if a[:1].islower())
# The last whitespace-separated token of a piece, "(approx." -> "approx.".
_LAST_TOKEN = re.compile(r"[\w.]+\.\Z")


def ends_with_abbreviation(piece: str) -> str | None:
    """The abbreviation of :data:`ABBREVIATIONS` that ``piece`` ends with, or None (lowercase ones
    match in any case, capitalized ones as written)."""
    match = _LAST_TOKEN.search(piece.rstrip())
    if match is None:
        return None
    token = match.group()
    if token in ABBREVIATIONS or token.lower() in _NON_FINAL_LOWER:
        return token
    low = token.lower()
    return token if low in _LOWER_ABBREVIATIONS and token[:1].islower() else None


def _joins(previous: str, following: str) -> bool:
    """True when a sentence break between ``previous`` and ``following`` is an abbreviation's."""
    abbreviation = ends_with_abbreviation(previous)
    if abbreviation is None:
        return False
    if abbreviation in NON_FINAL or abbreviation.lower() in _NON_FINAL_LOWER:
        return True
    opening = following.lstrip()[:1]
    return bool(opening) and not opening.isupper()


# pysbd's Segmenter keeps per-call state on the instance: one per thread.
_local = threading.local()


def _segmenter() -> Any:
    seg: Any = getattr(_local, "segmenter", None)
    if seg is None:
        seg = pysbd.Segmenter(language="en", clean=False, char_span=False)
        _local.segmenter = seg
    return seg


def is_list_item(line: str) -> bool:
    """Return True when ``line`` starts with a list marker or a markdown heading mark."""
    return LIST_MARKER.match(line) is not None


def _blocks(text: str) -> list[tuple[int, int]]:
    """Character spans of the line blocks of ``text`` (see the module docstring)."""
    blocks: list[tuple[int, int]] = []
    pos = 0
    prev_line = ""
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line)
        pos = end
        body = line.strip()
        if not body:
            prev_line = ""
            continue
        soft_wrap = (
            blocks
            and prev_line
            and not _TERMINAL_LINE_END.search(prev_line)
            and not is_list_item(line)
            and _STARTS_LOWER.match(line) is not None
        )
        if soft_wrap:
            blocks[-1] = (blocks[-1][0], end)
        else:
            blocks.append((start, end))
        prev_line = body
    return blocks


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split ``text`` into sentences.

    Args:
        text: any text; newlines mark list items and paragraphs.

    Returns:
        ``(start, end)`` character offsets into ``text``, one per sentence, in order, whitespace
        excluded; empty for blank text.
    """
    spans: list[tuple[int, int]] = []
    for b_start, b_end in _blocks(text):
        # Newline -> space keeps every offset valid while pysbd sees one paragraph.
        block = text[b_start:b_end].replace("\r", " ").replace("\n", " ")
        marker = LIST_MARKER.match(block)
        # pysbd would cut "1." off an item: segment after the marker, then give it back.
        skip = marker.end() if marker else 0
        first = len(spans)
        spans.extend((b_start + skip + s, b_start + skip + e) for s, e in _segment(block[skip:]))
        if marker and len(spans) > first:
            spans[first] = (b_start + len(block) - len(block.lstrip()), spans[first][1])
    return spans


def _segment(block: str) -> list[tuple[int, int]]:
    """Sentence spans inside one line block (no newlines), via pysbd."""
    body = block.rstrip()
    if not body.strip():
        return []
    if not _INNER_STOP.search(body[:-1]):
        # No stop before the end: one sentence, no pysbd.
        lead = len(body) - len(body.lstrip())
        return [(lead, len(body))]
    spans: list[tuple[int, int]] = []
    cursor = 0
    sentences: list[str] = _segmenter().segment(block)
    for sent in sentences:
        piece = sent.strip()
        if not piece:
            continue
        found = block.find(piece, cursor)
        if found < 0:
            # pysbd altered the text (it should not with clean=False): keep the rest whole.
            log.debug("pysbd sentence not found verbatim; keeping rest of block")
            rest = block[cursor:]
            if rest.strip():
                lead = len(rest) - len(rest.lstrip())
                spans.append((cursor + lead, len(body)))
            return spans
        if spans and _joins(block[spans[-1][0] : spans[-1][1]], piece):
            # "approx. | 5 cm": the break was an abbreviation's, join the two.
            spans[-1] = (spans[-1][0], found + len(piece))
        else:
            spans.extend(_split_after_letter(block, found, found + len(piece)))
        cursor = found + len(piece)
    return spans


def _split_after_letter(block: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut ``block[start:end]`` after "X." before a common sentence opener (:data:`_LETTER_STOP`)."""
    spans: list[tuple[int, int]] = []
    for match in _LETTER_STOP.finditer(block, start, end):
        spans.append((start, match.end()))
        rest = block[match.end() : end]
        start = match.end() + len(rest) - len(rest.lstrip())
    spans.append((start, end))
    return spans
