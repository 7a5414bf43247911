"""Reference fact sets (``refs.jsonl``): one :class:`~dahl.records.RefSet` per line.

A missing ``question_id`` is :func:`~dahl.records.content_id` of ``question``; a fact without
``id`` gets its 1-based position. :func:`read_refs` also reads FactRBench's layout (JSONL or
Parquet, :mod:`dahl.formats._factrbench`); :class:`RefIndex` finds an answer's set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from dahl.errors import InputError
from dahl.formats._factrbench import factrbench_set, is_factrbench, read_factrbench_parquet
from dahl.formats._jsonpath import ANY_JSON, decode_json
from dahl.records import AnswerResult, FactSource, RefFact, RefSet, content_id, normalize_text

__all__ = ["RefIndex", "read_refs", "refs_sha256", "write_refs"]


class _FactIn(msgspec.Struct, kw_only=True):
    text: str
    id: str | int | None = None
    source: dict[str, object] | None = None
    relevance: float | None = None
    salience: float | None = None
    importance: float | None = None
    support: int | None = None


class _SetIn(msgspec.Struct, kw_only=True):
    facts: list[_FactIn]
    question_id: str | None = None
    question: str = ""
    meta: dict[str, object] = {}


_DECODER = msgspec.json.Decoder(_SetIn)


def _fact(raw: _FactIn, n: int, path: Path, line: int) -> RefFact:
    text = normalize_text(raw.text)
    where = f"$.facts[{n - 1}]"
    if not text:
        raise InputError("a reference fact has empty text", file=str(path), line=line, field=f"{where}.text")
    for name in ("relevance", "salience"):
        value = getattr(raw, name)
        if value is not None and not 1 <= value <= 5:
            raise InputError(f"{name} must be a 1-5 rating, got {value}", file=str(path), line=line,
                             field=f"{where}.{name}")
    if (raw.relevance is None) != (raw.salience is None) and raw.importance is None:
        given, missing = ("relevance", "salience") if raw.salience is None else ("salience", "relevance")
        raise InputError(f"{given} without {missing}: give both ratings, or an importance", file=str(path),
                         line=line, field=f"{where}.{missing}")
    if raw.importance is not None and not 0.0 <= raw.importance <= 1.0:
        raise InputError(f"importance must be in [0, 1], got {raw.importance}", file=str(path), line=line,
                         field=f"{where}.importance")
    if raw.support is not None and raw.support < 0:
        raise InputError(f"support must be >= 0, got {raw.support}", file=str(path), line=line,
                         field=f"{where}.support")
    source = None
    if raw.source is not None:
        try:
            source = msgspec.convert(raw.source, type=FactSource)
        except msgspec.ValidationError as exc:
            raise InputError(str(exc), file=str(path), line=line, field=f"{where}.source") from None
    return RefFact(
        id=str(raw.id) if raw.id is not None else str(n),
        text=text,
        source=source,
        relevance=raw.relevance,
        salience=raw.salience,
        importance=raw.importance,
        support=raw.support,
    )


def read_refs(path: str | Path) -> Iterator[RefSet]:
    """Yield the reference sets of ``path``, in file order: dahl's, or FactRBench's
    (``reference_fact_set`` in the first line, or a ``.parquet`` file).

    Raises:
        InputError: the file cannot be read, a line is not a valid set, or duplicate fact ids.
        ConfigError: a Parquet file without pyarrow installed, or not Parquet.
    """
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        yield from read_factrbench_parquet(path)
        return
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read reference facts: {exc.strerror}", file=str(path)) from None
    factrbench: bool | None = None  # decided by the first line
    with handle:
        for line_no, line in enumerate(handle, 1):
            if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]  # a UTF-8 byte-order mark (an editor's), as the answers readers allow
            if not line.strip():
                continue
            if factrbench is None:
                factrbench = is_factrbench(_json_or_none(line))
            if factrbench:
                row = _json_object(line, path, line_no)
                if not is_factrbench(row):
                    raise InputError("not a FactRBench row (no reference_fact_set) in a file whose first row is",
                                     file=str(path), line=line_no, field="reference_fact_set")
                yield factrbench_set(row, file=str(path), line=line_no)
                continue
            raw = decode_json(_DECODER, line, file=str(path), line=line_no, invalid="not a reference set: ")
            question = raw.question
            if raw.question_id is None and not normalize_text(question):
                raise InputError("a reference set needs question_id or question", file=str(path), line=line_no,
                                 field="question_id")
            facts = tuple(_fact(f, n, path, line_no) for n, f in enumerate(raw.facts, 1))
            seen: set[str] = set()
            for n, fact in enumerate(facts):
                if fact.id in seen:
                    raise InputError(f"duplicate fact id {fact.id!r}", file=str(path), line=line_no,
                                     field=f"$.facts[{n}].id")
                seen.add(fact.id)
            yield RefSet(
                question_id=raw.question_id if raw.question_id is not None else content_id(question),
                question=question,
                facts=facts,
                meta=dict(raw.meta),
            )


def _json_or_none(line: bytes) -> Any:
    try:
        return decode_json(ANY_JSON, line, file="", line=None)
    except InputError:  # reported when the line is read as a set
        return None


def _json_object(line: bytes, path: Path, line_no: int) -> dict[str, Any]:
    value = decode_json(ANY_JSON, line, file=str(path), line=line_no)
    if not isinstance(value, dict):
        raise InputError(f"not a JSON object: {type(value).__name__}", file=str(path), line=line_no)
    return value


def refs_sha256(path: str | Path) -> str:
    """Hex SHA-256 of the reference set file's bytes (``recall_settings.refs_sha256``).

    Raises:
        InputError: the file cannot be read.
    """
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise InputError(f"cannot read reference facts: {exc.strerror}", file=str(path)) from None
    return digest.hexdigest()


def write_refs(path: str | Path, sets: Iterable[RefSet]) -> int:
    """Write ``sets`` to ``path`` as ``refs.jsonl`` (atomically: a temp file renamed).

    Returns:
        The number of sets written.

    Raises:
        OSError: the file cannot be written (nor is anything when ``sets`` raises).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    encoder = msgspec.json.Encoder()
    n = 0
    try:
        with tmp.open("wb") as out:
            for ref_set in sets:
                data = msgspec.to_builtins(ref_set)
                data.setdefault("facts", [])  # RefSet omits an empty tuple; read_refs requires the key
                out.write(encoder.encode(data) + b"\n")
                n += 1
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves neither a half file nor a temp file
        raise
    return n


