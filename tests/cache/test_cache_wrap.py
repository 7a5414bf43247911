"""Tests for dahl.cache._wrap and the store's single flight: counting, single flight, caching rules."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

from dahl.adapters._base import Checker, Splitter
from dahl.adapters._fake import FakeChecker
from dahl.cache import CacheStore, CachingChecker, CachingSplitter, SingleFlight, check_key
from dahl.cache._wrap import Lookup
from dahl.results._counters import RunCounters
from dahl.errors import OutputParseError, TransientAPIError
from dahl.records import Answer, Claim, Label, Verdict

ANSWER = Answer(id="a1", question="Who was Ada Lovelace?", response="Ada was a mathematician. She was born in 1815.")


class StubChecker:
    """Labels 'true' claims supported; fails claims containing 'fail'; counts calls."""

    fingerprint = "stubcheck/v1"
    cacheable = True

    def __init__(self, *, delay_s: float = 0.0, parser_version: str = "1") -> None:
        self.delay_s = delay_s
        self.parser_version = parser_version
        self.calls = 0
        self.parsed = 0

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        self.calls += 1
        if self.delay_s:
            await anyio.sleep(self.delay_s)
        if "fail" in claim.text:
            raise TransientAPIError("boom")
        if "garbled" in claim.text:
            return Verdict(label=Label.ERROR, checker=self.fingerprint, error="OutputParseError: x")
        label = Label.SUPPORTED if "true" in claim.text else Label.UNSUPPORTED
        return Verdict(label=label, checker=self.fingerprint, raw=f"Answer: {label}")

    def parse_raw(self, raw: str) -> Verdict:
        self.parsed += 1
        if not raw.startswith("Answer: "):
            raise OutputParseError("no label", raw=raw)
        # "version 2" of the parser reads every stored label as unknown, so a re-parse is visible
        return Verdict(label=Label.UNKNOWN, checker=self.fingerprint, raw=raw)


async def _missed_lookup(store: CacheStore) -> tuple[RunCounters, StubChecker, CachingChecker, Claim, Lookup]:
    """A fresh wrapper and the lookup of one claim it has never seen (a miss)."""
    counters = RunCounters()
    inner = StubChecker()
    wrapped = CachingChecker(inner, store, counters)
    claim = Claim(text="claim true", index=0)
    return counters, inner, wrapped, claim, await wrapped.look_up([claim], ANSWER)


class StubSplitter:
    """Splits on '. '; raises for responses containing 'fail'; counts calls."""

    fingerprint = "stubsplit/v1"
    cacheable = True

    def __init__(self, *, delay_s: float = 0.0, parser_version: str = "1") -> None:
        self.delay_s = delay_s
        self.parser_version = parser_version
        self.calls = 0
        self.parsed = 0

    async def split(self, answer: Answer) -> list[Claim]:
        claims, _ = await self.split_with_raw(answer)
        return claims

    async def split_with_raw(self, answer: Answer) -> tuple[list[Claim], str]:
        self.calls += 1
        if self.delay_s:
            await anyio.sleep(self.delay_s)
        if "fail" in answer.response:
            raise TransientAPIError("boom")
        raw = "\n".join(part.strip(".") for part in answer.response.split(". "))
        return self.parse_lines(raw), raw

    def parse_lines(self, raw: str) -> list[Claim]:
        return [Claim(text=line, index=i) for i, line in enumerate(raw.splitlines())]

    def parse_raw(self, raw: str, answer: Answer) -> list[Claim]:
        self.parsed += 1
        return [Claim(text=c.text.upper(), index=c.index) for c in self.parse_lines(raw)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CacheStore]:
    """A store in a fresh directory, closed after the test."""
    s = CacheStore(tmp_path / "cache")
    yield s
    s.close()


def _claims_with_duplicates() -> list[Claim]:
    """100 claims: 90 distinct texts, then the first 10 texts again."""
    texts = [f"claim {i} is true" if i % 3 else f"claim {i} is odd" for i in range(90)]
    texts += texts[:10]
    return [Claim(text=t, index=i) for i, t in enumerate(texts)]


async def _check_all(checker: CachingChecker, claims: list[Claim]) -> list[Verdict]:
    out: list[Verdict | None] = [None] * len(claims)

    async def one(i: int) -> None:
        out[i] = await checker.check(claims[i], ANSWER)

    async with anyio.create_task_group() as tg:
        for i in range(len(claims)):
            tg.start_soon(one, i)
    return [v for v in out if v is not None]


class TestCachingChecker:
    async def test_protocol(self, store: CacheStore) -> None:
        """The wrapper is a Checker with the inner fingerprint."""
        wrapped = CachingChecker(StubChecker(), store, RunCounters())
        assert isinstance(wrapped, Checker)
        assert wrapped.fingerprint == "stubcheck/v1"

    async def test_dedupe_then_cache(self, tmp_path: Path) -> None:
        """100 concurrent claims with 10 duplicates: 90 calls, 10 deduped; a rerun: 0 calls, 100 cached."""
        claims = _claims_with_duplicates()
        inner = StubChecker(delay_s=0.02)
        counters = RunCounters()
        with CacheStore(tmp_path / "c") as store:
            first = await _check_all(CachingChecker(inner, store, counters), claims)
        assert inner.calls == 90
        assert (counters.claims_checked, counters.claims_deduped, counters.claims_cached) == (90, 10, 0)

        rerun = RunCounters()
        with CacheStore(tmp_path / "c") as store:
            second = await _check_all(CachingChecker(inner, store, rerun), claims)
        assert inner.calls == 90
        assert (rerun.claims_checked, rerun.claims_deduped, rerun.claims_cached) == (0, 0, 100)
        assert second == first  # a cached verdict equals the original (msgspec round trip)

    async def test_sequential_repeat_is_cached(self, store: CacheStore) -> None:
        """A claim checked again after its first check ended is a cache hit, even before a flush."""
        inner = StubChecker()
        counters = RunCounters()
        wrapped = CachingChecker(inner, store, counters)
        claim = Claim(text="Ada is true", index=0)
        v1 = await wrapped.check(claim, ANSWER)
        v2 = await wrapped.check(Claim(text=" Ada  is true ", index=5), ANSWER)
        assert v1 == v2
        assert inner.calls == 1
        assert (counters.claims_checked, counters.claims_cached) == (1, 1)

    async def test_exceptions_never_cached(self, store: CacheStore) -> None:
        """A failing call raises each time and calls the inner Checker each time."""
        inner = StubChecker()
        wrapped = CachingChecker(inner, store, RunCounters())
        claim = Claim(text="this will fail", index=0)
        for _ in range(2):
            with pytest.raises(TransientAPIError):
                await wrapped.check(claim, ANSWER)
            await store.flush()
        assert inner.calls == 2
        assert store.stats()["entries"] == 0

    async def test_error_verdicts_never_cached(self, store: CacheStore) -> None:
        """A verdict labelled error is returned but not stored; the next check calls again."""
        inner = StubChecker()
        wrapped = CachingChecker(inner, store, RunCounters())
        claim = Claim(text="garbled reply", index=0)
        assert (await wrapped.check(claim, ANSWER)).label is Label.ERROR
        await store.flush()
        assert (await wrapped.check(claim, ANSWER)).label is Label.ERROR
        assert inner.calls == 2
        assert store.stats()["entries"] == 0

    async def test_exception_reaches_every_waiter(self, store: CacheStore) -> None:
        """Three concurrent checks of one failing claim: one call, three TransientAPIErrors."""
        inner = StubChecker(delay_s=0.02)
        counters = RunCounters()
        wrapped = CachingChecker(inner, store, counters)
        claim = Claim(text="this will fail", index=0)
        errors: list[BaseException] = []

        async def one() -> None:
            try:
                await wrapped.check(claim, ANSWER)
            except TransientAPIError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
        assert len(errors) == 3 and inner.calls == 1
        assert (counters.claims_checked, counters.claims_deduped) == (1, 2)
        assert wrapped.in_flight == 0

    async def test_parser_change_reparses_raw(self, tmp_path: Path) -> None:
        """A new parser_version re-parses the stored raw reply: parse_raw called, check not."""
        claim = Claim(text="Ada is true", index=0)
        with CacheStore(tmp_path / "c") as store:
            first = StubChecker(parser_version="1")
            assert (await CachingChecker(first, store, RunCounters()).check(claim, ANSWER)).label is Label.SUPPORTED
        second = StubChecker(parser_version="2")
        counters = RunCounters()
        with CacheStore(tmp_path / "c") as store:
            verdict = await CachingChecker(second, store, counters).check(claim, ANSWER)
            await store.flush()
            entries = store.stats()["entries"]
        assert verdict == Verdict(label=Label.UNKNOWN, checker="stubcheck/v1", raw="Answer: supported")
        assert (second.calls, second.parsed) == (0, 1)
        assert (counters.claims_checked, counters.claims_cached) == (0, 1)
        assert entries == 1  # one row: the v2 value replaced v1's, with the same raw reply

    async def test_second_parser_change_reparses_again(self, tmp_path: Path) -> None:
        """The re-parsed row keeps its raw reply: parser 3 after 2 after 1 re-parses again, never calls."""
        claim = Claim(text="Ada is true", index=0)
        with CacheStore(tmp_path / "c") as store:
            await CachingChecker(StubChecker(parser_version="1"), store, RunCounters()).check(claim, ANSWER)
        for version in ("2", "3"):
            inner, counters = StubChecker(parser_version=version), RunCounters()
            with CacheStore(tmp_path / "c") as store:
                verdict = await CachingChecker(inner, store, counters).check(claim, ANSWER)
                await store.flush()
                assert store.stats()["entries"] == 1
            assert verdict == Verdict(label=Label.UNKNOWN, checker="stubcheck/v1", raw="Answer: supported")
            assert (inner.calls, inner.parsed, counters.claims_cached) == (0, 1, 1)
        with CacheStore(tmp_path / "c") as store:  # parser 3's value is stored: a plain hit now
            again = StubChecker(parser_version="3")
            assert (await CachingChecker(again, store, RunCounters()).check(claim, ANSWER)) == verdict
            assert (again.calls, again.parsed) == (0, 0)

    async def test_reparse_without_raw_in_verdict_keeps_the_raw(self, tmp_path: Path) -> None:
        """A parser whose Verdict drops the raw reply still leaves it in the row for the next change."""

        class Dropping(StubChecker):
            def parse_raw(self, raw: str) -> Verdict:
                return msgspec.structs.replace(super().parse_raw(raw), raw=None)

        claim = Claim(text="Ada is true", index=0)
        with CacheStore(tmp_path / "c") as store:
            await CachingChecker(StubChecker(parser_version="1"), store, RunCounters()).check(claim, ANSWER)
        for version in ("2", "3"):
            inner = Dropping(parser_version=version)
            with CacheStore(tmp_path / "c") as store:
                verdict = await CachingChecker(inner, store, RunCounters()).check(claim, ANSWER)
            assert verdict == Verdict(label=Label.UNKNOWN, checker="stubcheck/v1")
            assert (inner.calls, inner.parsed) == (0, 1)

    async def test_one_row_per_checked_claim(self, store: CacheStore) -> None:
        """20 distinct claims checked and stored (verdict and raw reply each) are 20 rows."""
        wrapped = CachingChecker(StubChecker(), store, RunCounters())
        for i in range(20):
            await wrapped.check(Claim(text=f"claim {i} true", index=i), ANSWER)
        await store.flush()
        assert store.stats()["entries"] == 20

    async def test_uncacheable_bypasses_store(self, store: CacheStore) -> None:
        """A Checker with cacheable = False is called directly: no store, no single flight."""
        counters = RunCounters()
        wrapped = CachingChecker(FakeChecker(latency_s=0.02), store, counters)
        claim = Claim(text="Ada was a mathematician.", index=0)
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(wrapped.check, claim, ANSWER)
        await wrapped.check(claim, ANSWER)
        await store.flush()
        assert (counters.claims_checked, counters.claims_deduped, counters.claims_cached) == (5, 0, 0)
        assert store.stats()["entries"] == 0 and store.read_batches == 0

    async def test_no_store(self) -> None:
        """store=None: every distinct sequential check calls the inner Checker."""
        inner = StubChecker()
        wrapped = CachingChecker(inner, None, RunCounters())
        claim = Claim(text="Ada is true", index=0)
        await wrapped.check(claim, ANSWER)
        await wrapped.check(claim, ANSWER)
        assert inner.calls == 2

    async def test_owner_cancelled_waiters_retry(self, store: CacheStore) -> None:
        """If the call's owner is cancelled, its waiters do not hang: one retries the call."""
        inner = StubChecker(delay_s=0.05)
        counters = RunCounters()
        wrapped = CachingChecker(inner, store, counters)
        claim = Claim(text="Ada is true", index=0)
        owner = asyncio.ensure_future(wrapped.check(claim, ANSWER))
        await asyncio.sleep(0.01)
        waiters = [asyncio.ensure_future(wrapped.check(claim, ANSWER)) for _ in range(2)]
        await asyncio.sleep(0.01)
        owner.cancel()
        with anyio.fail_after(2):
            verdicts = [await w for w in waiters]
        with pytest.raises(asyncio.CancelledError):
            await owner
        assert [v.label for v in verdicts] == [Label.SUPPORTED, Label.SUPPORTED]
        assert inner.calls == 2  # the cancelled call and the retry
        assert counters.claims_deduped == 1  # the second waiter shared the retry
        assert wrapped.in_flight == 0

    async def test_waiter_cancelled_owner_continues(self, store: CacheStore) -> None:
        """Cancelling a waiter leaves the shared call running for its owner."""
        inner = StubChecker(delay_s=0.03)
        wrapped = CachingChecker(inner, store, RunCounters())
        claim = Claim(text="Ada is true", index=0)
        owner = asyncio.ensure_future(wrapped.check(claim, ANSWER))
        await asyncio.sleep(0.005)
        waiter = asyncio.ensure_future(wrapped.check(claim, ANSWER))
        await asyncio.sleep(0.005)
        waiter.cancel()
        assert (await owner).label is Label.SUPPORTED
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert inner.calls == 1 and wrapped.in_flight == 0


