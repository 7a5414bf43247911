"""A damaged or unusable cache: moved aside once, or turned off with one warning; the run completes.

Real databases, real runs through the CLI against the loopback mock server (``mocks``,
tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cache import CacheStore, CacheUnusable
from dahl.cli import main
from dahl.records import Label, Verdict

VERDICT = Verdict(label=Label.SUPPORTED, checker="stub/v1", raw="Supported.")
#: Bytes of garbage written into the middle of a database, as in issue 15.
GARBAGE = 64 * 1024
ANSWERS = 200
CLAIMS = 3 * ANSWERS  # the rules Splitter makes 3 claims of each answer below


def _key(i: int) -> str:
    return f"{i:032x}"


def _write_answers(path: Path) -> None:
    with path.open("w") as f:
        for i in range(ANSWERS):
            response = f"Drug {i} inhibits enzyme E{i}. It is given orally {i} times a day. Its half-life is {i} hours."
            f.write(json.dumps({"id": f"a{i}", "question": f"What is drug {i}?", "response": response}) + "\n")


def _garble_middle(db: Path) -> None:
    """Overwrite 64 KiB in the middle of ``db`` with bytes that are no SQLite page."""
    size = db.stat().st_size
    assert size > 3 * GARBAGE, size
    with db.open("r+b") as f:
        f.seek(size // 2 - GARBAGE // 2)
        f.write(bytes(range(256)) * (GARBAGE // 256))


def _score(answers: Path, out: Path, url: str, cache: Path, *extra: str) -> Any:
    args = ["score", str(answers), "-o", str(out), "--no-progress", "--checker", "openai", "--base-url", url,
            "--model", "mock", "--api-key-env", "DAHL_TEST_KEY", "--cache-dir", str(cache), *extra]
    return CliRunner().invoke(main, args)


def _summary(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def _aside(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if re.fullmatch(r"cache\.db\.corrupt-\d{8}T\d{6}", p.name))


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAHL_TEST_KEY", "sk-test-key-one")


class TestDamagedDatabase:
    async def test_garbage_mid_file_is_moved_aside_at_open(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """5,000 rows, 64 KiB overwritten mid-file: the next open warns once, moves it aside, starts empty."""
        directory = tmp_path / "c"
        with CacheStore(directory) as store:
            for i in range(5000):
                store.put(_key(i), VERDICT, None)
        _garble_middle(directory / "cache.db")
        with caplog.at_level(logging.WARNING):
            store = CacheStore(directory)
        try:
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1 and "is corrupt" in warnings[0] and "moved it to" in warnings[0]
            assert "\n" not in warnings[0]  # SQLite's report of the damage is flattened to one line
            assert len(_aside(directory)) == 1
            assert store.stats()["entries"] == 0
            store.put(_key(1), VERDICT, None)
        finally:
            store.close()
        caplog.clear()
        with caplog.at_level(logging.WARNING), CacheStore(directory) as again:
            assert await again.get(_key(1)) is not None
        assert [r for r in caplog.records if r.levelno == logging.WARNING] == []

    def test_a_run_after_the_damage_refills_and_the_next_sends_nothing(
        self, tmp_path: Path, mocks: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Scored, garbled, scored again (one warning, every claim re-checked), scored a third time: 0 requests."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        _write_answers(answers)
        cache = tmp_path / "cache"
        assert _score(answers, tmp_path / "first", url, cache).exit_code == 0
        assert mocks.stats(url)["requests"] == CLAIMS
        _garble_middle(cache / "cache.db")
        with caplog.at_level(logging.WARNING):
            second = _score(answers, tmp_path / "second", url, cache)
        assert second.exit_code == 0, second.output
        corrupt = [r for r in caplog.records if "is corrupt" in r.getMessage()]
        assert len(corrupt) == 1
        assert mocks.stats(url)["requests"] == 2 * CLAIMS
        assert len(_aside(cache)) == 1
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            third = _score(answers, tmp_path / "third", url, cache)
        assert third.exit_code == 0, third.output
        assert mocks.stats(url)["requests"] == 2 * CLAIMS
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert _summary(tmp_path / "third")["run"]["claims_checked"] == 0


class TestUnusableCache:
    def test_cache_db_a_folder_is_unusable(self, tmp_path: Path) -> None:
        """cache.db being a folder raises CacheUnusable naming it, again on a second try."""
        (tmp_path / "c" / "cache.db").mkdir(parents=True)
        with pytest.raises(CacheUnusable, match=r"cannot open cache database .*cache\.db"):
            CacheStore(tmp_path / "c")
        with pytest.raises(CacheUnusable):  
            CacheStore(tmp_path / "c")

    def test_a_directory_in_use_is_usable(self, tmp_path: Path) -> None:
        """Another store using the directory is no error: several runs may share one cache folder."""
        with CacheStore(tmp_path / "c"), CacheStore(tmp_path / "c") as second:
            assert second.stats()["entries"] == 0

    def test_run_with_cache_db_a_folder_completes_uncached(
        self, tmp_path: Path, mocks: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A run whose cache.db is a folder warns once, naming it, checks every claim and exits 0."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        _write_answers(answers)
        cache = tmp_path / "cache"
        (cache / "cache.db").mkdir(parents=True)
        with caplog.at_level(logging.WARNING):
            result = _score(answers, tmp_path / "out", url, cache)
        assert result.exit_code == 0, result.output
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert str(cache / "cache.db") in warnings[0] and warnings[0].endswith("; running without the cache")
        assert mocks.stats(url)["requests"] == CLAIMS
        summary = _summary(tmp_path / "out")
        assert summary["cache"].startswith(f"disabled (cannot open cache database {cache / 'cache.db'}")
        assert summary["run"]["claims_checked"] == CLAIMS

    def test_run_with_an_immutable_cache_folder_completes_uncached(
        self, tmp_path: Path, mocks: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An immutable cache folder (chattr +i: even root cannot write it) warns once and runs uncached."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        _write_answers(answers)
        cache = tmp_path / "cache"
        cache.mkdir()
        with _immutable(cache), caplog.at_level(logging.WARNING):
            result = _score(answers, tmp_path / "out", url, cache)
        assert result.exit_code == 0, result.output
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and str(cache) in warnings[0] and "running without the cache" in warnings[0]
        assert mocks.stats(url)["requests"] == CLAIMS
        assert _summary(tmp_path / "out")["cache"].startswith("disabled (cannot open cache database")

    def test_a_cache_off_run_says_so(self, tmp_path: Path, mocks: Any) -> None:
        """--no-cache records cache "off"; a usable cache records "on"."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        _write_answers(answers)
        assert _score(answers, tmp_path / "on", url, tmp_path / "cache").exit_code == 0
        assert _score(answers, tmp_path / "off", url, tmp_path / "cache", "--no-cache").exit_code == 0
        assert (_summary(tmp_path / "on")["cache"], _summary(tmp_path / "off")["cache"]) == ("on", "off")


@contextlib.contextmanager
def _immutable(folder: Path) -> Iterator[None]:
    """Make ``folder`` unwritable for the block (skips the test where that is not possible).

    Permission bits do not stop root, so as root the folder is made immutable with
    ``chattr +i``; otherwise ``chmod 0555`` is enough.
    """
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)], capture_output=True, check=False).returncode:
        pytest.skip("cannot make a folder immutable here (chattr +i)")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)


class TestNewerSchema:
    def test_a_newer_schema_is_unusable_and_left_alone(self, tmp_path: Path) -> None:
        """A cache.db stamped with a higher user_version is not touched; the store says why."""
        CacheStore(tmp_path / "c").close()
        con = sqlite3.connect(tmp_path / "c" / "cache.db")
        con.execute("PRAGMA user_version = 99")
        con.close()
        before = (tmp_path / "c" / "cache.db").read_bytes()
        with pytest.raises(CacheUnusable, match=r"has schema 99, written by a newer dahl"):
            CacheStore(tmp_path / "c")
        assert (tmp_path / "c" / "cache.db").read_bytes() == before
