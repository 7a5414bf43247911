"""``wave-NN/extras.jsonl``: what a result needs beside its reply to be stored as the online run stores it.

One line ``{"custom_id", "keys"?, "evidence"?}`` per request of a wave that needs it: a check
against corpus passages (the verdict's passages) or a cover request (its facts' cache keys, in
order). ``resubmit`` shards share their wave's file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import msgspec

from dahl.records import Evidence

__all__ = ["EXTRAS_NAME", "Extra", "read_extras", "write_extras"]

EXTRAS_NAME = "extras.jsonl"


class Extra(msgspec.Struct, frozen=True, omit_defaults=True):
    """One request's extra material.

    Attributes:
        custom_id: the request's custom_id.
        keys: cover: the cache keys of its facts, in the prompt's order.
        evidence: check with a corpus: the verdict's passages, best first.
    """

    custom_id: str
    keys: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Extra)


def write_extras(folder: Path, extras: Iterable[Extra]) -> bool:
    """Write ``folder/extras.jsonl`` (whole, by rename; nothing when ``extras`` is empty). Blocking.

    Returns:
        Whether a file was written.
    """
    lines = [_ENCODER.encode(e) for e in extras]
    if not lines:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / EXTRAS_NAME
    part = path.with_suffix(".jsonl.part")
    part.write_bytes(b"\n".join(lines) + b"\n")
    part.replace(path)
    return True


def read_extras(folder: Path, ids: set[str]) -> dict[str, Extra]:
    """The extras of ``ids`` in ``folder/extras.jsonl`` (none when it is absent). Blocking.

    Raises:
        InputError: a line that is not an extra (file and line named).
    """
    from dahl.errors import InputError

    path = folder / EXTRAS_NAME
    if not path.exists():
        return {}
    out: dict[str, Extra] = {}
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                extra = _DECODER.decode(line)
            except msgspec.DecodeError as exc:
                raise InputError(f"not an extra: {exc}", file=str(path), line=number) from None
            if extra.custom_id in ids:
                out[extra.custom_id] = extra
    return out
