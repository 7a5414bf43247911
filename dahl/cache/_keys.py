"""Canonical cache keys: blake2b-128 (32 hex digits) of the deterministic msgpack of all that can change a
result (never API key, timeouts, retries, concurrency, rate limits): checks, splits, coverage, other jobs."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import msgspec

from dahl.adapters._base import Checker, FramedKeys, RequestKeyed, RequestKeyedSplitter, Splitter
from dahl.records import Answer, Claim, GivenClaim, Label, normalize_text

__all__ = ["KEY_VERSION", "REFS_KEY_VERSION", "CheckKeyRecipe", "KeyMaterial", "RefsKeyMaterial", "check_key",
           "check_key_recipe", "check_keys", "coverage_key", "coverage_keys", "extract_key", "key_of",
           "rate_key", "split_key"]

#: Bumped whenever the layout of :class:`KeyMaterial` (and :class:`RefsKeyMaterial`) or its encoding changes.
KEY_VERSION = 2
REFS_KEY_VERSION = 1

_ENCODER = msgspec.msgpack.Encoder(order="deterministic")
T = TypeVar("T")


class KeyMaterial(msgspec.Struct, frozen=True, array_like=True):
    """What a split or check key is made of (an array): ``request`` is the ``cache_request`` material or None;
    ``question`` and ``text`` are ``""`` when it covers them."""

    version: int
    stage: Literal["split", "check"]
    fingerprint: str
    request: dict[str, Any] | None
    question: str
    text: str
    given_label: Label | None = None
    given_claims: tuple[GivenClaim, ...] | None = None


class RefsKeyMaterial(msgspec.Struct, frozen=True, array_like=True):
    """An extraction or rating key's material: ``context`` (title, or normalized question) and ``text``."""

    version: int
    stage: Literal["extract", "rate"]
    fingerprint: str
    context: str
    text: str


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def key_of(material: KeyMaterial) -> str:
    """Return the key of ``material``; TypeError if its ``request`` holds a value msgspec cannot encode."""
    return _digest(_ENCODER.encode(material))


#: What each Checker, and each Splitter, offers for its keys, by identity (held, so its id is not
#: reused): a protocol isinstance test costs ~30 µs.
_CHECKERS: dict[int, tuple[object, Any]] = {}
_SPLITTERS: dict[int, tuple[object, Any]] = {}


def _held(table: dict[int, tuple[object, Any]], adapter: object, test: Callable[[], T]) -> T:
    held = table.get(id(adapter))
    if held is None or held[0] is not adapter:
        if len(table) >= 64:
            table.clear()
        held = table[id(adapter)] = (adapter, test())
    found: T = held[1]
    return found


def _capabilities(checker: Checker) -> tuple[RequestKeyed | None, FramedKeys | None]:
    def test() -> tuple[RequestKeyed | None, FramedKeys | None]:
        keyed = checker if isinstance(checker, RequestKeyed) else None
        covered = keyed is not None and keyed.cache_request_covers_input
        return keyed, checker if covered and isinstance(checker, FramedKeys) else None

    return _held(_CHECKERS, checker, test)


def _question(keyed: RequestKeyed | None, answer: Answer) -> str:
    return "" if keyed is not None and keyed.cache_request_covers_input else normalize_text(answer.question)


def check_key(checker: Checker, claim: Claim, answer: Answer) -> str:
    """Key of ``checker``'s verdict on ``claim`` within ``answer`` (TypeError as :func:`key_of`)."""
    keyed = _capabilities(checker)[0]
    return _check_key(checker, keyed, claim, answer, _question(keyed, answer))


def check_keys(checker: Checker, claims: Sequence[Claim], answer: Answer) -> list[str]:
    """``[check_key(checker, c, answer) for c in claims]``; a FramedKeys Checker's frame is hashed once."""
    keyed, framed = _capabilities(checker)
    if framed is not None:
        frame = framed.cache_request_frame()
        split = None if frame is None else _split_material(checker.fingerprint, frame)
        if split is not None:  # blake2b-128 of before + msgpack(content) + after
            head, tail, encode = split[0], split[2], _ENCODER.encode
            keys = []
            for content in framed.cache_request_contents(claims, answer):
                hasher = head.copy()
                hasher.update(encode(content))
                hasher.update(tail)
                keys.append(hasher.hexdigest())
            return keys
    question = _question(keyed, answer)
    return [_check_key(checker, keyed, claim, answer, question) for claim in claims]


