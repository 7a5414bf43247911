"""What one cache row holds: a msgpack :class:`Stored` envelope (parser version, value, raw reply);
the same parser version gets the value, another one the raw reply to re-parse."""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from dahl.records import Claim, Verdict

__all__ = ["ENVELOPE_DECODER", "ENVELOPES_DECODER", "CachedEntry", "Stored", "Value", "encode_envelope", "entry_of"]

#: What the cache stores as a result: a Verdict, a claim list, or an opaque blob (bytes).
Value = Verdict | list[Claim] | bytes


class Stored(msgspec.Struct, array_like=True, frozen=True):
    """The envelope stored in a result's row (msgpack array).

    Attributes:
        parser_version: version of the parser that produced ``value``.
        value: the result; bytes are an opaque blob.
        raw: the model's raw reply when it is not ``value.raw``; None for a Verdict whose
            own ``raw`` is the reply, or when no reply is kept.
    """

    parser_version: str
    value: Value
    raw: str | None = None


class CachedEntry(NamedTuple):
    """What a lookup found: ``value`` for the requested parser version, or None and the ``raw``
    reply to re-parse (``raw`` is only filled when ``value`` is None)."""

    value: Value | None
    raw: str | None


_ENCODER = msgspec.msgpack.Encoder()
ENVELOPE_DECODER: msgspec.msgpack.Decoder[Stored] = msgspec.msgpack.Decoder(Stored)
#: Decodes a msgpack array of envelopes (concatenated rows behind an array header).
ENVELOPES_DECODER: msgspec.msgpack.Decoder[list[Stored]] = msgspec.msgpack.Decoder(list[Stored])


def encode_envelope(value: Value, raw: str | None, parser_version: str) -> bytes:
    """The row bytes of ``value`` with its ``raw`` reply, made by parser ``parser_version`` (a
    Verdict whose own ``raw`` equals ``raw`` keeps the reply once).

    Raises:
        TypeError: ``value`` is not something msgspec can encode.
    """
    if raw is not None and isinstance(value, Verdict) and value.raw == raw:
        raw = None
    return _ENCODER.encode(Stored(parser_version, value, raw))


def entry_of(stored: Stored, parser_version: str) -> CachedEntry | None:
    """What ``stored`` gives a caller with parser ``parser_version``: ``CachedEntry(value, None)``
    for the same version; else ``CachedEntry(None, raw)`` (the envelope's raw reply, or a
    Verdict's own), or None without a raw reply."""
    if stored.parser_version == parser_version:
        return CachedEntry(stored.value, None)
    raw = stored.raw
    if raw is None and isinstance(stored.value, Verdict):
        raw = stored.value.raw
    return None if raw is None else CachedEntry(None, raw)