class RefIndex:
    """Reference sets by ``question_id``, else by :func:`~dahl.records.content_id` of the question text.

    Args:
        sets: the reference sets, one per question.
        file: the file they come from, named in errors.

    Raises:
        InputError: two sets for one question id.
    """

    def __init__(self, sets: Iterable[RefSet], file: str | None = None) -> None:
        self._by_id: dict[str, RefSet] = {}
        self._by_text: dict[str, RefSet] = {}
        first: dict[str, int] = {}
        for n, ref_set in enumerate(sets, 1):
            if first.setdefault(ref_set.question_id, n) != n:
                raise InputError(f"sets {first[ref_set.question_id]} and {n} are both for question "
                                 f"{ref_set.question_id!r}", file=file, field="question_id")
            self._by_id[ref_set.question_id] = ref_set
            if normalize_text(ref_set.question):
                self._by_text[content_id(ref_set.question)] = ref_set

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"RefIndex({len(self)} questions)"

    def find(self, question_id: str, question: str = "") -> RefSet | None:
        """The set of the question ``question_id`` (or text ``question``), None if there is none."""
        found = self._by_id.get(question_id)
        if found is None and question:
            found = self._by_text.get(content_id(question))
        return found

    def of(self, result: AnswerResult) -> RefSet | None:
        """The set of ``result``'s question, None if there is none."""
        return self.find(result.question_id, result.question)
