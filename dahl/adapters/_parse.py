"""Strict parsers for model replies: a check label, a split claim list, or a JSON object.

A reply is understood with certainty or rejected with :class:`~dahl.errors.OutputParseError`;
never ``eval``. Negations are matched before the words they negate. Rules that change scores:

- "partially true", "mostly true", "not entirely true" and a "true" restricted by what follows
  ("True, but only in children.") are ``unsupported``; a "but" restricting nothing keeps it.
- A label asked as a question is answered after the mark: "Supported? No." -> ``unsupported``.
- Hedges ("Probably true.") name no label with certainty; "cannot be determined", "not enough
  information", "unverifiable" -> ``unknown``.
- ``{"claims": []}`` or ``NONE`` parses to ``[]``; a reply with nothing usable is an error.
- Reasons for ``unsupported``: ``contradicted`` when the label says the claim is false
  ("False", "Incorrect", "Not true", "Refuted"); with evidence, ``no_evidence`` for "Not
  supported", "No / not enough evidence", "Not mentioned", "Not stated"; otherwise none.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson

from dahl.errors import OutputParseError
from dahl.records import Label, UnsupportedReason, normalize_text

__all__ = ["parse_claims", "parse_json_object", "parse_label", "parse_verdict", "unfence"]


def parse_json_object(raw: str) -> dict[str, Any]:
    """The JSON object of a reply: the whole text, or the text inside one ```json fence.

    Raises:
        OutputParseError: the reply is not one JSON object.
    """
    text = raw.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0].strip()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise OutputParseError(f"the reply is not JSON ({exc})", raw=raw) from None
    if not isinstance(value, dict):
        raise OutputParseError(f"the reply is a JSON {type(value).__name__}, not an object", raw=raw)
    return value

_CHECK_WORDS = ("supported", "unsupported", "irrelevant", "unknown")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_JSON_LABEL = re.compile(r'"label"\s*:\s*"([^"]{1,40})"')
_END = r"(?![\w-])"

# Leading decoration and lead-in words dropped before matching the label word.
_LEAD = re.compile(
    r"^(?:[\s*_#>`\"'\[(]+|(?:final\s+)?(?:answer|label|verdict|judg(?:e)?ment)\s*[:=-]\s*"
    r"|(?:the|this)\s+(?:claim|statement|fact)\s+is\s+|it\s+is\s+|it's\s+|this\s+is\s+)",
    re.IGNORECASE,
)
_FINAL_LINE = re.compile(
    r"^[\s*_#>`]*(?:final\s+)?(?:answer|label|verdict)\s*[:=-]\s*(.+)$", re.IGNORECASE
)

_TRUTH = r"(?:true|correct|accurate|supported|factual|verified|right)"
# A label asked as a question, answered after the mark ("Supported? No."); one clause only.
_QUESTION = re.compile(r"[^?.!\n]{1,40}\?\s*(\S.*)", re.DOTALL)
# What restricts a "true" right after it: "only ...", "partially", or a "but"/"except" clause
# naming a restriction or an error. Matched at the end of the label word.
_RESTRICTED = re.compile(
    r"[\s,;:(-]*(?:(?:only|partially|partly|in\s+part|mostly|largely|somewhat|except)\b"
    r"|with\s+(?:some\s+|minor\s+)?(?:caveats|exceptions|inaccuracies|errors)\b"
    r"|(?:but|though|although|however|yet)\b[^.;\n]*?\b(?:only|not|partially|partly|in\s+part|except|"
    r"incorrect|wrong|false|inaccurate|outdated|misleading|exaggerated|overstated)\b)",
    re.IGNORECASE,
)