class TestCachingSplitter:
    async def test_protocol_and_cache(self, tmp_path: Path) -> None:
        """A second run's split comes from the store, equal to the first, without a call."""
        inner = StubSplitter()
        with CacheStore(tmp_path / "c") as store:
            wrapped = CachingSplitter(inner, store, RunCounters())
            assert isinstance(wrapped, Splitter)
            first = await wrapped.split(ANSWER)
        with CacheStore(tmp_path / "c") as store:
            again = CachingSplitter(inner, store, RunCounters())
            second = await again.split(ANSWER)
        assert first == second == [
            Claim(text="Ada was a mathematician", index=0),
            Claim(text="She was born in 1815", index=1),
        ]
        assert inner.calls == 1
        assert (again.splits_called, again.splits_cached) == (0, 1)

    async def test_callers_get_own_lists(self, store: CacheStore) -> None:
        """Concurrent identical splits share one call, and each caller gets its own list."""
        inner = StubSplitter(delay_s=0.02)
        wrapped = CachingSplitter(inner, store, RunCounters())
        results: list[list[Claim]] = []

        async def one() -> None:
            results.append(await wrapped.split(ANSWER))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(one)
        assert inner.calls == 1 and wrapped.splits_deduped == 2
        results[0].clear()
        assert len(results[1]) == 2 and len(await wrapped.split(ANSWER)) == 2

    async def test_failures_never_cached(self, store: CacheStore) -> None:
        """A failed split raises each time and is never stored."""
        inner = StubSplitter()
        wrapped = CachingSplitter(inner, store, RunCounters())
        failing = Answer(id="x", question="Q?", response="This will fail.")
        for _ in range(2):
            with pytest.raises(TransientAPIError):
                await wrapped.split(failing)
        await store.flush()
        assert inner.calls == 2 and store.stats()["entries"] == 0

    async def test_parser_change_reparses_raw(self, tmp_path: Path) -> None:
        """A new parser_version re-parses the stored raw split reply without a call."""
        with CacheStore(tmp_path / "c") as store:
            await CachingSplitter(StubSplitter(), store, RunCounters()).split(ANSWER)
        second = StubSplitter(parser_version="2")
        with CacheStore(tmp_path / "c") as store:
            claims = await CachingSplitter(second, store, RunCounters()).split(ANSWER)
        assert [c.text for c in claims] == ["ADA WAS A MATHEMATICIAN", "SHE WAS BORN IN 1815"]
        assert (second.calls, second.parsed) == (0, 1)


    async def test_second_parser_change_reparses_again(self, tmp_path: Path) -> None:
        """The re-parsed split keeps its raw reply: parsers 2 then 3 re-parse it without a call."""
        with CacheStore(tmp_path / "c") as store:
            await CachingSplitter(StubSplitter(), store, RunCounters()).split(ANSWER)
        for version in ("2", "3"):
            inner = StubSplitter(parser_version=version)
            with CacheStore(tmp_path / "c") as store:
                wrapped = CachingSplitter(inner, store, RunCounters())
                claims = await wrapped.split(ANSWER)
                await store.flush()
                assert store.stats()["entries"] == 1
            assert [c.text for c in claims] == ["ADA WAS A MATHEMATICIAN", "SHE WAS BORN IN 1815"]
            assert (inner.calls, inner.parsed, wrapped.splits_cached) == (0, 1, 1)


