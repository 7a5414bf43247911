"""Canonical cache keys for split and check results.

A key is the blake2b-128 hex digest (32 hex characters) of the deterministic
msgpack encoding (``msgspec``, ``order="deterministic"``: map keys sorted) of a
:class:`KeyMaterial` struct. Everything that can change a result goes in;
nothing that cannot (API key, timeouts, retries, concurrency, rate limits) does.

What goes in, per adapter:

- An adapter with a ``cache_request`` method (:class:`~dahl.adapters._base.RequestKeyed`,
  :class:`~dahl.adapters._base.RequestKeyedSplitter`) supplies the material that fully
  determines its output. The OpenAI-compatible adapters return
  the exact request body (messages after templating, temperature, seed, max_tokens,
  response_format, extra_body), the normalized base URL, the model and the template
  version. Checker: ``cache_request(claim, answer) -> dict``; Splitter:
  ``cache_request(answer) -> dict``.
- Every adapter contributes its ``fingerprint`` (offline adapters: e.g. the evidence
  Checker's corpus content hash and thresholds), and the normalized question and
  input text, unless its hook's material already holds them as they are sent (the
  adapter declares ``cache_request_covers_input = True``, as the OpenAI-compatible
  Checker does): then they are left out (``""``), since hashing them twice costs
  time on every cache hit and adds nothing. A hook that returns only settings (the
  evidence Checker's document ids) leaves the texts in.

Input text: a claim is keyed by :func:`dahl.records.normalize_text` of its text
(NFC, whitespace collapsed), as is the question. A split is keyed by the response
exactly as given, because claim spans are character offsets into it: two
responses that differ only in whitespace or Unicode normal form have different
spans, so they must not share a cached split.

A claim's ``given_label`` (read by the replay Checker) and an answer's given claims
(read by the given Splitter) are part of the default material, so two claims with
the same text but different given labels never share a result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import msgspec

from dahl.adapters._base import Checker, FramedKeys, RequestKeyed, RequestKeyedSplitter, Splitter
from dahl.records import Answer, Claim, GivenClaim, Label, normalize_text

__all__ = [
    "KEY_VERSION",
    "CheckKeyRecipe",
    "KeyMaterial",
    "check_key",
    "check_key_recipe",
    "check_keys",
    "key_of",
    "split_key",
]

#: Bumped whenever the key layout or its canonical encoding changes (old entries become misses).
KEY_VERSION = 2

_ENCODER = msgspec.msgpack.Encoder(order="deterministic")


class KeyMaterial(msgspec.Struct, frozen=True, array_like=True):
    """Everything a cache key is computed from (encoded as a fixed-order array).

    Attributes:
        version: :data:`KEY_VERSION`.
        stage: ``"split"`` or ``"check"``.
        fingerprint: the adapter's fingerprint (settings that change its output).
        request: the adapter's ``cache_request`` material (request body, base URL,
            model, template version), or None when the adapter has no hook.
        question: the normalized question (``""`` when ``request`` is given).
        text: check: the normalized claim text; split: the response verbatim
            (``""`` when ``request`` is given).
        given_label: check: the claim's given label, if any.
        given_claims: split: the answer's given claims, if any.
    """

    version: int
    stage: Literal["split", "check"]
    fingerprint: str
    request: dict[str, Any] | None
    question: str
    text: str
    given_label: Label | None = None
    given_claims: tuple[GivenClaim, ...] | None = None


def key_of(material: KeyMaterial) -> str:
    """Return the key of ``material``: blake2b-128 of its canonical bytes, as 32 hex digits.

    Raises:
        TypeError: the adapter's ``cache_request`` material holds a value msgspec
            cannot encode (e.g. a set or an arbitrary object).
    """
    return hashlib.blake2b(_ENCODER.encode(material), digest_size=16).hexdigest()


class _Capabilities(NamedTuple):
    """What a Checker offers for its keys: its request hook, and its frame hooks when the hook covers the input."""

    keyed: RequestKeyed | None
    framed: FramedKeys | None


#: Capabilities per Checker (by identity; the Checker is held so its id is not reused):
#: a protocol isinstance test costs ~30 µs, so each Checker is tested once.
_CAPABILITIES: dict[int, tuple[Checker, _Capabilities]] = {}


#: The request hook per Splitter, held like :data:`_CAPABILITIES`.
_SPLITTERS: dict[int, tuple[Splitter, RequestKeyedSplitter | None]] = {}


def _capabilities(checker: Checker) -> _Capabilities:
    held = _CAPABILITIES.get(id(checker))
    if held is not None and held[0] is checker:
        return held[1]
    keyed = checker if isinstance(checker, RequestKeyed) else None
    framed = checker if keyed is not None and keyed.cache_request_covers_input and isinstance(checker, FramedKeys) else None
    found = _Capabilities(keyed, framed)
    if len(_CAPABILITIES) >= 64:
        _CAPABILITIES.clear()
    _CAPABILITIES[id(checker)] = (checker, found)
    return found


def check_key(checker: Checker, claim: Claim, answer: Answer) -> str:
    """Key of ``checker``'s verdict on ``claim`` within ``answer``.

    Args:
        checker: the Checker; its ``cache_request(claim, answer)`` is used if it is
            :class:`~dahl.adapters._base.RequestKeyed`.
        claim: the claim (its text is normalized before hashing).
        answer: the claim's answer (its question is normalized before hashing).

    Returns:
        32 hex digits (blake2b-128).

    Raises:
        TypeError: ``cache_request`` returned material msgspec cannot encode.
    """
    keyed = _capabilities(checker).keyed
    question = "" if keyed is not None and keyed.cache_request_covers_input else normalize_text(answer.question)
    return _check_key(checker, keyed, claim, answer, question)


def check_keys(checker: Checker, claims: Sequence[Claim], answer: Answer) -> list[str]:
    """Keys of ``checker``'s verdicts on all ``claims`` of ``answer``, in order.

    Equal to ``[check_key(checker, c, answer) for c in claims]``. The question is
    normalized once for the whole answer; and for a Checker whose material splits
    into a constant frame and one templated text per claim
    (:class:`~dahl.adapters._base.FramedKeys`, as the OpenAI-compatible Checker offers), the
    canonical bytes before and after that text are hashed once: per claim only the
    text is encoded and fed to a copy of the hash state.

    Raises:
        TypeError: ``cache_request`` returned material msgspec cannot encode.
    """
    keyed, framed = _capabilities(checker)
    if framed is not None:
        frame = framed.cache_request_frame()
        split = None if frame is None else _split_material(checker.fingerprint, frame)
        if split is not None:
            return _keys_around(split[0], framed.cache_request_contents(claims, answer), split[2])
    question = "" if keyed is not None and keyed.cache_request_covers_input else normalize_text(answer.question)
    return [_check_key(checker, keyed, claim, answer, question) for claim in claims]


#: A string no request contains (NUL bytes): marks where the per-claim text is encoded.
_CONTENT_HOLE = "\x00dahl-key-content\x00"
_SPLITS: dict[tuple[str, bytes], tuple[Any, bytes, bytes]] = {}


def _keys_around(head: Any, contents: Iterable[str], tail: bytes) -> list[str]:
    """Keys of ``contents``: blake2b-128 of (the bytes hashed into ``head``) + msgpack(content) + ``tail``."""
    encode = _ENCODER.encode
    keys = []
    for content in contents:
        hasher = head.copy()
        hasher.update(encode(content))
        hasher.update(tail)
        keys.append(hasher.hexdigest())
    return keys


def _split_material(fingerprint: str, frame: dict[str, Any]) -> tuple[Any, bytes, bytes] | None:
    """The canonical key bytes around the per-claim text: (hash state of before, before, after).

    The bytes are those :func:`key_of` hashes for a covered check key whose request is
    ``{**frame, "content": text}``; ``text`` sits at one place in them (msgpack str).
    None if the frame itself holds the placeholder (then keys are built the plain way).
    """
    last = _LAST_SPLIT[0]
    # The same frame object again (a Checker may hand out one frame it never changes):
    # skip encoding it. Identity, not equality: equal dicts (1 == 1.0) may encode apart.
    if last is not None and last[1] is frame and last[0] == fingerprint:
        return last[2]
    found = _split_material_of(fingerprint, frame)
    _LAST_SPLIT[0] = (fingerprint, frame, found)  # holding it keeps its id from being reused
    return found


#: The last (fingerprint, frame, split) of _split_material: a run asks for one frame, once per answer.
_LAST_SPLIT: list[tuple[str, dict[str, Any], tuple[Any, bytes, bytes] | None] | None] = [None]


def _split_material_of(fingerprint: str, frame: dict[str, Any]) -> tuple[Any, bytes, bytes] | None:
    material = KeyMaterial(
        version=KEY_VERSION,
        stage="check",
        fingerprint=fingerprint,
        request={**frame, "content": _CONTENT_HOLE},
        question="",
        text="",
    )
    encoded = _ENCODER.encode(material)
    memo = (fingerprint, encoded)
    found = _SPLITS.get(memo)
    if found is None:
        hole = _ENCODER.encode(_CONTENT_HOLE)
        if encoded.count(hole) != 1:
            return None
        before, after = encoded.split(hole)
        if len(_SPLITS) >= 64:
            _SPLITS.clear()
        found = (hashlib.blake2b(before, digest_size=16), before, after)
        _SPLITS[memo] = found
    return found


@dataclass(frozen=True)
class CheckKeyRecipe:
    """Everything but the claim that a Checker's check keys are made of.

    For a Checker whose key material is a constant frame plus one templated message
    per claim (the OpenAI-compatible Checker), the key of a claim is blake2b-128 over
    ``before + msgpack(content) + after``, where ``content`` is
    :func:`~dahl.adapters._keybody.fill_content` of ``parts`` with the normalized question
    and claim. Whole-answer keys (:mod:`dahl.cache._answers`) hash it in.

    Attributes:
        before, after: the canonical key bytes around the per-claim content.
        parts: the message text around question and claim.
        parser_version: the Checker's parser version (names the stored values).
    """

    before: bytes
    after: bytes
    parts: tuple[str, str, str]
    parser_version: str


def check_key_recipe(checker: Checker, parser_version: str) -> CheckKeyRecipe | None:
    """The recipe of ``checker``'s check keys now, or None if it offers none.

    Needs a :class:`~dahl.adapters._base.FramedKeys` Checker whose material covers its
    input; None otherwise, or when either hook returns None (the fast template is
    unusable). The recipe holds for as long as the frame is the same.
    """
    framed = _capabilities(checker).framed
    if framed is None:
        return None
    frame = framed.cache_request_frame()
    parts = framed.cache_request_parts()
    split = None if frame is None or parts is None else _split_material(checker.fingerprint, frame)
    if split is None or parts is None:
        return None
    return CheckKeyRecipe(before=split[1], after=split[2], parts=parts, parser_version=parser_version)


def _check_key(checker: Checker, keyed: RequestKeyed | None, claim: Claim, answer: Answer, question: str) -> str:
    request = keyed.cache_request(claim, answer) if keyed is not None else None
    # A hook that covers its input (the HTTP Checkers: the templated message holds the
    # question and claim as sent) keys on that alone; any other hook may return only
    # extra settings (the evidence Checker returns its document ids), so the texts go in.
    covered = keyed is not None and keyed.cache_request_covers_input
    return key_of(
        KeyMaterial(
            version=KEY_VERSION,
            stage="check",
            fingerprint=checker.fingerprint,
            request=request,
            question="" if covered else question,
            text="" if covered else normalize_text(claim.text),
            # Only a Checker without a request hook may read the input's label (the HTTP
            # Checkers never do): the same claim with different human labels is one request.
            given_label=claim.given_label if request is None else None,
        )
    )


def split_key(splitter: Splitter, answer: Answer) -> str:
    """Key of ``splitter``'s claims for ``answer``.

    Args:
        splitter: the Splitter; its ``cache_request(answer)`` is used if it is
            :class:`~dahl.adapters._base.RequestKeyedSplitter`.
        answer: the (preprocessed) answer; its response is hashed verbatim (spans index it).

    Returns:
        32 hex digits (blake2b-128).

    Raises:
        TypeError: ``cache_request`` returned material msgspec cannot encode.
    """
    held = _SPLITTERS.get(id(splitter))
    if held is None or held[0] is not splitter:
        if len(_SPLITTERS) >= 64:
            _SPLITTERS.clear()
        held = _SPLITTERS[id(splitter)] = (splitter, splitter if isinstance(splitter, RequestKeyedSplitter) else None)
    keyed = held[1]
    request = keyed.cache_request(answer) if keyed is not None else None
    return key_of(
        KeyMaterial(
            version=KEY_VERSION,
            stage="split",
            fingerprint=splitter.fingerprint,
            request=request,
            question=normalize_text(answer.question),
            text=answer.response,
            given_claims=answer.claims,
        )
    )
