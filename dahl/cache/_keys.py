"""Canonical cache keys for split and check results.

A key is the blake2b-128 hex digest of the deterministic msgpack encoding (map keys
sorted) of a :class:`KeyMaterial`: everything that can change a result (the adapter's
fingerprint; its ``cache_request`` material, i.e. request body, base URL, model and
template version; the normalized question and input text; given labels and claims),
nothing that cannot (API key, timeouts, retries, concurrency, rate limits). An adapter
whose material holds the texts as sent (``cache_request_covers_input``) leaves them out.
A claim is keyed by its normalized text; a split by the response verbatim (spans index it).
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
    """Key of ``checker``'s verdict on ``claim`` within ``answer`` (32 hex digits).

    Raises:
        TypeError: ``cache_request`` returned material msgspec cannot encode.
    """
    keyed = _capabilities(checker).keyed
    question = "" if keyed is not None and keyed.cache_request_covers_input else normalize_text(answer.question)
    return _check_key(checker, keyed, claim, answer, question)


def check_keys(checker: Checker, claims: Sequence[Claim], answer: Answer) -> list[str]:
    """Keys of ``checker``'s verdicts on all ``claims`` of ``answer``, in order.

    Equal to ``[check_key(checker, c, answer) for c in claims]``; for a
    :class:`~dahl.adapters._base.FramedKeys` Checker the bytes around each claim's text
    are hashed once, and per claim only the text is fed to a copy of the hash state.

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
    encoded = _ENCODER.encode(KeyMaterial(KEY_VERSION, "check", fingerprint, {**frame, "content": _CONTENT_HOLE}, "", ""))
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

    A claim's key is blake2b-128 over ``before + msgpack(content) + after``, ``content``
    being :func:`~dahl.adapters._keybody.fill_content` of ``parts`` with the normalized
    question and claim. Whole-answer keys (:mod:`dahl.cache._answers`) hash it in.

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
    # Only a Checker without a request hook may read the input's label (the HTTP Checkers never do).
    return key_of(KeyMaterial(KEY_VERSION, "check", checker.fingerprint, request, "" if covered else question,
                              "" if covered else normalize_text(claim.text),
                              claim.given_label if request is None else None))


def split_key(splitter: Splitter, answer: Answer) -> str:
    """Key of ``splitter``'s claims for the (preprocessed) ``answer`` (32 hex digits).

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
    return key_of(KeyMaterial(KEY_VERSION, "split", splitter.fingerprint, request, normalize_text(answer.question),
                              answer.response, given_claims=answer.claims))
