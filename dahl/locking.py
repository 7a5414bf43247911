"""Exclusive, process-wide locks on folders (a cache or an output folder).

``flock`` on POSIX, ``msvcrt.locking`` on Windows, each imported where used so ``import dahl``
works on both; the OS releases either lock when the process dies.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dahl.errors import DahlError

__all__ = ["FolderLock"]

#: Windows locks are mandatory: the locked byte lies past the pid so the pid stays readable.
_WINDOWS_LOCK_OFFSET = 1 << 20
#: Bytes of the lock file read for the holder's pid.
_PID_BYTES = 32


def _try_lock(fd: int) -> bool:
    """Take the exclusive lock of ``fd`` without waiting; False if another open file holds it.

    Raises:
        OSError: the file system cannot lock this file.
    """
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except PermissionError:  # held by another open file (errno EACCES)
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    """Release the lock taken by :func:`_try_lock`."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


class FolderLock:
    """Exclusive lock of a folder, taken on construction; the lock file holds the holder's pid.

    Args:
        directory: an existing folder.
        name: lock file name inside it.
        what: how messages name the folder, e.g. ``"cache directory"``.
        hint: what the user can do when it is taken.
        error: the DahlError subclass raised when another holder has the lock.
        unusable: the one raised when the lock file cannot be opened or locked; None: ``error``.

    Raises:
        DahlError (``error``): another dahl run (or another lock in this process) holds it.
        DahlError (``unusable``): the lock file cannot be opened or locked.
    """

    def __init__(
        self,
        directory: Path,
        *,
        name: str,
        what: str,
        hint: str,
        error: type[DahlError] = DahlError,
        unusable: type[DahlError] | None = None,
    ) -> None:
        self.directory = directory
        cannot = unusable if unusable is not None else error
        try:
            fd = os.open(directory / name, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        except OSError as exc:
            raise cannot(f"cannot lock {what} {directory}: {exc}") from exc
        try:
            locked = _try_lock(fd)
        except OSError as exc:
            os.close(fd)
            raise cannot(f"cannot lock {what} {directory}: {exc}") from exc
        if not locked:
            os.lseek(fd, 0, os.SEEK_SET)
            holder = os.read(fd, _PID_BYTES).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise error(f"{what} {directory} is in use by another dahl run (pid {holder}); {hint}")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode("ascii"))
        self._fd: int | None = fd

    def release(self) -> None:
        """Release the lock (idempotent). The lock file stays: deleting it would race."""
        if self._fd is not None:
            _unlock(self._fd)
            os.close(self._fd)
            self._fd = None
