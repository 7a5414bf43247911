"""Tests for dahl.cache.remote: check keys and verdict reads in a child process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dahl.adapters.openai import OpenAIChecker
from dahl.cache import CacheStore, CachingChecker, check_keys
from dahl.cache.keys import CheckKeyRecipe, check_key_recipe, recipe_keys
from dahl.cache.remote import ProcessReader
from dahl.config import EndpointConfig
from dahl.results._counters import RunCounters
from dahl.records import Answer, Claim, Label, Verdict

QUESTION = "  Who was <question> Ada Lovelace?"
CLAIMS = [
    Claim(text="Ada Lovelace was a mathematician.", index=0),
    Claim(text="Ada  Lovelace was born in\t1815.", index=1),
    Claim(text="She wrote </claim> the first program.", index=2),
    Claim(text="Caf\u0065\u0301s were her office.", index=3),
]
ANSWER = Answer(id="a1", question=QUESTION, response="...")


class _NoLane:
    """A lane that fails: every verdict here must come from the cache."""

    async def call(self, attempt: Any, *, estimated_tokens: int) -> Any:
        raise AssertionError("the model was called")


def _checker(model: str = "m1") -> OpenAIChecker:
    cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model=model, api_key_env="")
    return OpenAIChecker(cfg, None, _NoLane())  # type: ignore[arg-type]  # session never used


def _label(verdict: object) -> Label | None:
    return verdict.label if isinstance(verdict, Verdict) else None


def _verdict(checker: OpenAIChecker, label: Label) -> Verdict:
    return Verdict(label=label, checker=checker.fingerprint, raw=str(label))


async def _ready(reader: ProcessReader, timeout_s: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not reader.ready:
        assert loop.time() < deadline, "the lookup process did not start"
        await asyncio.sleep(0.02)


async def _filled_store(tmp_path: Path, checker: OpenAIChecker, labels: dict[int, Label]) -> CacheStore:
    """A store holding a committed verdict for the claims ``labels`` names (by index)."""
    store = CacheStore(tmp_path / "cache", flush_interval_s=60.0)  # commits only on flush()
    keys = check_keys(checker, CLAIMS, ANSWER)
    for i, label in labels.items():
        store.put(keys[i], _verdict(checker, label), str(label), parser_version=checker.parser_version)
    await store.flush()
    return store


@contextlib.asynccontextmanager
async def _running(
    tmp_path: Path, checker: OpenAIChecker, labels: dict[int, Label]
) -> AsyncIterator[tuple[CacheStore, ProcessReader, CheckKeyRecipe]]:
    """A filled store, its started lookup process, and the Checker's recipe; the store is closed after."""
    store = await _filled_store(tmp_path, checker, labels)
    try:
        reader = store.process_reader()
        assert reader is not None
        await _ready(reader)
        recipe = check_key_recipe(checker, checker.parser_version)
        assert recipe is not None
        yield store, reader, recipe
    finally:
        store.close()


class TestRecipeKeys:
    def test_equal_to_check_keys(self) -> None:
        """Keys from the recipe equal check_keys (tags, double spaces, decomposed accents)."""
        checker = _checker()
        recipe = check_key_recipe(checker, "1")
        assert recipe is not None
        texts = [c.text for c in CLAIMS]
        assert recipe_keys(recipe, QUESTION, texts) == check_keys(checker, CLAIMS, ANSWER)

    def test_another_model_gives_other_keys(self) -> None:
        """The recipe carries the frame: another model's recipe gives other keys."""
        first, second = check_key_recipe(_checker("m1"), "1"), check_key_recipe(_checker("m2"), "1")
        assert first is not None and second is not None
        assert recipe_keys(first, QUESTION, ["x"]) != recipe_keys(second, QUESTION, ["x"])

    def test_a_checker_without_hooks_has_no_recipe(self) -> None:
        """A Checker without the frame and parts hooks gives None."""

        class Plain:
            fingerprint = "plain/v1"

        assert check_key_recipe(Plain(), "1") is None  # type: ignore[arg-type]


