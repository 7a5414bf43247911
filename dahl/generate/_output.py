"""The answers file of ``dahl generate``: append-only dahl JSONL, one fsynced answer a line; an
unfinished last line is cut off on re-open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from dahl.errors import ConfigError, InputError, OutputWriteError
from dahl.formats._appendlog import LineAppender
from dahl.locking import FolderLock

__all__ = ["AnswerLog", "finished_ids", "lock_answers"]


def lock_answers(path: Path) -> FolderLock:
    """Lock the answers file ``path`` for this run (``.NAME.lock`` beside it, its folder created); blocking.

    Raises:
        ConfigError: another dahl run holds it (the message names its pid).
        OutputWriteError: the folder cannot be created or the lock file written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError(f"cannot write {path}: {exc.strerror}", path=str(path)) from None
    return FolderLock(path.parent, name=f".{path.name}.lock", what=f"answers file {path.name} in", error=ConfigError,
                      unusable=OutputWriteError, hint="wait for it to finish, or write to another file with -o")


def finished_ids(path: Path) -> set[str]:
    """Ids of the answers already in ``path`` (empty when absent; an unfinished last line ignored); blocking.

    Raises:
        InputError: a complete line is not a JSON object with a string ``id`` (file, line named).
    """
    if not path.exists():
        return set()
    ids: set[str] = set()
    with path.open("rb") as handle:
        for n, line in enumerate(handle, 1):
            if not line.endswith(b"\n") or not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise InputError("not a dahl generate answers file (line is not JSON)", file=str(path),
                                 line=n) from None
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                raise InputError("not a dahl generate answers file", file=str(path), line=n, field="id")
            ids.add(record["id"])
    return ids


class AnswerLog(LineAppender):
    """Appends answers to ``path`` (blocking methods: call them in a thread).

    Raises:
        OutputWriteError: (on construction and write) the file cannot be opened or written.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, trim_torn=True)

    def write(self, record: dict[str, Any]) -> None:
        """Append one line, flushed and fsynced.

        Raises:
            OutputWriteError: the disk is full or the file read-only (earlier lines are kept).
        """
        self.append(orjson.dumps(record))
