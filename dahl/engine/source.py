"""The pipeline's source: the answers of a run's inputs still to score, in input order.

Runs in the pipeline's reader thread (blocking reads and hashing). Each answer gets
its input hash and resume key (:mod:`dahl.engine.output`); a second record with the
same key is a duplicate and is skipped with an input error; an answer the output
folder already holds (``finished``) is skipped and counted as resumed; every kept key
gets its input position (``order``, which :meth:`AnswerLog.finalize` sorts by).

With a :class:`~dahl.cache.whole_input.WholeInputProcess` the records come from that
child: answers it found whole arrive as finished lines
(:class:`~dahl.engine.results.FoundLine`), the others as their JSON with their
input hash. Should the child stop, the input is read here from where its
records end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import msgspec

from dahl.cache.whole_input import WholeInputFailed, WholeInputProcess
from dahl.cache.whole_input_child import Bad, Hit
from dahl.engine.output import answer_input_hash, line_key
from dahl.engine.pipeline import QueuedAnswer
from dahl.engine.results import FoundLine
from dahl.errors import InputError
from dahl.formats import read_answers
from dahl.records import Answer

__all__ = ["InputErrors", "answer_source"]

log = logging.getLogger(__name__)

#: Input errors kept for the report (all are counted and logged).
MAX_REPORTED_INPUT_ERRORS = 20

_ANSWER_DECODER = msgspec.json.Decoder(Answer)


class InputErrors:
    """Collects rejected input records (called from the reader thread).

    Attributes:
        count: records rejected.
        first: the first :data:`MAX_REPORTED_INPUT_ERRORS` of them.
    """

    def __init__(self) -> None:
        self.count = 0
        self.first: list[InputError] = []

    def __call__(self, err: InputError) -> None:
        self.count += 1
        if len(self.first) < MAX_REPORTED_INPUT_ERRORS:
            self.first.append(err)
        log.warning("skipped input record: %s", err)


def answer_source(
    inputs: Sequence[Path],
    fmt: str,
    response_column: str | tuple[str, ...] | None,
    run_fp: bytes,
    finished: set[int],
    order: dict[int, int],
    errors: Callable[[InputError], None],
    resumed: list[int],
    child: WholeInputProcess | None = None,
    fields: dict[str, str] | None = None,
) -> Iterator[QueuedAnswer | FoundLine]:
    """Yield the answers of ``inputs`` still to score, and the lines of those found whole.

    Args:
        inputs, fmt, response_column, fields: the run's inputs (see :func:`dahl.formats.read_answers`).
        run_fp: the run fingerprint (see :func:`~dahl.engine.output.answer_input_hash`).
        finished: resume keys of the answers the output folder already holds.
        order: filled with the input position of every key.
        errors: called with each rejected record (bad record, duplicate).
        resumed: ``resumed[0]`` counts the answers skipped as finished.
        child: the process reading the input, if one was started; closed at the end.

    Raises:
        InputError: from :func:`~dahl.formats.read_answers` when ``errors`` raises.
    """
    position = 0

    def admit(key: int, path: Path | str) -> bool:
        nonlocal position
        if key in order:
            errors(InputError("duplicate answer (same id and content) skipped", file=str(path), field="id"))
            return False
        order[key] = position
        position += 1
        if key in finished:
            resumed[0] += 1
            return False
        return True

    # Records of each file taken from the child: where reading here picks up should it stop.
    answers_taken = [0] * len(inputs)
    rejected_taken = [0] * len(inputs)
    if child is not None:
        try:
            for record in child.records():
                if isinstance(record, Bad):
                    rejected_taken[record.file] += 1
                    errors(InputError(record.message, file=record.path, line=record.line, field=record.field))
                    continue
                answers_taken[record.file] += 1
                if not admit(record.key, inputs[record.file]):
                    continue
                if isinstance(record, Hit):
                    yield FoundLine(record.line, record.key, record.status, record.claims)
                else:
                    answer = _ANSWER_DECODER.decode(record.answer)
                    yield QueuedAnswer(answer, record.input_hash, record.whole_key or None)
            return
        except WholeInputFailed as exc:
            log.warning("the whole-answer input process stopped (%s); reading the rest of the input here", exc)
        finally:
            child.close()
    for file, path in enumerate(inputs):
        skip_answers, skip_rejected = answers_taken[file], rejected_taken[file]

        def rejected(err: InputError) -> None:
            nonlocal skip_rejected
            if skip_rejected:  # the child sent it already
                skip_rejected -= 1
                return
            errors(err)

        for answer in read_answers(path, fmt, response_column=response_column, fields=fields, on_error=rejected):
            if skip_answers:
                skip_answers -= 1
                continue
            input_hash = answer_input_hash(answer, run_fp)
            if admit(line_key(answer.id, input_hash), path):
                yield QueuedAnswer(answer, input_hash)
