"""``refs.jsonl`` written one set at a time as questions finish (flushed, fsynced), and resumed."""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec

from dahl.engine._ends import read_back
from dahl.errors import InputError
from dahl.formats._appendlog import LineAppender
from dahl.records import RefSet

__all__ = ["RefsLog", "check_settings", "finished_questions"]

log = logging.getLogger(__name__)


class _Id(msgspec.Struct):
    question_id: str


class _Meta(msgspec.Struct):
    meta: dict[str, object] = {}


_ID = msgspec.json.Decoder(_Id)
_META = msgspec.json.Decoder(_Meta)
_ENCODER = msgspec.json.Encoder()


def finished_questions(path: Path) -> set[str]:
    """Question ids of the sets already in ``path`` (blocking); truncates a torn last line.

    Returns:
        The ids; empty when the file does not exist.

    Raises:
        InputError: a complete line is not a reference set line (nothing is touched).
    """
    return {item.question_id for item in read_back(path, _ID.decode, "reference set")}


def check_settings(path: Path, meta: dict[str, object]) -> None:
    """Refuse to continue ``path`` when its first set's ``meta`` records other settings (blocking).

    Raises:
        InputError: the settings differ (the file and the settings are named).
    """
    if not path.exists():
        return
    with path.open("rb") as handle:
        line = next((raw for raw in handle if raw.strip()), None)
    if line is None:
        return
    try:
        old = _META.decode(line).meta
    except msgspec.DecodeError:
        return  # a torn line: finished_questions deals with it
    differ = sorted(k for k in {*old, *meta} - {"documents"} if old.get(k) != meta.get(k))
    if differ:
        raise InputError(f"its sets were built with other settings ({', '.join(differ)}); re-run with the same "
                         "options, or choose another -o", file=str(path))


class RefsLog(LineAppender):
    """The output file, opened for appending (blocking methods: call them in a worker thread).

    Args:
        path: ``refs.jsonl``.

    Raises:
        OutputWriteError: (on open) the file cannot be opened for writing.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.written = 0

    def write(self, ref_set: RefSet) -> None:
        """Append one line, flushed and fsynced.

        Raises:
            OutputWriteError: the disk is full or the file read-only (earlier lines are kept).
        """
        self.append(_ENCODER.encode(ref_set))
        self.written += 1