#: A string no request contains (NUL bytes): marks where the per-claim text is encoded.
_CONTENT_HOLE = "\x00dahl-key-content\x00"
#: The last (fingerprint, frame, split) of _split_material: a run asks for one frame, once per answer.
_LAST_SPLIT: list[tuple[str, dict[str, Any], tuple[Any, bytes, bytes] | None] | None] = [None]


def _split_material(fingerprint: str, frame: dict[str, Any]) -> tuple[Any, bytes, bytes] | None:
    """(hash state of before, before, after) around the text of ``{**frame, "content": text}``'s key bytes."""
    last = _LAST_SPLIT[0]
    # The same frame object again: skip encoding it (identity: equal dicts, 1 == 1.0, may encode apart).
    if last is not None and last[1] is frame and last[0] == fingerprint:
        return last[2]
    material = KeyMaterial(KEY_VERSION, "check", fingerprint, {**frame, "content": _CONTENT_HOLE}, "", "")
    encoded, hole = _ENCODER.encode(material), _ENCODER.encode(_CONTENT_HOLE)
    found = None
    if encoded.count(hole) == 1:
        before, after = encoded.split(hole)
        found = (hashlib.blake2b(before, digest_size=16), before, after)
    _LAST_SPLIT[0] = (fingerprint, frame, found)  # holding it keeps its id from being reused
    return found


@dataclass(frozen=True)
class CheckKeyRecipe:
    """A Checker's check keys but the claim: blake2b-128 over ``before + msgpack(content) + after``,
    ``content`` being :func:`~dahl.adapters._keybody.fill_content` of ``parts``, question and claim."""

    before: bytes
    after: bytes
    parts: tuple[str, str, str]
    parser_version: str


def check_key_recipe(checker: Checker, parser_version: str) -> CheckKeyRecipe | None:
    """The recipe of ``checker``'s keys while its frame is the same, or None (no covering FramedKeys)."""
    framed = _capabilities(checker)[1]
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
    # A hook that covers its input keys on it alone; another may return only extra settings
    # (the evidence Checker's document ids). Only a Checker without a hook may read the given label.
    covered = keyed is not None and keyed.cache_request_covers_input
    return key_of(KeyMaterial(KEY_VERSION, "check", checker.fingerprint, request, "" if covered else question,
                              "" if covered else normalize_text(claim.text),
                              claim.given_label if request is None else None))


def split_key(splitter: Splitter, answer: Answer) -> str:
    """Key of ``splitter``'s claims for the (preprocessed) ``answer`` (TypeError as :func:`key_of`)."""
    keyed = _held(_SPLITTERS, splitter, lambda: splitter if isinstance(splitter, RequestKeyedSplitter) else None)
    request = keyed.cache_request(answer) if keyed is not None else None
    return key_of(KeyMaterial(KEY_VERSION, "split", splitter.fingerprint, request, normalize_text(answer.question),
                              answer.response, given_claims=answer.claims))


def coverage_keys(fingerprint: str, question: str, response: str, facts: Sequence[str]) -> list[str]:
    """The keys of each fact's coverage by ``response`` under the judge ``fingerprint``, in order."""
    head = [KEY_VERSION, "cover", fingerprint, _digest(normalize_text(response).encode("utf-8")),
            normalize_text(question)]
    return [_digest(_ENCODER.encode([*head, normalize_text(fact)])) for fact in facts]


def coverage_key(fingerprint: str, question: str, response: str, fact: str) -> str:
    """The cache key of one ``fact``'s coverage by ``response`` (:func:`coverage_keys`)."""
    return coverage_keys(fingerprint, question, response, [fact])[0]


def extract_key(fingerprint: str, title: str, text: str) -> str:
    """Key of the facts extracted from chunk ``text`` of a document titled ``title``."""
    return _digest(_ENCODER.encode(RefsKeyMaterial(REFS_KEY_VERSION, "extract", fingerprint, title, text)))


def rate_key(fingerprint: str, question: str, fact: str) -> str:
    """Key of the rating of ``fact`` for ``question`` (both normalized)."""
    material = RefsKeyMaterial(REFS_KEY_VERSION, "rate", fingerprint, normalize_text(question), normalize_text(fact))
    return _digest(_ENCODER.encode(material))