# Ordered: a row only applies when no earlier row matched; negated and qualified forms first.
_LABEL_TABLE: tuple[tuple[re.Pattern[str], Label], ...] = tuple(
    (re.compile(r"^(?:" + pattern + ")" + _END, re.IGNORECASE), label)
    for pattern, label in (
        (r"not\s+(?:true|correct|accurate|supported|factual|verified)", Label.UNSUPPORTED),
        (r"not\s+(?:relevant|related)", Label.IRRELEVANT),
        (
            r"not\s+(?:entirely|completely|fully|quite|exactly|wholly|totally|necessarily|really|always)"
            rf"(?:\s+{_TRUTH})?",
            Label.UNSUPPORTED,
        ),
        (
            r"(?:only\s+)?(?:partially|partly|mostly|half|somewhat|largely|in\s+part)"
            rf"(?:[\s-]+(?:{_TRUTH}|false|incorrect|untrue))?",
            Label.UNSUPPORTED,
        ),
        (
            r"(?:(?:it|this|this\s+claim|the\s+claim)\s+)?"
            r"(?:cannot|can't|can\s+not|could\s+not|couldn't)\s+be\s+"
            r"(?:determined|verified|confirmed|established)",
            Label.UNKNOWN,
        ),
        (r"i\s+(?:cannot|can't|can\s+not|do\s+not|don't)\s+(?:determine|verify|tell|know)", Label.UNKNOWN),
        (
            r"undetermined|unknown|uncertain|unclear|unverifiable|indeterminate|not\s+sure"
            r"|(?:not\s+enough|insufficient|no)\s+(?:information|evidence|data)",
            Label.UNKNOWN,
        ),
        (r"not_supported|contradict(?:ed|s|ion)?|refuted", Label.UNSUPPORTED),
        (r"unsupported|untrue|false|incorrect|inaccurate|wrong|no", Label.UNSUPPORTED),
        (r"irrelevant", Label.IRRELEVANT),
        (r"supported|true|yes|correct|accurate", Label.SUPPORTED),
    )
)


_CONTRADICTED = re.compile(
    r"^(?:contradict(?:ed|s|ion)?|refuted|false|untrue|incorrect|inaccurate|wrong"
    r"|not\s+(?:true|correct|accurate|factual))" + _END,
    re.IGNORECASE,
)
_NO_EVIDENCE = re.compile(
    r"^(?:not[\s_]+supported|no[\s_]+evidence|(?:not\s+enough|insufficient)\s+(?:evidence|information|data)"
    r"|not\s+(?:mentioned|stated|in\s+the\s+(?:evidence|passages)))" + _END,
    re.IGNORECASE,
)
_NO_EVIDENCE_UNKNOWN = re.compile(
    r"^(?:no|not\s+enough|insufficient)\s+(?:evidence|information|data)" + _END, re.IGNORECASE
)


def unfence(text: str) -> str:
    """``text`` stripped, or the stripped inside of the one ``` fence it is."""
    text = text.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _lead_stripped(phrase: str) -> str:
    head = phrase.strip()
    while True:
        stripped = _LEAD.sub("", head, count=1)
        if stripped == head:
            return head
        head = stripped


@functools.lru_cache(maxsize=1024)
def _verdict_of(phrase: str, with_evidence: bool) -> tuple[Label, UnsupportedReason | None] | None:
    """Label and reason named at the start of ``phrase``, or None (see the module docstring)."""
    label = _label_of(phrase)
    if label is None:
        return None
    head = _lead_stripped(phrase)
    asked = _QUESTION.match(head)
    if asked is not None and _label_of(asked.group(1)) is not None:
        head = _lead_stripped(asked.group(1))
    if with_evidence and label is Label.UNKNOWN and _NO_EVIDENCE_UNKNOWN.match(head):
        return Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE
    if label is not Label.UNSUPPORTED:
        return label, None
    if _CONTRADICTED.match(head):
        return label, UnsupportedReason.CONTRADICTED
    if with_evidence and _NO_EVIDENCE.match(head):
        return label, UnsupportedReason.NO_EVIDENCE
    return label, None


@functools.lru_cache(maxsize=1024)
def _label_of(phrase: str) -> Label | None:
    """Label named at the start of ``phrase`` (after lead-ins), or None (memoized: replies
    repeat the same few first lines)."""
    head = _lead_stripped(phrase)
    asked = _QUESTION.match(head)
    if asked is not None:
        answer = _label_of(asked.group(1))
        if answer is not None:
            return answer
    for pattern, label in _LABEL_TABLE:
        match = pattern.match(head)
        if match:
            if label is Label.SUPPORTED and _RESTRICTED.match(head, match.end()):
                return Label.UNSUPPORTED  # "True, but only in children."
            return label
    return None


def parse_label(text: str) -> Label:
    """Parse a check reply into one of supported / unsupported / irrelevant / unknown.

    Accepted: a JSON object ``{"label": ...}`` (also fenced, or cut off after the label); plain
    text whose first line starts with a label phrase; or text whose last line is
    ``Answer: <label>`` / ``Label: <label>``.

    Raises:
        OutputParseError: the reply names no label with certainty; ``raw`` is ``text``.
    """
    return parse_verdict(text)[0]


