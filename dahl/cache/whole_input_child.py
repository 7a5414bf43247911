"""The whole-answer input child's side: its wire format and its loop (see :mod:`dahl.cache.whole_input`).

Frames as in :mod:`dahl.cache.lookup_child` (a 4-byte big-endian length, then msgpack).
The child first sends its hello; the parent sends one :class:`Start`; the child then
streams :class:`Batch` frames, each the next records of the input in file order, and
ends with :class:`End`, or :class:`Fail` when it cannot go on. A full pipe blocks the
child, so it never runs more than a pipe's worth of frames ahead of the parent.

Per input record the child sends a :class:`Hit` (the answer's whole entry is in the
cache: its ``answers.jsonl`` line, encoded here), a :class:`Miss` (it is not: the
answer's JSON, to be scored), or a :class:`Bad` (the record was rejected).
"""

from __future__ import annotations

import hashlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec

from dahl.cache.answers import decode_whole_entry, whole_key
from dahl.cache.database import RowReader
from dahl.cache.envelope import ENVELOPES_DECODER
from dahl.cache.lookup_child import package_root, read_frame, write_frame
from dahl.results._log import answer_input_hash, line_key
from dahl.results._assemble import result_of_found
from dahl.errors import InputError
from dahl.formats import Needs, read_answers
from dahl.records import Answer

__all__ = ["HELLO", "Bad", "Batch", "End", "Fail", "Hit", "Miss", "Start", "child_main", "FRAME_DECODER"]

#: The child's first frame starts with this, then the folder its ``dahl`` package was imported from.
HELLO = b"dahl-whole-input-ready:"


class Start(msgspec.Struct, array_like=True):
    """What the child reads and how (the parent's one frame).

    Attributes:
        inputs: answer files, in order.
        fmt, response_column, fields: as in :class:`dahl.run._score.ScoreConfig`.
        run_fp: the run fingerprint hashed into every input hash.
        key_material: the head of every whole-answer key
            (:meth:`dahl.cache.answers.AnswerCache.key_material`).
        db_path: the cache database, opened read only.
        gamma, k: FActScore γ and the K of F1@K, for the lines' metrics.
        batch: records looked up per query and sent per frame.
        needs: what every answer must carry (:class:`dahl.formats.needs.Needs` value).
        fields: the field mapping (``{dahl field: the input's field}``).
    """

    inputs: list[str]
    fmt: str
    response_column: str | tuple[str, ...] | None
    run_fp: bytes
    key_material: bytes
    db_path: str
    gamma: float
    k: int
    batch: int
    needs: int = 0
    fields: dict[str, str] = {}


class Hit(msgspec.Struct, array_like=True, tag=0):
    """An answer found whole: its line (no newline), resume key, status and claim count,
    and its id and input line (0 when the format knows none), which name a duplicate."""

    file: int
    key: int
    line: bytes
    status: str
    claims: int
    id: str = ""
    at: int = 0


class Miss(msgspec.Struct, array_like=True, tag=1):
    """An answer not found whole, to be scored: its resume key, input hash, whole-answer key and JSON.

    The JSON keeps the order of the answer's ``meta`` fields (its canonical JSON, which
    is hashed, sorts them), so the answer's line is the one it gets when read here.
    """

    file: int
    key: int
    input_hash: str
    whole_key: str
    answer: bytes
    at: int = 0  # the answer's input line (0: unknown)


class Bad(msgspec.Struct, array_like=True, tag=2):
    """A rejected record: the fields of its :class:`~dahl.errors.InputError`."""

    file: int
    message: str
    path: str | None
    line: int | None
    field: str | None


class Batch(msgspec.Struct, array_like=True, tag=3):
    """The next records of the input, in file order."""

    records: list[Hit | Miss | Bad]


class End(msgspec.Struct, array_like=True, tag=4):
    """The input is read to its end."""


