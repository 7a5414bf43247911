"""An output file that lines are appended to, each one flushed and fsynced, so a crash keeps
every line written and a re-run reads them to continue."""

from __future__ import annotations

import os
from pathlib import Path

from dahl.errors import OutputWriteError

__all__ = ["LineAppender"]

#: Bytes read back from the end to find a torn last line.
_TAIL_BYTES = 1 << 16


class LineAppender:
    """``path`` opened for appending (blocking methods: call them in a worker thread).

    Args:
        path: the file (created, with its folder, when missing).
        trim_torn: cut a last line without its newline (left by a kill) when opening.

    Raises:
        OutputWriteError: (on open) the file cannot be opened for writing.
    """

    def __init__(self, path: Path, *, trim_torn: bool = False) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = path.open("ab+")
            size = self._handle.seek(0, os.SEEK_END)
            if trim_torn and size:
                self._handle.seek(max(0, size - _TAIL_BYTES))
                tail = self._handle.read()
                if not tail.endswith(b"\n"):
                    start, cut = size - len(tail), tail.rfind(b"\n")
                    self._handle.truncate(start + cut + 1 if cut >= 0 else start)
        except OSError as exc:
            raise OutputWriteError(f"cannot write {path}: {exc.strerror}", path=str(path)) from None

    def append(self, line: bytes) -> None:
        """Append ``line`` (without its newline), flushed and fsynced.

        Raises:
            OutputWriteError: the disk is full or the file read-only (earlier lines are kept).
        """
        try:
            self._handle.write(line + b"\n")
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            raise OutputWriteError(f"cannot write {self.path}: {exc.strerror}", path=str(self.path)) from None

    def close(self) -> None:
        """Close the file."""
        self._handle.close()