def parse_verdict(text: str, *, with_evidence: bool = False) -> tuple[Label, UnsupportedReason | None]:
    """Parse a check reply into a label and, for ``unsupported``, why (when the reply tells).

    Accepts what :func:`parse_label` accepts, plus ``contradicted`` and ``not supported`` /
    ``not_supported``; with ``with_evidence`` "not supported" and "no / not enough evidence"
    mean ``unsupported`` with reason ``no_evidence``. ``reason`` is None otherwise.

    Raises:
        OutputParseError: the reply names no label with certainty; ``raw`` is ``text``.
    """
    body = unfence(text)
    if not body:
        raise OutputParseError("empty reply", raw=text)
    if body.startswith("{"):
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            match = _JSON_LABEL.search(body)  # reply cut at max_tokens after the label
            value: object = match.group(1) if match else None
        else:
            value = data.get("label") if isinstance(data, dict) else None
        found = _verdict_of(value, with_evidence) if isinstance(value, str) else None
        if found is None:
            raise OutputParseError(
                f'JSON reply has no "label" among {", ".join(_CHECK_WORDS)}', raw=text
            )
        return found
    lines = [line for line in body.splitlines() if line.strip()]
    found = _verdict_of(lines[0], with_evidence)
    if found is None:
        final = _FINAL_LINE.match(lines[-1])
        found = _verdict_of(final.group(1), with_evidence) if final else None
    if found is None:
        raise OutputParseError(
            f"reply does not start with a label ({', '.join(_CHECK_WORDS)}): {lines[0][:80]!r}",
            raw=text,
        )
    return found


_MARKER = re.compile(r"^\s*(?:[-*•+‣◦]|\d{1,3}[.)]|\(\d{1,3}\)|[a-z][.)])\s+")
_PREAMBLE = re.compile(r"^(?:here\s+(?:are|is)|sure|certainly|okay|of\s+course)\b", re.IGNORECASE)
_CHAT = re.compile(
    r"^(?:i'm\s+sorry|i\s+am\s+sorry|sorry|i\s+cannot|i\s+can't|i\s+can\s+not|i\s+won't"
    r"|as\s+an\s+(?:ai|assistant|language\s+model)|note:|please\s+note|let\s+me\s+know"
    r"|i\s+hope|i\s+think|feel\s+free)",
    re.IGNORECASE,
)
_MAX_CLAIM_WORDS = 80


def _claims_from_json(body: str, text: str) -> list[str]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OutputParseError(f"reply is not valid JSON: {exc}", raw=text) from exc
    items = data.get("claims") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise OutputParseError('JSON reply must be {"claims": [string, ...]}', raw=text)
    return [claim for claim in (normalize_text(i) for i in items) if claim]


def parse_claims(text: str) -> list[str]:
    """Parse a split reply into normalized claim texts, in order.

    Accepted: JSON ``{"claims": [...]}`` or a bare JSON list of strings (also fenced); or one
    claim per line, list markers, empty lines, headings and a leading preamble dropped;
    ``NONE`` means no claims (``[]``).

    Raises:
        OutputParseError: empty reply, invalid JSON, a chat/refusal line, a line over 80
            words, or no claim left.
    """
    body = unfence(text)
    if not body:
        raise OutputParseError("empty reply", raw=text)
    if body.startswith(("{", "[")):
        return _claims_from_json(body, text)
    if body.rstrip(".").upper() == "NONE":
        return []
    claims: list[str] = []
    for line in body.splitlines():
        line = normalize_text(_MARKER.sub("", line, count=1))
        if not line:
            continue
        if not claims and (_PREAMBLE.match(line) or line.endswith(":")):
            continue
        if _CHAT.match(line):
            raise OutputParseError(f"reply is chat, not claims: {line[:80]!r}", raw=text)
        if line.endswith(":") and len(line.split()) <= 8:
            continue  # a section heading inside the list
        if len(line.split()) > _MAX_CLAIM_WORDS:
            raise OutputParseError(
                f"a line has {len(line.split())} words; expected one atomic claim per line",
                raw=text,
            )
        claims.append(line)
    if not claims:
        raise OutputParseError("reply contains no claims", raw=text)
    return claims