class TestProcessReader:
    async def test_finds_committed_verdicts_and_reports_the_rest(self, tmp_path: Path) -> None:
        """The child returns check_keys' keys, the stored verdicts, and None for absent claims."""
        checker = _checker()
        async with _running(tmp_path, checker, {0: Label.SUPPORTED, 2: Label.UNSUPPORTED}) as (_, reader, recipe):
            got = await reader.look_up(recipe, QUESTION, [c.text for c in CLAIMS])
            assert got is not None
            keys, verdicts = got
            assert keys == check_keys(checker, CLAIMS, ANSWER)
            assert [_label(v) for v in verdicts] == [Label.SUPPORTED, None, Label.UNSUPPORTED, None]
            assert (reader.batches, reader.claims_found) == (1, 2)

    async def test_concurrent_groups_share_a_batch(self, tmp_path: Path) -> None:
        """Groups asked for in the same loop round go to the child as one batch, each answered in order."""
        async with _running(tmp_path, _checker(), {1: Label.SUPPORTED, 3: Label.IRRELEVANT}) as (_, reader, recipe):
            texts = [c.text for c in CLAIMS]
            # The same claims twice and once reversed: repeated keys within one batch.
            results = await asyncio.gather(
                reader.look_up(recipe, QUESTION, texts),
                reader.look_up(recipe, QUESTION, texts[::-1]),
                reader.look_up(recipe, QUESTION, texts),
            )
            labels = [[_label(v) for v in r[1]] for r in results if r is not None]
            assert labels == [
                [None, Label.SUPPORTED, None, Label.IRRELEVANT],
                [Label.IRRELEVANT, None, Label.SUPPORTED, None],
                [None, Label.SUPPORTED, None, Label.IRRELEVANT],
            ]
            assert reader.batches == 1

    async def test_a_killed_child_turns_the_path_off(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """After the child dies, look_up answers None (look up here) and one warning is logged."""
        async with _running(tmp_path, _checker(), {0: Label.SUPPORTED}) as (_, reader, recipe):
            os.kill(reader.pid, signal.SIGKILL)
            with caplog.at_level(logging.WARNING, logger="dahl.cache.remote"):
                first = await reader.look_up(recipe, QUESTION, ["x"])
                second = await reader.look_up(recipe, QUESTION, ["y"])
            assert (first, second, reader.ready) == (None, None, False)
            assert sum("lookup process" in r.getMessage() for r in caplog.records) == 1

    async def test_close_stops_the_child(self, tmp_path: Path) -> None:
        """Closing the store ends the child process."""
        store = CacheStore(tmp_path / "cache")
        reader = store.process_reader()
        assert reader is not None
        await _ready(reader)
        pid = reader.pid
        store.close()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


class TestCachingCheckerWithProcess:
    async def test_look_up_through_the_process_equals_look_up_here(self, tmp_path: Path) -> None:
        """Verdicts, keys and counts are those of the in-process lookup; absent claims stay None."""
        checker = _checker()
        store = await _filled_store(tmp_path, checker, {0: Label.SUPPORTED, 1: Label.UNSUPPORTED})
        try:
            here_counters, there_counters = RunCounters(), RunCounters()
            here = CachingChecker(checker, store, here_counters, process_after=None)
            there = CachingChecker(checker, store, there_counters, process_after=0)
            expected = await here.look_up(CLAIMS, ANSWER)
            reader = store.process_reader()
            assert reader is not None
            await _ready(reader)
            got = await there.look_up(CLAIMS, ANSWER)
            assert reader.claims_found == 2
            assert got.keys == expected.keys
            assert got.verdicts == expected.verdicts
            assert [_label(v) for v in got.verdicts] == [Label.SUPPORTED, Label.UNSUPPORTED, None, None]
            assert there_counters.claims_cached == here_counters.claims_cached == 2
        finally:
            store.close()

    async def test_what_the_child_cannot_give_is_found_here(self, tmp_path: Path) -> None:
        """A 100 KB verdict (in its row, read by the child), one not committed yet, and a raw reply alone are hits."""
        checker = _checker()
        async with _running(tmp_path, checker, {0: Label.SUPPORTED}) as (store, reader, _):
            keys = check_keys(checker, CLAIMS, ANSWER)
            big = Verdict(label=Label.UNSUPPORTED, checker=checker.fingerprint, raw="x" * 100_000)
            store.put(keys[1], big, None, parser_version=checker.parser_version)
            store.put(keys[3], _verdict(checker, Label.UNSUPPORTED), "Unsupported", parser_version="0")
            await store.flush()
            store.put(keys[2], _verdict(checker, Label.IRRELEVANT), None, parser_version=checker.parser_version)  # not committed yet
            caching = CachingChecker(checker, store, RunCounters(), process_after=0)
            got = await caching.look_up(CLAIMS, ANSWER)
            labels = [_label(v) for v in got.verdicts]
            assert labels == [Label.SUPPORTED, Label.UNSUPPORTED, Label.IRRELEVANT, Label.UNSUPPORTED]
            assert got.verdicts[1] == big
            assert reader.claims_found == 2  # the first two; the third is in memory, the fourth a raw reply

    async def test_one_row_layout_through_the_process_equals_the_thread_path(self, tmp_path: Path) -> None:
        """Rows of the current version, of another version (raw re-parsed, or no raw: a miss) and none agree."""
        checker = _checker()
        keys = check_keys(checker, CLAIMS, ANSWER)
        results: list[list[Verdict | None]] = []
        for where, process_after in (("here", None), ("there", 0)):
            store = CacheStore(tmp_path / where, flush_interval_s=60.0)
            try:
                store.put(keys[0], _verdict(checker, Label.SUPPORTED), "supported", parser_version=checker.parser_version)
                store.put(keys[1], _verdict(checker, Label.SUPPORTED), "Unsupported", parser_version="0")
                unraw = Verdict(label=Label.SUPPORTED, checker=checker.fingerprint)
                store.put(keys[2], unraw, None, parser_version="0")
                await store.flush()
                counters = RunCounters()
                caching = CachingChecker(checker, store, counters, process_after=process_after)
                if process_after is not None:
                    reader = store.process_reader()
                    assert reader is not None
                    await _ready(reader)
                got = await caching.look_up(CLAIMS, ANSWER)
                assert got.keys == keys
                results.append(got.verdicts)
                assert counters.claims_cached == 2
                if process_after is not None:
                    assert (reader.batches, reader.claims_found) == (1, 1)
                await store.flush()  # the re-parsed verdict replaced its row: one row per key
                assert store.stats()["entries"] == 3
            finally:
                store.close()
        assert results[0] == results[1]
        assert [_label(v) for v in results[1]] == [Label.SUPPORTED, Label.UNSUPPORTED, None, None]

    async def test_process_after_delays_the_start(self, tmp_path: Path) -> None:
        """Below process_after claims looked up, no process is started."""
        checker = _checker()
        store = await _filled_store(tmp_path, checker, dict.fromkeys(range(4), Label.SUPPORTED))
        try:
            caching = CachingChecker(checker, store, RunCounters(), process_after=9)
            await caching.look_up(CLAIMS, ANSWER)  # 4 claims
            await caching.look_up(CLAIMS, ANSWER)  # 8
            assert store._process is None
            await caching.look_up(CLAIMS, ANSWER)  # 12: starts it
            assert store._process is not None
        finally:
            store.close()

    async def test_a_run_of_misses_never_starts_it(self, tmp_path: Path) -> None:
        """With fewer than half of the claims found, lookups stay in this process."""
        checker = _checker()
        store = await _filled_store(tmp_path, checker, {0: Label.SUPPORTED})  # 1 of 4 found
        try:
            caching = CachingChecker(checker, store, RunCounters(), process_after=4)
            for _ in range(5):
                await caching.look_up(CLAIMS, ANSWER)
            assert store._process is None
        finally:
            store.close()

    async def test_a_run_carried_by_whole_answers_never_starts_it(self, tmp_path: Path) -> None:
        """Claims looked up one by one under half of the claims done (the rest found whole): no process."""
        checker = _checker()
        store = await _filled_store(tmp_path, checker, dict.fromkeys(range(4), Label.SUPPORTED))
        try:
            counters = RunCounters()
            caching = CachingChecker(checker, store, counters, process_after=4)
            counters.claims_done = 100  # claims of answers found whole
            for _ in range(5):
                await caching.look_up(CLAIMS, ANSWER)  # 20 claims, all found
            assert store._process is None
            counters.claims_done = 30  # now claim lookups are the larger share
            await caching.look_up(CLAIMS, ANSWER)
            assert store._process is not None
        finally:
            store.close()


class TestFrames:
    def test_a_frame_round_trips_through_a_pipe(self) -> None:
        """A 3 MB payload (larger than a pipe's buffer) arrives whole; the end of the stream reads as None."""
        import threading

        from dahl.cache.lookup_child import read_frame, write_frame

        payload = bytes(range(256)) * 12_000
        r, w = os.pipe()
        writer = threading.Thread(target=lambda: (write_frame(w, payload), os.close(w)))
        writer.start()
        try:
            assert read_frame(r, timeout_s=10.0) == payload
            writer.join()
            assert read_frame(r, timeout_s=10.0) is None
        finally:
            os.close(r)

    def test_silence_and_an_impossible_length_raise(self) -> None:
        """No byte within the timeout raises TimeoutError; a length over 1 GiB raises ValueError."""
        from dahl.cache.lookup_child import read_frame

        r, w = os.pipe()
        try:
            with pytest.raises(TimeoutError):
                read_frame(r, timeout_s=0.05)
            os.write(w, (2**31).to_bytes(4, "big"))
            with pytest.raises(ValueError, match="out of step"):
                read_frame(r, timeout_s=1.0)
        finally:
            os.close(r)
            os.close(w)


class TestChildEnvironment:
    def test_no_api_key_reaches_the_child(self) -> None:
        """The child gets PATH, HOME, LC_*, LD_* and PYTHON*, never a key, even one named with those prefixes."""
        from dahl.cache.children import child_environment

        parent = {"PATH": "/bin", "HOME": "/root", "LC_ALL": "C.UTF-8", "PYTHONPATH": "/x", "LD_LIBRARY_PATH": "/l",
                  "OPENAI_API_KEY": "sk-secret", "DAHL_TEST_KEY": "sk-other", "AWS_SECRET_ACCESS_KEY": "s",
                  "PYTHON_OPENAI_API_KEY": "sk-a", "LC_API_KEY": "sk-b", "LD_TOKEN": "sk-c", "PYTHONAUTH": "sk-d"}
        env = child_environment(parent)
        assert env == {"PATH": "/bin", "HOME": "/root", "LC_ALL": "C.UTF-8", "PYTHONPATH": "/x", "LD_LIBRARY_PATH": "/l"}

    def test_a_package_folder_holding_the_path_separator_is_imported(self, tmp_path: Path) -> None:
        """A dahl checkout under a folder named with os.pathsep is still the one the child imports."""
        import shutil

        from dahl.cache import children

        odd = tmp_path / f"co{os.pathsep}lon"
        shutil.copytree(Path(children.__file__).resolve().parents[1], odd / "dahl",
                        ignore=shutil.ignore_patterns("__pycache__"))
        probe = odd / "dahl" / "probe_main.py"
        probe.write_text("import sys, dahl; sys.stdout.write(dahl.__file__ + '|' + '|'.join(sys.argv[1:]))\n")
        code = f"import sys; sys.path.insert(0, {str(odd)!r}); from dahl.cache import children; " \
               "p = children.spawn('dahl.probe_main', 'a', 'b'); out, _ = p.communicate(b''); print(out.decode())"
        import subprocess
        import sys

        result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
        assert result.stdout.strip() == f"{odd / 'dahl' / '__init__.py'}|a|b"


class TestChildIsolation:
    async def test_a_dahl_folder_in_the_working_folder_does_not_shadow_the_package(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The child imports the parent's dahl, not a dahl/ (or signal.py) in the working folder."""
        shadow = tmp_path / "work"
        (shadow / "dahl" / "cache").mkdir(parents=True)
        marker = tmp_path / "shadow-ran"
        for init in (shadow / "dahl" / "__init__.py", shadow / "dahl" / "cache" / "__init__.py"):
            init.write_text("")
        (shadow / "dahl" / "cache" / "lookup_process.py").write_text(
            f"open({str(marker)!r}, 'w').write('ran')\n"
        )
        (shadow / "signal.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
        monkeypatch.chdir(shadow)
        async with _running(tmp_path, _checker(), {0: Label.SUPPORTED}) as (_, reader, recipe):
            got = await reader.look_up(recipe, QUESTION, [CLAIMS[0].text])
            assert got is not None and _label(got[1][0]) is Label.SUPPORTED
        assert not marker.exists()

    def test_the_child_never_creates_a_database(self, tmp_path: Path) -> None:
        """A read-only reader of a missing database fails instead of creating an empty file."""
        import sqlite3

        from dahl.cache.database import RowReader

        rows = RowReader(tmp_path / "cache.db", read_only=True)
        with pytest.raises(sqlite3.OperationalError):
            rows.fetch_packed(["0123456789abcdef0123456789abcdef"])
        rows.close()
        assert list(tmp_path.iterdir()) == []
