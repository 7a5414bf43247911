"""Exclusive, process-wide locks on folders (a cache or an output folder), via flock."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from dahl.errors import DahlError

__all__ = ["FolderLock"]


class FolderLock:
    """Exclusive lock of a folder, taken on construction, released on close or process death.

    The lock file holds the pid of the holder, so the error names it.

    Args:
        directory: an existing folder.
        name: lock file name inside it.
        what: how messages name the folder, e.g. ``"cache directory"``.
        hint: what the user can do when it is taken.
        error: the DahlError subclass to raise.

    Raises:
        DahlError (``error``): another dahl run (or another lock in this process) holds
            it, or the lock file cannot be opened.
    """

    def __init__(
        self,
        directory: Path,
        *,
        name: str,
        what: str,
        hint: str,
        error: type[DahlError] = DahlError,
    ) -> None:
        self.directory = directory
        try:
            fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise error(f"cannot lock {what} {directory}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise error(f"{what} {directory} is in use by another dahl run (pid {holder}); {hint}") from None
        except OSError as exc:
            os.close(fd)
            raise error(f"cannot lock {what} {directory}: {exc}") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        """Release the lock (idempotent). The lock file stays: deleting it would race."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
