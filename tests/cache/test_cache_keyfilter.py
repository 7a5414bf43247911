"""Tests for dahl.cache.keyfilter and its use by CacheStore: absent keys skip the database."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from dahl.cache import CacheStore
from dahl.cache.keyfilter import KeyFilter
from dahl.records import Label, Verdict

VERDICT = Verdict(label=Label.SUPPORTED, checker="stub/v1", raw="Supported")


def _keys(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


class TestKeyFilter:
    def test_no_false_negative(self) -> None:
        """Every key added one by one or in bulk is reported as possibly present."""
        one, bulk = _keys(5_000, 1), _keys(20_000, 2)
        f = KeyFilter(25_000)
        for key in one:
            f.add(key)
        f.add_many(bulk)
        assert all(key in f for key in one + bulk)

    def test_bulk_and_single_set_the_same_bits(self) -> None:
        """add_many is add, vectorized, through the byte-per-bit array or in place: the same filter."""
        keys = _keys(3_000, 3)
        a, b, c = KeyFilter(3_000), KeyFilter(3_000), KeyFilter(3_000)
        for key in keys:
            a.add(key)
        b.add_many(keys)
        c.add_many(keys[:1_000], dense=False)
        c.add_many(keys[1_000:], dense=False)
        assert a._array == b._array == c._array

    def test_false_positive_rate_near_three_percent(self) -> None:
        """8 bits per key and 3 positions: (1 - e^(-3/8))^3 = 3.06 % of absent keys pass."""
        f = KeyFilter(200_000)
        f.add_many(_keys(200_000, 4))
        probes = _keys(50_000, 5)
        rate = sum(key in f for key in probes) / len(probes)
        assert 0.02 < rate < 0.045

    def test_names_that_are_not_keys_are_never_ruled_out(self) -> None:
        """A name that is not 32 hex digits cannot be judged: it is reported as possibly present."""
        f = KeyFilter(10)
        f.add_many(["not-a-key", "x" * 32])
        assert "not-a-key" in f and "z" * 32 in f and "abc" in f
        assert _keys(1, 6)[0] not in f  # an empty filter rules a real key out


    def test_a_name_with_spaces_does_not_shift_the_keys_after_it(self) -> None:
        """fromhex skips whitespace: a 32-character name with spaces must not misplace later keys."""
        keys = _keys(40, 10)
        f = KeyFilter(100)
        f.add_blocks(["0123456789abcdef" + " " * 16 + "".join(keys)])
        assert all(key in f for key in keys)


class TestStoreFilter:
    async def test_foreign_names_in_the_database_leave_real_keys_found(self, tmp_path: Path) -> None:
        """Names dahl never writes (spaces, odd lengths) next to real keys: the scan still finds all of them."""
        from dahl.cache.database import RowWriter

        keys = _keys(50, 11)
        CacheStore(tmp_path / "c").close()
        odd = RowWriter(tmp_path / "c" / "cache.db")
        odd.write([("0123456789abcdef" + " " * 16, b"x")])
        with CacheStore(tmp_path / "c") as store:
            for key in keys:
                store.put(key, VERDICT, None)
        odd.write([("fedcba9876543210" + "_" * 16, b"y"), ("short", b"z")])
        odd.close()
        with CacheStore(tmp_path / "c") as store:
            store._scanner.join()
            assert store._filter is not None
            found = await store.get_many(keys)
            assert sum(entry is not None for entry in found) == 50

    async def test_absent_keys_skip_the_reader(self, tmp_path: Path) -> None:
        """Once the filter is built, a lookup of keys never stored makes no reader-thread call."""
        with CacheStore(tmp_path / "c") as store:
            store._scanner.join()
            assert await store.get_many(_keys(50, 7)) == [None] * 50
            assert store.read_batches == 0
            assert store.stats()["misses"] == 50

    async def test_keys_on_disk_before_open_are_found(self, tmp_path: Path) -> None:
        """The scan at open puts every stored key in the filter: all are found again."""
        keys = _keys(300, 8)
        with CacheStore(tmp_path / "c") as store:
            for key in keys:
                store.put(key, VERDICT, None)
        with CacheStore(tmp_path / "c") as store:
            store._scanner.join()
            found = await store.get_many(keys)
            assert all(entry is not None and entry.value == VERDICT for entry in found)
            assert store.read_batches == 1

    async def test_keys_put_while_the_scan_runs_are_found(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A key put before the filter is published is added to it when it is."""
        release = threading.Event()
        build = CacheStore._build_filter

        def slow_build(self: CacheStore, rows: object) -> None:
            release.wait(10)
            build(self, rows)  # type: ignore[arg-type]

        monkeypatch.setattr(CacheStore, "_build_filter", slow_build)
        keys = _keys(20, 9)
        with CacheStore(tmp_path / "c") as store:
            for key in keys:
                store.put(key, VERDICT, None)
            await store.flush()
            release.set()
            store._scanner.join()
            assert store._filter is not None
            found = await store.get_many(keys)
            assert all(entry is not None and entry.value == VERDICT for entry in found)