class Fail(msgspec.Struct, array_like=True, tag=5):
    """The child stopped: why (the parent reads the rest itself)."""

    error: str


#: Decodes every frame after the hello.
FRAME_DECODER: msgspec.msgpack.Decoder[Batch | End | Fail] = msgspec.msgpack.Decoder(Batch | End | Fail)

_JSON_ENCODER = msgspec.json.Encoder()  # keeps the order of dict fields
_START_DECODER = msgspec.msgpack.Decoder(Start)


def _records(start: Start, rows: RowReader) -> Iterator[list[Hit | Miss | Bad]]:
    """Batches of records of every input, in file order (blocking; the child's work)."""
    head = hashlib.blake2b(start.key_material, digest_size=16)
    out: list[Hit | Miss | Bad] = []
    # Answers waiting for their lookup: (index in out, file, key, input hash, whole key, answer, line).
    waiting: list[tuple[int, int, int, str, str, Answer, int]] = []
    for file, path in enumerate(start.inputs):

        def rejected(err: InputError, file: int = file) -> None:
            out.append(Bad(file, err.message, err.file, err.line, err.field))

        answers = read_answers(path, start.fmt, response_column=start.response_column, fields=start.fields,
                               on_error=rejected, needs=Needs(start.needs))
        for answer in answers:
            input_hash = answer_input_hash(answer, start.run_fp)
            waiting.append((len(out), file, line_key(answer.id, input_hash), input_hash, whole_key(head, input_hash), answer,
                            answers.line or 0))
            out.append(Bad(file, "", None, None, None))  # replaced by _resolve
            if len(waiting) >= start.batch:
                _resolve(start, rows, out, waiting)
                yield out
                out, waiting = [], []
    _resolve(start, rows, out, waiting)
    if out:
        yield out


def _resolve(
    start: Start, rows: RowReader, out: list[Hit | Miss | Bad], waiting: list[tuple[int, int, int, str, str, Answer, int]]
) -> None:
    """Look the waiting answers up with one query per 500 keys and put their records in ``out``."""
    if not waiting:
        return
    found, packed = rows.fetch_packed(list(dict.fromkeys(w[4] for w in waiting)))
    envelopes = ENVELOPES_DECODER.decode(b"\xdd" + len(found).to_bytes(4, "big") + packed) if found else []
    stored = dict(zip(found, envelopes, strict=True))
    for slot, file, key, input_hash, whole_key, answer, at in waiting:
        envelope = stored.get(whole_key)
        got = decode_whole_entry(envelope.value) if envelope is not None and envelope.parser_version == "1" else None
        if got is None:
            out[slot] = Miss(file, key, input_hash, whole_key, _JSON_ENCODER.encode(answer), at)
            continue
        result = result_of_found(answer, input_hash, got, gamma=start.gamma, k=start.k)
        out[slot] = Hit(file, key, _JSON_ENCODER.encode(result), str(result.status), sum(got.counts), answer.id, at)


def child_main() -> int:
    """The child: read the input as :class:`Start` says and stream its records; return the exit status."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us
    inp, out = sys.stdin.fileno(), sys.stdout.fileno()
    write_frame(out, HELLO + package_root().encode())
    frame = read_frame(inp)
    if frame is None:
        return 0
    encoder = msgspec.msgpack.Encoder()
    try:
        start = _START_DECODER.decode(frame)
        rows = RowReader(Path(start.db_path), read_only=True)
        try:
            for records in _records(start, rows):
                write_frame(out, encoder.encode(Batch(records)))
        finally:
            rows.close()
    except BrokenPipeError:  # the parent stopped reading: it has what it needs
        return 0
    except Exception as exc:  # report it; the parent reads the rest itself
        try:
            write_frame(out, encoder.encode(Fail(f"{type(exc).__name__}: {exc}")))
        except BrokenPipeError:
            pass
        return 1
    try:
        write_frame(out, encoder.encode(End()))
    except BrokenPipeError:
        pass
    return 0
