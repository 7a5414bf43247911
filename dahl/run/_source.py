"""The pipeline's source: the answers of a run's inputs still to score, in input order.

Runs in the pipeline's reader thread. A second record with an id already read is skipped with
an input error naming both records; an answer the output folder holds is counted as resumed.
A shard run keeps the answers of its shard; records that cannot be read are reported by shard 0 only,
so the shards of one run report each once.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from dahl.engine._pipeline import QueuedAnswer
from dahl.errors import InputError
from dahl.formats import Needs, Records, read_answers
from dahl.formats._lines import input_name
from dahl.records import Answer, content_id
from dahl.results._counters import RunCounters
from dahl.results._index import InputIndex
from dahl.results._log import answer_input_hash, line_key
from dahl.results._manifest import Shard

__all__ = ["InputErrors", "answer_source"]

log = logging.getLogger(__name__)

#: Input errors kept for the report and logged one by one; past these, each file's
#: further ones are counted and logged as one line (:meth:`InputErrors.log_suppressed`).
MAX_REPORTED_INPUT_ERRORS = 20

_LINE_MASK = (1 << 40) - 1


class InputErrors:
    """Collects rejected input records (called from the reader thread).

    The first :data:`MAX_REPORTED_INPUT_ERRORS` are logged as warnings and kept; the others are
    only counted.

    Args:
        counters: the run's counters, whose ``input_errors`` is kept equal to ``count``.

    Attributes:
        count: records rejected.
        first: the first :data:`MAX_REPORTED_INPUT_ERRORS` of them.
        suppressed: file -> rejected records of it neither logged nor kept.
    """

    def __init__(self, counters: RunCounters | None = None) -> None:
        self.count = 0
        self.first: list[InputError] = []
        self.suppressed: Counter[str] = Counter()
        self._counters = counters

    def __call__(self, err: InputError) -> None:
        self.count += 1
        if self._counters is not None:
            self._counters.input_errors = self.count
        if len(self.first) < MAX_REPORTED_INPUT_ERRORS:
            self.first.append(err)
            log.warning("skipped input record: %s", err)
        else:
            self.suppressed[str(err.file)] += 1

    def log_suppressed(self) -> None:
        """Log one warning per file whose rejected records were not logged one by one."""
        for file, n in self.suppressed.items():
            log.warning("... and %s more bad input records in %s; see summary.json", f"{n:,}", file)


def answer_source(
    inputs: Sequence[Path | Records],
    fmt: str,
    response_column: str | tuple[str, ...] | None,
    run_fp: bytes,
    finished: set[int],
    index: InputIndex,
    errors: Callable[[InputError], None],
    needs: Needs = Needs.NOTHING,
    counters: RunCounters | None = None,
    fields: dict[str, str] | None = None,
    shard: Shard | None = None,
) -> Iterator[QueuedAnswer]:
    """Yield the answers of ``inputs`` still to score.

    Args:
        inputs, fmt, response_column, fields: the run's inputs (see :func:`dahl.formats.read_answers`).
        run_fp: the run fingerprint (see :func:`~dahl.results._log.answer_input_hash`).
        finished: resume keys of the answers the output folder already holds.
        index: filled with every answer admitted: where its id was first read, its resume key and
            its input position, the answer's place among the answers read from ``inputs`` (those of
            other shards and duplicates counted too).
        errors: called with each rejected record.
        needs: what every answer must carry for the run's adapters.
        counters: the run's counters (``answers_resumed`` counted as read).
        shard: score only this shard's answers; None: all.

    Raises:
        InputError: from :func:`~dahl.formats.read_answers` when ``errors`` raises.
    """
    position = 0

    def at(where: int) -> str:
        path, line = input_name(inputs[where >> 40]), where & _LINE_MASK
        return f"{path}:{line}" if line else path

    def admit(key: int, answer_id: str, file: int, line: int, answer: Answer) -> bool:
        # Where each id was first read: file index << 40 | line (0: line unknown).
        repeat = index.admit(position, hash(answer_id), file << 40 | line, key)
        if repeat is not None:
            first, same = repeat
            if same:
                message = f"duplicate answer (same id and content as {at(first)}) skipped"
            else:
                derived = answer_id == content_id(answer.model, answer.question, answer.response)
                how = " (an id derived from model, question and response)" if derived else ""
                message = (f"answer id {answer_id!r}{how} is already used by {at(first)} with different content; "
                           "skipped (give each answer its own id)")
            errors(InputError(message, file=input_name(inputs[file]), line=line or None, field="id"))
            return False
        if key in finished:
            if counters is not None:
                counters.answers_resumed += 1
            return False
        return True

    on_error = errors if shard is None or shard.index == 0 else _ignore
    for file, path in enumerate(inputs):
        for line, answer in read_answers(path, fmt, response_column=response_column, fields=fields,
                                         on_error=on_error, needs=needs).pairs():
            position += 1
            if shard is not None and not shard.owns(answer.id):
                continue
            input_hash = answer_input_hash(answer, run_fp)
            if admit(line_key(answer.id, input_hash), answer.id, file, line or 0, answer):
                yield QueuedAnswer(answer, input_hash)


def _ignore(_error: InputError) -> None:
    """Drop a rejected record (another shard reports it)."""