class TestSingleFlight:
    async def test_map_does_not_grow(self) -> None:
        """After 50 distinct calls the in-flight map is empty."""
        flights: SingleFlight[int] = SingleFlight()

        async def work() -> int:
            await anyio.sleep(0)
            return 1

        shared: list[int] = []
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(flights.run, str(i), work, lambda: shared.append(1))
        assert len(flights) == 0 and shared == []

    async def test_unawaited_failure_not_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        """A failure nobody else waited on raises in its owner and logs nothing."""
        flights: SingleFlight[int] = SingleFlight()

        async def work() -> int:
            raise TransientAPIError("boom")

        with pytest.raises(TransientAPIError):
            await flights.run("k", work, lambda: None)
        assert caplog.records == []


class TestLookUp:
    async def test_found_and_missing(self, store: CacheStore) -> None:
        """look_up returns the stored verdicts, None for the rest, and counts only the found ones."""
        counters = RunCounters()
        inner = StubChecker()
        wrapped = CachingChecker(inner, store, counters)
        claims = [Claim(text=f"claim {i} true", index=i) for i in range(4)]
        for claim in claims[:2]:
            await wrapped.check(claim, ANSWER)
        await store.flush()
        found = await wrapped.look_up(claims, ANSWER)
        assert [v is not None for v in found.verdicts] == [True, True, False, False]
        assert found.keys == [check_key(inner, c, ANSWER) for c in claims]
        assert (counters.claims_cached, counters.claims_checked) == (2, 2)

    async def test_check_missed_skips_the_disk_when_nothing_was_written(self, store: CacheStore) -> None:
        """A claim the lookup missed is checked without a second read while nothing was written since."""
        _, inner, wrapped, claim, found = await _missed_lookup(store)
        reads = store.read_batches
        verdict = await wrapped.check_missed(claim, ANSWER, found.keys[0], found.generation)
        assert verdict.label is Label.SUPPORTED and inner.calls == 1
        assert store.read_batches == reads

    async def test_check_missed_finds_a_value_written_meanwhile(self, store: CacheStore) -> None:
        """If the same claim was checked and committed after the lookup, check_missed reuses it."""
        counters, inner, wrapped, claim, found = await _missed_lookup(store)
        await wrapped.check(claim, ANSWER)  # another answer's identical claim, checked and stored
        await store.flush()
        verdict = await wrapped.check_missed(claim, ANSWER, found.keys[0], found.generation)
        assert verdict.label is Label.SUPPORTED
        assert inner.calls == 1 and counters.claims_cached == 1

    async def test_reparses_a_stored_raw_reply(self, tmp_path: Path) -> None:
        """A lookup after a parser change re-parses the raw reply instead of missing."""
        claim = Claim(text="claim true", index=0)
        with CacheStore(tmp_path / "c") as s:
            await CachingChecker(StubChecker(parser_version="1"), s, RunCounters()).check(claim, ANSWER)
        second = StubChecker(parser_version="2")
        with CacheStore(tmp_path / "c") as s:
            found = await CachingChecker(second, s, RunCounters()).look_up([claim], ANSWER)
        assert found.verdicts[0] == Verdict(label=Label.UNKNOWN, checker="stubcheck/v1", raw="Answer: supported")
        assert (second.calls, second.parsed) == (0, 1)
