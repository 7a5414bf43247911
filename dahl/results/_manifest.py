"""The run folder's ``manifest.json``: what a run read, when, and whether it finished
(:func:`stale_reason`). Blocking file I/O: call it from a worker thread."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import orjson

from dahl._version import __version__
from dahl.errors import ConfigError
from dahl.results._log import writing
from dahl.formats._inline import Input, Records
from dahl.formats._lines import input_name, is_stream

__all__ = [
    "COMPLETE", "IN_PROGRESS", "MANIFEST_NAME", "POSITIONS_NAME", "QuestionSet", "Shard", "answers_file_state",
    "hash_inputs", "json_text", "mark_started", "now_utc", "read_manifest", "stale_reason",
    "write_atomic"
]

MANIFEST_NAME = "manifest.json"
#: A shard's input positions: one little-endian int64 per line of its answers.jsonl, the answer's
#: place among the records read from the run's inputs (what ``dahl merge`` orders lines by).
POSITIONS_NAME = "positions.i64"
IN_PROGRESS = "in progress"
COMPLETE = "complete"

_CHUNK = 1 << 20


def now_utc() -> str:
    """The current time, UTC, ISO 8601 to the second (``2026-12-01T09:30:00+00:00``)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def json_text(text: str | os.PathLike[str]) -> str:
    """``text`` (a path or a message naming one) as valid Unicode for JSON: the lone surrogates of
    a name that is not UTF-8 (``a\\udcff.jsonl``) become escapes (``a\\xff.jsonl``)."""
    value = os.fspath(text)
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def hash_inputs(paths: Sequence[Input]) -> list[dict[str, Any]]:
    """Path, size (bytes) and hex blake2b-128 content hash of each input, streamed 1 MiB at a time.

    In-memory records are hashed as their canonical JSON, with ``bytes`` None.

    Returns:
        One ``{"path", "bytes", "blake2b"}`` per input, in order (``blake2b`` None: unreadable).
    """
    out: list[dict[str, Any]] = []
    for path in paths:
        if isinstance(path, Records):
            out.append({"path": str(path), "bytes": None, "blake2b": path.content_hash()})
            continue
        if is_stream(path):  # standard input or a FIFO: read once, by the run
            out.append({"path": input_name(path), "bytes": None, "blake2b": None})
            continue
        hasher = hashlib.blake2b(digest_size=16)
        size = 0
        try:
            with open(path, "rb") as f:
                while chunk := f.read(_CHUNK):
                    hasher.update(chunk)
                    size += len(chunk)
            digest: str | None = hasher.hexdigest()
        except OSError:
            digest = None
        out.append({"path": json_text(path), "bytes": size, "blake2b": digest})
    return out


class Shard(msgspec.Struct, frozen=True, kw_only=True):
    """Shard ``index`` of ``count`` (``0 <= index < count``): the answers whose id hashes to ``index``.

    The hash is blake2b-64 of the id's UTF-8 bytes modulo ``count``, the same on every run and
    machine; an id's duplicates fall in its shard.

    Raises:
        ConfigError: ``count < 1`` or ``index`` outside ``[0, count)``.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ConfigError(f"--shard must be I/N with 0 <= I < N, got {self}")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """The shard written ``I/N``; ConfigError if it is not two integers with ``0 <= I < N``."""
        index, _, count = text.partition("/")
        try:
            return cls(index=int(index), count=int(count))
        except ValueError:
            raise ConfigError(f"--shard must be I/N with 0 <= I < N (e.g. 0/4), got {text!r}") from None

    def owns(self, answer_id: str) -> bool:
        """Whether the answer with id ``answer_id`` is this shard's."""
        digest = hashlib.blake2b(answer_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.count == self.index


class QuestionSet:
    """The set of questions a run's answers respond to, hashed to compare runs."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def __len__(self) -> int:
        """Distinct question ids."""
        return len(self._ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuestionSet):
            return NotImplemented
        return self._ids == other._ids

    __hash__ = None  # type: ignore[assignment]  # mutable

    def add(self, question_ids: Iterable[str]) -> None:
        """Add question ids (repeats are counted once)."""
        self._ids.update(question_ids)

    def union(self, other: QuestionSet) -> QuestionSet:
        """A new set of the questions of both."""
        out = QuestionSet()
        out._ids = self._ids | other._ids
        return out

    def as_dict(self) -> dict[str, Any]:
        """``{"questions": n, "blake2b": hex}``: the count and blake2b-128 of the sorted ids, NUL-separated."""
        hasher = hashlib.blake2b(digest_size=16)
        for qid in sorted(self._ids):
            hasher.update(json_text(qid).encode("utf-8") + b"\x00")
        return {"questions": len(self._ids), "blake2b": hasher.hexdigest()}


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The manifest of ``run_dir``, or None (absent, unreadable or not an object)."""
    try:
        data = orjson.loads((Path(run_dir) / MANIFEST_NAME).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    Raises:
        OutputWriteError: the file cannot be written (disk full, read-only folder);
            the previous content of ``path`` is kept.
    """
    tmp = path.with_suffix(path.suffix + ".tmp")
    with writing(path):
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise


def mark_started(out_dir: Path, previous: dict[str, Any] | None, started_at: str,
                 config_hash: str | None = None) -> None:
    """Record in the manifest that a run started: until it completes, the folder is stale.

    Args:
        previous: the manifest found in ``out_dir`` (its fields are kept), or None.
        started_at: :func:`now_utc` at the start.
        config_hash: the run's configuration hash, for a re-run after a stop to compare.

    Raises:
        OutputWriteError: the manifest cannot be written.
    """
    manifest = {**(previous or {}), "state": IN_PROGRESS, "started_at": started_at, "dahl_version": __version__}
    if config_hash is not None:
        manifest["config_hash"] = config_hash
    manifest.pop("finished_at", None)
    write_atomic(out_dir / MANIFEST_NAME, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


def answers_file_state(path: Path, lines: int) -> dict[str, int]:
    """``{"bytes", "lines"}`` of ``answers.jsonl`` at the run's end (bytes 0 when absent), given its
    line count ``lines``."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    return {"bytes": size, "lines": lines}


def stale_reason(run_dir: Path) -> str | None:
    """Why the summary and verdicts of ``run_dir`` do not describe its ``answers.jsonl``, or None
    (also without a manifest or its state)."""
    manifest = read_manifest(run_dir)
    if manifest is None or "state" not in manifest:
        return None
    if manifest["state"] == IN_PROGRESS:
        return (f"the run started there at {manifest.get('started_at', '?')} did not finish (interrupted?), "
                "so its summary.json and verdicts/ are from an earlier run")
    recorded = manifest.get("answers_file")
    if isinstance(recorded, dict):
        try:
            size = (Path(run_dir) / "answers.jsonl").stat().st_size
        except FileNotFoundError:
            size = 0
        if size != recorded.get("bytes"):
            return (f"answers.jsonl has {size} bytes but its summary.json and verdicts/ were written "
                    f"for {recorded.get('bytes')} bytes")
    return None
