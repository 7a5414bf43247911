"""What the mock server says: request kind, data extraction, token estimates and reply text.

The dahl prompts delimit data with tags: a check user message holds
``<question>\\n...\\n</question>`` and ``<claim>\\n...\\n</claim>``; a split user message
holds ``<question>`` and ``<answer>\\n...\\n</answer>``. A check against evidence
passages (template ``check-evidence/v1``) adds one ``<evidence>`` block per passage,
headed ``[n] source: <passage id> | title: ...``; a coverage user message holds
``<question>``, ``<response>`` and ``<facts>`` (see :mod:`bench.mock_coverage`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench import mock_questions, mock_refs
from bench.mock_coverage import cover_content, numbered_facts
from bench.mock_oracle import Oracle
from dahl.records import normalize_text

__all__ = [
    "OFFFORMAT_TEXT",
    "REFUSAL_TEXT",
    "Prompt",
    "default_label",
    "estimate_tokens",
    "last_block",
    "parse_prompt",
    "reply_content",
    "sentences",
]

#: Chatty content of an ``offformat`` fault: neither a label nor a claim list.
OFFFORMAT_TEXT = "As an assistant I think this might be an interesting claim."
#: What a ``refusal`` fault's reply says.
REFUSAL_TEXT = "I'm sorry, but I can't help with that request."

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PASSAGE_HEAD = re.compile(r"<evidence>\n\[\d+\] source: ([^\n|]*?)(?: \| title: [^\n]*)?\n")
#: Text-mode words of the evidence labels.
_EVIDENCE_WORDS = {"not_supported": "Not supported by the evidence"}


@dataclass(frozen=True)
class Prompt:
    """What one chat-completions request asks for.

    Attributes:
        kind: ``"check"``, ``"split"``, ``"cover"`` or ``"other"``.
        question: text of the last ``<question>`` block, or None.
        data: the claim (check), the answer (split) or the response (cover) text; ``""`` for other.
        json_mode: True when the body has ``response_format`` of type json_schema/json_object.
        prompt_tokens: ``ceil(chars / 4)`` over every message's text content.
        max_tokens: ``max_tokens`` or ``max_completion_tokens`` of the body, 16 when absent.
        model: the requested model name (``"mock"`` when absent).
        passages: source ids of the check's ``<evidence>`` blocks, in order (empty
            without evidence).
        facts: cover: the numbered facts of the ``<facts>`` block, in order.
    """

    kind: str
    question: str | None
    data: str
    json_mode: bool
    prompt_tokens: int
    max_tokens: int
    model: str
    passages: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()


def estimate_tokens(text_chars: int) -> int:
    """Token estimate of ``text_chars`` characters: ``ceil(chars / 4)`` (OpenAI's rule of thumb)."""
    return math.ceil(text_chars / 4)


def _text_of(content: Any) -> str:
    """Text of a message's ``content``: a string or a list of ``{"type": "text", "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    return ""


def last_block(tag: str, text: str) -> str | None:
    """Content of the last ``<tag>...</tag>`` block of ``text``, or None when there is none.

    Exactly ``re.findall(r"<tag>\\n?(.*?)\\n?</tag>", text, re.DOTALL)[-1]``: blocks are
    found left to right without overlapping, one newline after the opening tag and one
    before the closing tag are not content. Written with ``str.find`` because the lazy
    pattern cost more per request than the rest of the prompt parsing.

    Args:
        tag: e.g. ``"claim"``.
        text: a user message.
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    found: str | None = None
    pos = 0
    while (start := text.find(opening, pos)) >= 0:
        start += len(opening)
        if text.startswith("\n", start):
            start += 1
        end = text.find(closing, start)
        if end < 0:
            break  # no block can close after this point
        pos = end + len(closing)
        if end > start and text[end - 1] == "\n":
            end -= 1
        found = text[start:end]
    return found


def parse_prompt(body: Mapping[str, Any]) -> Prompt:
    """Classify a chat-completions request body and pull out its tagged data.

    The deciding message is the last user message holding a ``<claim>`` or ``<answer>``
    tag (so a re-ask appended after the original prompt keeps its kind); ``<claim>``
    makes a check, ``<answer>`` without ``<claim>`` a split, no tag at all "other".
    Repeated blocks: the last one counts.

    Args:
        body: the decoded JSON request body.

    Returns:
        The classified prompt.
    """
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    texts = [(str(m.get("role", "")), _text_of(m.get("content"))) for m in messages if isinstance(m, Mapping)]
    kind, question, data = "other", None, ""
    passages: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    for role, text in reversed(texts):
        if role != "user":
            continue
        fact_block = last_block("facts", text)
        response = last_block("response", text)
        if fact_block is not None and response is not None:  # coverage; a rating prompt has no response
            kind, data, facts = "cover", response, numbered_facts(fact_block)
            question = last_block("question", text)
            break
        refs = mock_refs.classify(text) or mock_questions.classify(text)  # dahl refs / questions build
        if refs is not None:
            kind, question, data = refs
            break
        claim = last_block("claim", text)
        answer = last_block("answer", text)
        if claim is not None:
            kind, data = "check", claim
        elif answer is not None:
            kind, data = "split", answer
        else:
            continue
        question = last_block("question", text)
        if kind == "check" and "<evidence>" in text:
            passages = tuple(_PASSAGE_HEAD.findall(text))
        break
    response_format = body.get("response_format")
    json_mode = isinstance(response_format, Mapping) and response_format.get("type") in (
        "json_schema",
        "json_object",
    )
    limit = body.get("max_tokens", body.get("max_completion_tokens"))
    max_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else 16
    return Prompt(
        kind=kind,
        question=question,
        data=data,
        json_mode=json_mode,
        prompt_tokens=estimate_tokens(sum(len(text) for _, text in texts)),
        max_tokens=max_tokens,
        model=str(body.get("model") or "mock"),
        passages=passages,
        facts=facts,
    )


def default_label(claim: str) -> str:
    """Reproducible label from a hash of the normalized claim.

    blake2b of the claim modulo 100: below 70 supported, below 95 unsupported, else
    unknown (70% / 25% / 5% over many claims).
    """
    digest = hashlib.blake2b(normalize_text(claim).encode("utf-8"), digest_size=8).digest()
    bucket = int.from_bytes(digest, "big") % 100
    if bucket < 70:
        return "supported"
    return "unsupported" if bucket < 95 else "unknown"


def sentences(text: str) -> list[str]:
    """Split normalized ``text`` after ``.``, ``!`` or ``?`` followed by whitespace; drop empties."""
    return [part for part in _SENTENCE_END.split(normalize_text(text)) if part]


@functools.lru_cache(maxsize=256)
def _label_content(label: str, reason: str, json_mode: bool) -> str:
    """A check reply's content; few distinct (label, reason) pairs, so each is built once."""
    if json_mode:
        return json.dumps({"label": label, "reason": reason}, ensure_ascii=False)
    return f"{_EVIDENCE_WORDS.get(label, label.capitalize())}\n{reason}"


def _evidence_reply(prompt: Prompt, oracle: Oracle | None) -> str:
    """A check against passages: supported / contradicted / not_supported / irrelevant.

    Rule: the oracle's label, with an unsupported claim answered ``contradicted`` when
    its oracle line says so (``"reason": "contradicted"``) and ``not_supported``
    otherwise; unknown and absent claims are ``not_supported``. Without an oracle,
    :func:`default_label` with unsupported and unknown as ``not_supported``. The reason
    line names the passage ids the prompt carried, so a test can see they arrived.
    """
    found = oracle.verdict(prompt.question, prompt.data) if oracle is not None else default_label(prompt.data)
    label = found if found in ("supported", "contradicted", "irrelevant") else "not_supported"
    reason = f"Oracle label; passages: {', '.join(prompt.passages)}."
    return _label_content(label, reason, prompt.json_mode)


def reply_content(prompt: Prompt, oracle: Oracle | None) -> str:
    """The assistant message content for a well-behaved reply.

    Check: the oracle's label (``unknown`` for a claim it lacks) or :func:`default_label`
    without an oracle; with evidence passages, see :func:`_evidence_reply`. Split: the oracle's claims for a known answer, else one claim per
    sentence. JSON mode gives ``{"label", "reason"}`` / ``{"claims": [...]}``; text mode
    gives a capitalized label and a reason line / ``"- "``-prefixed lines.

    Args:
        prompt: the classified request.
        oracle: labels and claim lists, or None for the default behaviour.

    Returns:
        The content string.
    """
    if prompt.kind in mock_refs.KINDS:
        return mock_refs.reply_content(prompt.kind, prompt.question, prompt.data)
    if prompt.kind in mock_questions.KINDS:
        return mock_questions.reply_content(prompt.kind, prompt.question, prompt.data)
    if prompt.kind == "check" and prompt.passages:
        return _evidence_reply(prompt, oracle)
    if prompt.kind == "check":
        if oracle is None:
            label, reason = default_label(prompt.data), "Mock label derived from the claim text."
        else:
            found = oracle.label(prompt.question, prompt.data)
            label, reason = (found, "Oracle label.") if found else ("unknown", "Claim not in the oracle.")
        return _label_content(label, reason, prompt.json_mode)
    if prompt.kind == "cover":
        return cover_content(prompt.data, prompt.facts, oracle, json_mode=prompt.json_mode)
    if prompt.kind == "split":
        claims = oracle.claims(prompt.data) if oracle is not None else None
        if claims is None:
            claims = sentences(prompt.data)
        if prompt.json_mode:
            return json.dumps({"claims": claims}, ensure_ascii=False)
        return "\n".join(f"- {claim}" for claim in claims)
    if prompt.json_mode:
        return json.dumps({"reply": "mock"})
    return "This is a mock reply."
