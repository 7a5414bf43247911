"""Cache-key material of the OpenAI-compatible Checker's request body: a constant frame (digested
once) and the one templated message that changes per claim."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import orjson

from dahl.adapters import _prompts as prompts
from dahl.adapters._bodies import Format, check_request_body
from dahl.config import EndpointConfig

__all__ = ["CONTENT_HOLE", "CheckKeyTemplate", "digest_system", "fill_content"]

#: Distinct system prompts whose digests one adapter remembers (a handful exist per template).
_MAX_SYSTEM_DIGESTS = 64


def digest_system(body: dict[str, Any], digests: dict[str, str]) -> dict[str, Any]:
    """``body`` for a cache key: system message contents replaced by their blake2b-128 digests
    (memoized in ``digests``)."""
    messages = []
    for message in body["messages"]:
        if message.get("role") == "system":
            content = message["content"]
            digest = digests.get(content)
            if digest is None:
                if len(digests) >= _MAX_SYSTEM_DIGESTS:
                    digests.clear()
                digest = hashlib.blake2b(content.encode(), digest_size=16).hexdigest()
                digests[content] = digest
            message = {"role": "system", "content_blake2b": digest}
        messages.append(message)
    return {**body, "messages": messages}


# Holes of the check body template; NUL bytes keep them apart from real prompt text.
_QUESTION_HOLE = "\x00dahl-question-hole\x00"
_CLAIM_HOLE = "\x00dahl-claim-hole\x00"
#: The templated message's whole content in :meth:`CheckKeyTemplate.sent_body`.
CONTENT_HOLE = "\x00dahl-content-hole\x00"
# Probes that check the template against the real body builder once per format.
_PROBES = (("What <question> is x?", "A </claim> claim."), ("Q", "C"))


def fill_content(parts: tuple[str, str, str], question: str, claim: str) -> str:
    """The templated check message: ``parts`` (see :attr:`CheckKeyTemplate.parts`) around
    ``question`` and ``claim``, each through :func:`prompts.neutralize_tags`; equal to
    :meth:`CheckKeyTemplate.content`."""
    head, middle, tail = parts
    return head + prompts.neutralize_tags(question) + middle + prompts.neutralize_tags(claim) + tail


class CheckKeyTemplate:
    """The keyed check body (:func:`digest_system` applied) split into a frame and a hole.

    ``frame`` is the blake2b-128 of the canonical msgpack of the body without the message
    holding question and claim; frame + :meth:`content` determine the body exactly.
    :attr:`usable` is False (key on the whole body) unless each placeholder occurs once, in
    one message, question first, and filling reproduces the real builder on probe texts.
    """

    def __init__(self, cfg: EndpointConfig, fmt: Format, digests: dict[str, str]) -> None:
        self._cfg = cfg
        self._fmt = fmt
        self._digests = digests
        self._body = digest_system(
            check_request_body(cfg, _QUESTION_HOLE, _CLAIM_HOLE, fmt=fmt), digests
        )
        self._parts: tuple[str, str, str] = ("", "", "")
        self._index = -1
        # Claims of one answer share its question: remember the last one filled in.
        self._last_question: tuple[str, str] = ("", prompts.neutralize_tags(""))
        self.usable = self._split_holes() and all(
            self.fill(q, c) == self.exact(q, c) for q, c in _PROBES
        )
        self.frame = ""
        if self.usable:
            messages = list(self._body["messages"])
            messages[self._index] = {**messages[self._index], "content": None}
            frame = {**self._body, "messages": messages, "dahl_hole": self._index}
            self.frame = hashlib.blake2b(
                msgspec.msgpack.encode(frame, order="deterministic"), digest_size=16
            ).hexdigest()

    def _split_holes(self) -> bool:
        encoded = orjson.dumps(self._body).decode()
        if encoded.count("dahl-question-hole") != 1 or encoded.count("dahl-claim-hole") != 1:
            return False
        for i, message in enumerate(self._body["messages"]):
            content = message.get("content")
            if isinstance(content, str) and _QUESTION_HOLE in content and _CLAIM_HOLE in content:
                head, rest = content.split(_QUESTION_HOLE)
                if _CLAIM_HOLE not in rest:
                    return False
                middle, tail = rest.split(_CLAIM_HOLE)
                self._parts = (head, middle, tail)
                self._index = i
                return True
        return False

    def exact(self, question: str, claim: str) -> dict[str, Any]:
        """The keyed body built by :func:`check_request_body` (slow, always right)."""
        return digest_system(
            check_request_body(self._cfg, question, claim, fmt=self._fmt), self._digests
        )

    @property
    def parts(self) -> tuple[str, str, str]:
        """The message content before the question, between question and claim, and after."""
        return self._parts

    def content(self, question: str, claim: str) -> str:
        """The templated content of the message with the holes, ``question`` and ``claim`` filled in."""
        head, middle, tail = self._parts
        last, safe_question = self._last_question
        if question != last:
            safe_question = prompts.neutralize_tags(question)
            self._last_question = (question, safe_question)
        return head + safe_question + middle + prompts.neutralize_tags(claim) + tail

    def sent_body(self) -> dict[str, Any] | None:
        """The body :func:`check_request_body` builds (system prompt not digested) with the whole
        content of the templated message replaced by :data:`CONTENT_HOLE`; None unless usable.
        With :meth:`content` in the hole it is the body of that question and claim."""
        if not self.usable:
            return None
        body = check_request_body(self._cfg, _QUESTION_HOLE, _CLAIM_HOLE, fmt=self._fmt)
        messages = list(body["messages"])
        messages[self._index] = {**messages[self._index], "content": CONTENT_HOLE}
        return {**body, "messages": messages}

    def fill(self, question: str, claim: str) -> dict[str, Any]:
        """The keyed body with ``question`` and ``claim`` filled into the holes."""
        messages = list(self._body["messages"])
        messages[self._index] = {**messages[self._index], "content": self.content(question, claim)}
        return {**self._body, "messages": messages}
