"""FactRBench's released reference fact sets, converted to :class:`~dahl.records.RefSet`.

FactRBench (Liu et al., "VERIFACT", arXiv 2505.09701; ``launch/FactRBench``) rows are
``{"question", "reference_fact_set"}``, the latter (an object or its JSON string) mapping each
source to its fact sentences. A set is the union of the sources' facts, exact duplicates merged,
ids ``"1"``, ``"2"``, …, ``support`` = sources stating it, ``source.answer_id`` = the first,
``meta = {"layout": "factrbench", "sources": {source: facts listed}}``. JSONL or Parquet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dahl.errors import ConfigError, InputError
from dahl.formats._jsonpath import ANY_JSON, decode_json
from dahl.records import FactSource, RefFact, RefSet, content_id, normalize_text

__all__ = ["FACT_SET_FIELD", "factrbench_set", "is_factrbench", "read_factrbench_parquet"]

#: The column that marks a row as FactRBench's layout.
FACT_SET_FIELD = "reference_fact_set"

_BATCH_ROWS = 256


def is_factrbench(row: object) -> bool:
    """True when ``row`` (a decoded JSON line or Parquet row) is in FactRBench's layout."""
    return isinstance(row, dict) and FACT_SET_FIELD in row


def factrbench_set(row: dict[str, Any], *, file: str, line: int) -> RefSet:
    """Convert one FactRBench row to a reference set (see the module docstring).

    Args:
        row: the row as a dict (other columns are ignored).
        file, line: where the row is, for errors (line: 1-based line or row).

    Raises:
        InputError: ``question`` missing or empty, or ``reference_fact_set`` not an object
            (or a JSON string of one) of lists of strings.
    """
    question = row.get("question")
    if not isinstance(question, str) or not normalize_text(question):
        raise InputError("a FactRBench row needs a non-empty question", file=file, line=line, field="question")
    raw = row.get(FACT_SET_FIELD)
    if isinstance(raw, str):
        raw = decode_json(ANY_JSON, raw, file=file, line=line, field=FACT_SET_FIELD)
    if not isinstance(raw, dict):
        raise InputError(f"must be an object of fact lists, got {type(raw).__name__}", file=file, line=line,
                         field=FACT_SET_FIELD)
    facts: dict[str, list[Any]] = {}  # normalized text -> [text, first source, sources]
    listed: dict[str, int] = {}
    for name, sentences in raw.items():
        where = f"{FACT_SET_FIELD}.{name}"
        if not isinstance(sentences, list):
            raise InputError(f"must be a list of facts, got {type(sentences).__name__}", file=file, line=line,
                             field=where)
        listed[str(name)] = len(sentences)
        for i, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise InputError(f"a fact must be a string, got {type(sentence).__name__}", file=file, line=line,
                                 field=f"{where}[{i}]")
            text = normalize_text(sentence)
            if not text:
                continue
            entry = facts.setdefault(text, [text, str(name), set()])
            entry[2].add(str(name))
    qid = row.get("question_id")
    return RefSet(
        question_id=qid if isinstance(qid, str) and qid else content_id(question),
        question=question,
        facts=tuple(
            RefFact(id=str(n), text=text, source=FactSource(answer_id=first), support=len(names))
            for n, (text, first, names) in enumerate(facts.values(), 1)
        ),
        meta={"layout": "factrbench", "sources": listed},
    )


def read_factrbench_parquet(path: Path) -> Iterator[RefSet]:
    """The reference sets of a FactRBench Parquet file, :data:`_BATCH_ROWS` rows in memory at a time.

    Raises:
        ConfigError: pyarrow is not installed, or the file is not Parquet.
        InputError: a row without the FactRBench columns or with bad values (row = line).
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError(f"reading {path} needs pyarrow, which is not installed; pip install 'dahl[arrow]'") from exc
    try:
        parquet = pq.ParquetFile(str(path))
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ConfigError(f"cannot read {path} as Parquet: {exc}") from exc
    line = 0
    for batch in parquet.iter_batches(batch_size=_BATCH_ROWS):
        for row in batch.to_pylist():
            line += 1
            if not is_factrbench(row):
                raise InputError(f"not a FactRBench row (no {FACT_SET_FIELD} column)", file=str(path), line=line,
                                 field=FACT_SET_FIELD)
            yield factrbench_set(row, file=str(path), line=line)
