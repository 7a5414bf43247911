"""Tests for dahl.locking: one holder per folder, named in the error; no POSIX-only import at import time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dahl.errors import ConfigError
from dahl.locking import FolderLock

REPO = Path(__file__).resolve().parents[2]


def _lock(directory: Path) -> FolderLock:
    return FolderLock(directory, name=".lock", what="output folder", hint="use another", error=ConfigError)


class TestFolderLock:
    def test_second_lock_fails_naming_the_holder(self, tmp_path: Path) -> None:
        """A second lock on a held folder raises the given error with the holder's pid and the hint."""
        first = _lock(tmp_path)
        try:
            with pytest.raises(ConfigError) as caught:
                _lock(tmp_path)
            assert str(caught.value) == (
                f"output folder {tmp_path} is in use by another dahl run (pid {os.getpid()}); use another"
            )
        finally:
            first.release()

    def test_released_lock_can_be_taken_again(self, tmp_path: Path) -> None:
        """After release (twice: idempotent) the folder locks again, and the file holds the new pid."""
        first = _lock(tmp_path)
        first.release()
        first.release()
        second = _lock(tmp_path)
        try:
            assert (tmp_path / ".lock").read_text() == str(os.getpid())
        finally:
            second.release()

    def test_missing_folder_is_the_given_error(self, tmp_path: Path) -> None:
        """A folder that does not exist gives the error class, naming the folder."""
        with pytest.raises(ConfigError, match=r"cannot lock output folder .*missing"):
            _lock(tmp_path / "missing")


class TestImportWithoutFcntl:
    def test_dahl_imports_without_fcntl(self) -> None:
        """With fcntl unavailable (as on Windows), import dahl and dahl.cli succeed."""
        code = "import sys; sys.modules['fcntl'] = None; import dahl, dahl.cli, dahl.run._score; print('ok')"
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False, timeout=120
        )
        assert (result.returncode, result.stdout.strip()) == (0, "ok"), result.stderr
