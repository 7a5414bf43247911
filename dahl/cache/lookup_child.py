"""The cache lookup child's side: its wire format and its loop (see :mod:`dahl.cache.remote`).

Frames on both pipes: a 4-byte big-endian length, then msgpack. The parent sends a
:class:`Request` (a key recipe and groups of question and claim texts); the child
answers a :class:`Reply` with every claim's key and what the database holds for it:
each key's one row (a :class:`~dahl.cache.envelope.Stored` envelope, whatever its
parser version), read with one query per 500 keys and passed on still encoded, all
rows concatenated; the parent decodes them and resolves each for its parser version.
Reads and writes loop over partial transfers on the raw file descriptors.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from pathlib import Path

import msgspec

from dahl.cache.database import RowReader
from dahl.cache.keys import CheckKeyRecipe, recipe_keys

__all__ = [
    "ABSENT",
    "HELLO",
    "Reply",
    "Request",
    "child_main",
    "package_root",
    "read_frame",
    "write_frame",
]

#: The child's first frame starts with this, then the folder its ``dahl`` package was
#: imported from (the parent checks it is its own: the same code computes the keys).
HELLO = b"dahl-lookup-ready:"
#: Frames larger than this are a broken stream, not a reply, bytes.
_MAX_FRAME = 1 << 30


class Request(msgspec.Struct, array_like=True):
    """One batch: the key recipe's fields and the groups (question, claim texts)."""

    before: bytes
    after: bytes
    parts: tuple[str, str, str]
    parser_version: str
    groups: list[tuple[str, list[str]]]


#: The slot of a claim without an envelope in ``packed``: nothing stored.
ABSENT = -1


class Reply(msgspec.Struct, array_like=True):
    """The child's answer to one :class:`Request` (``error`` set: it failed)."""

    keys: list[str]
    slots: list[int]  # per claim: index of its envelope in packed, or ABSENT
    found: int  # envelopes in packed
    packed: bytes  # msgpack envelopes (stored rows as they are), concatenated
    error: str = ""


def write_frame(fd: int, payload: bytes) -> None:
    """Write one frame to the file descriptor ``fd`` (blocking; loops over partial writes).

    Raises:
        OSError: the pipe is closed (BrokenPipeError) or broken.
    """
    view = memoryview(len(payload).to_bytes(4, "big") + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int, timeout_s: float | None) -> bytes | None:
    """``size`` bytes from ``fd``; None at the end of the stream (a torn frame counts as the end).

    Raises:
        TimeoutError: no byte came for ``timeout_s`` seconds (None: wait forever).
    """
    chunks: list[bytes] = []
    while size:
        if timeout_s is not None and not select.select([fd], [], [], timeout_s)[0]:
            raise TimeoutError(f"no reply from the child process in {timeout_s:g} s")
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, timeout_s: float | None = None) -> bytes | None:
    """One frame from ``fd``, or None at the end of the stream.

    Raises:
        TimeoutError: the frame did not come within ``timeout_s`` seconds of silence.
        ValueError: the length is beyond any reply (the stream is out of step).
    """
    head = _read_exactly(fd, 4, timeout_s)
    if head is None:
        return None
    size = int.from_bytes(head, "big")
    if size > _MAX_FRAME:
        raise ValueError(f"a frame of {size:,} bytes: the stream is out of step")
    return _read_exactly(fd, size, timeout_s)


def package_root() -> str:
    """The folder holding the ``dahl`` package this process imported."""
    return str(Path(__file__).resolve().parents[2])


# -- child side ------------------------------------------------------------------------


def _child_reply(rows: RowReader, request: Request) -> Reply:
    """Keys of every claim of the request's groups and the rows stored under them (one query per 500)."""
    recipe = CheckKeyRecipe(request.before, request.after, request.parts, request.parser_version)
    keys: list[str] = []
    for question, texts in request.groups:
        keys += recipe_keys(recipe, question, texts)
    found, packed = rows.fetch_packed(list(dict.fromkeys(keys)))  # a claim may repeat
    where = {key: i for i, key in enumerate(found)}
    slots = [where.get(key, ABSENT) for key in keys]
    return Reply(keys, slots, len(found), packed)


def child_main(db_path: str) -> int:
    """The child: serve lookups on stdin/stdout until stdin closes; return the exit status."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us
    rows = RowReader(Path(db_path), read_only=True)
    decoder = msgspec.msgpack.Decoder(Request)
    encoder = msgspec.msgpack.Encoder()
    inp, out = sys.stdin.fileno(), sys.stdout.fileno()
    write_frame(out, HELLO + package_root().encode())
    while (frame := read_frame(inp)) is not None:
        try:
            reply = _child_reply(rows, decoder.decode(frame))
        except Exception as exc:  # report it; the parent turns this path off
            reply = Reply([], [], 0, b"", error=f"{type(exc).__name__}: {exc}")
        write_frame(out, encoder.encode(reply))
    rows.close()
    return 0
