"""The streaming scheduler: read -> preprocess/split -> check -> assemble -> write.

One anyio task group holds every task. Stages are joined by bounded memory
object streams, and each stage is a fixed pool of workers, so memory is
O(workers + queue sizes) whatever the input size (DESIGN.md §1):

    reader (thread, batches) [--batches--> whole-answer workers] --answers--> split workers
        [--split--> lookup workers] --claims--> check workers --results--> writer (thread,
        batches of <= flush_items or flush_interval_s)

With a whole-answer cache (:class:`WholeAnswers`), each batch the reader reads is looked
up at once; an answer found whole goes straight to the results, the others go on to
splitting, and each answer finished without an error is stored whole for next time.
A source may also yield the finished lines of answers it found whole itself
(:class:`~dahl.engine.results.FoundLine`, see :mod:`dahl.cache.whole_input`): they go
straight to the writer, and the answers it looked up and did not find skip the lookup.

With a cache (a Checker offering ``look_up``, i.e. :class:`dahl.cache.CachingChecker`
with a store), lookup workers look all claims of an answer up in one batched read;
found verdicts never become per-claim jobs, so a re-score of cached claims costs a
key and a share of one read per claim. Claims not found go on to the check workers.

An answer's result is emitted as soon as its last claim has a verdict. Blocking
work (reading and hashing input, preprocessing and rule splitting, file writes)
runs in worker threads; the event loop only moves records.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.lowlevel

from dahl.adapters.base import Checker, Coverer, Splitter
from dahl.engine.channel import Channel, EndOfChannel
from dahl.engine.counters import RunCounters
from dahl.engine.output import AnswerLog
from dahl.errors import AdapterError, DahlError, FatalAPIError, QuotaExhausted
from dahl.engine.results import EncodedResult, FoundAnswer, FoundLine, build_result, result_of_found
from dahl.preprocess import preprocess
from dahl.records import Answer, AnswerResult, Claim, Label, Verdict

__all__ = ["PipelineOptions", "QueuedAnswer", "WholeAnswers", "run_pipeline"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PipelineOptions:
    """Sizes and scoring parameters of one pipeline run.

    Attributes:
        split_concurrency: split workers (answers being split at once).
        check_concurrency: check workers (claims being checked at once).
        lookup_concurrency: lookup workers (answers whose claims are being looked up in
            the cache at once; their reads share reader-thread calls).
        queue_size: items buffered between two stages.
        read_batch: answers the reader thread takes per hop.
        flush_items: results per write batch.
        flush_interval_s: longest a finished result waits before being written, seconds.
        preprocess: apply DAHL step 0 before splitting (off for pre-split input).
        gamma: FActScore length-penalty γ (0 disables).
        k: K of F1@K.
        max_response_chars: longer responses are not split (status ``error``): rule-based
            sentence segmentation is quadratic in text length (~3 s at 50,000 characters),
            and no long-form answer worth scoring is that long.
        cover_concurrency: cover workers (answers whose coverage is being judged at once),
            used with a ``coverer`` only.
    """

    split_concurrency: int = 2
    check_concurrency: int = 8
    lookup_concurrency: int = 128
    queue_size: int = 256
    read_batch: int = 256
    flush_items: int = 500
    flush_interval_s: float = 0.25
    preprocess: bool = True
    gamma: float = 10.0
    k: int = 64
    max_response_chars: int = 50_000
    cover_concurrency: int = 64

    def __post_init__(self) -> None:
        for name in ("split_concurrency", "check_concurrency", "lookup_concurrency", "queue_size", "read_batch",
                     "flush_items", "cover_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.flush_interval_s <= 0:
            raise ValueError("flush_interval_s must be > 0 seconds")


@dataclass(frozen=True)
class QueuedAnswer:
    """An input answer with its resume key (computed by the reader thread).

    Attributes:
        answer: the answer (preprocessed, once the split stage has run).
        input_hash: its resume key.
        whole_key: its key in the whole-answer cache (:class:`WholeAnswers`), once looked up
            there and not found (the whole-answer workers skip it).
    """

    answer: Answer
    input_hash: str
    whole_key: str | None = None


class WholeAnswers(Protocol):
    """Finished answers in the cache (:class:`dahl.cache.answers.AnswerCache`).

    An answer found there skips preprocessing, splitting and checking; its line is
    the stored claims' JSON spliced into the answer's fields (status and metrics are
    recomputed from the label counts).
    """

    async def look_up(self, items: Sequence[tuple[Answer, str]]) -> tuple[list[str | None], list[FoundAnswer | None]]:
        """Keys of the (answer, input hash) ``items`` (None: not cacheable) and what is stored."""
        ...

    def keep(self, key: str, result: AnswerResult, cleaned: bool) -> None:
        """Store an answer's finished result (``cleaned``: preprocessing changed its response)."""
        ...


class _Pending:
    """An answer whose claims are being checked (lives only on the event loop)."""

    __slots__ = ("item", "claims", "verdicts", "remaining", "keys", "generation", "cleaned")

    def __init__(self, item: QueuedAnswer, claims: list[Claim], cleaned: bool) -> None:
        self.item = item
        self.cleaned = cleaned  # preprocessing changed the response
        self.claims = claims
        self.verdicts: list[Verdict | None] = [None] * len(claims)
        self.remaining = len(claims)
        self.keys: list[str] | None = None  # cache keys, once looked up
        self.generation = 0  # the cache's write generation at the lookup


#: An answer's claims to check: the answer and the indices of its claims without a verdict.
_ClaimJob = tuple[_Pending, Sequence[int]]


def _next_batch(source: Iterator[QueuedAnswer | FoundLine], size: int) -> list[QueuedAnswer | FoundLine]:
    batch: list[QueuedAnswer | FoundLine] = []
    for item in source:
        batch.append(item)
        if len(batch) >= size:
            break
    return batch


def _prepare(answer: Answer) -> tuple[Answer, bool]:
    """Preprocess (DAHL step 0) and return the cleaned answer and its abstained flag."""
    pre = preprocess(answer.question, answer.response)
    if pre.text == answer.response:
        return answer, pre.abstained
    cleaned = Answer(
        id=answer.id,
        question=answer.question,
        response=pre.text,
        model=answer.model,
        category=answer.category,
        claims=answer.claims,
        abstained=answer.abstained,
        meta=answer.meta,
    )
    return cleaned, pre.abstained


#: Workers looking whole answers up (each holds one batch of ``read_batch`` answers).
_WHOLE_WORKERS = 2


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def run_pipeline(
    source: Iterator[QueuedAnswer | FoundLine],
    splitter: Splitter,
    checker: Checker,
    log_file: AnswerLog,
    *,
    options: PipelineOptions,
    counters: RunCounters,
    on_result: Callable[[AnswerResult], None] | None = None,
    whole: WholeAnswers | None = None,
    coverer: Coverer | None = None,
) -> None:
    """Stream every answer of ``source`` through split and check into ``log_file``.

    Args:
        source: answers still to score, and lines of answers it found whole
            (:class:`~dahl.engine.results.FoundLine`, written as they are); a blocking
            iterator, read in a thread.
        splitter: turns each answer into claims.
        checker: gives each claim a verdict.
        log_file: an open :class:`AnswerLog`; results are appended in batches.
        options: concurrency, queue sizes and scoring parameters.
        counters: updated as work progresses (read by the progress bar).
        on_result: called on the event loop for every written result.
        whole: the whole-answer cache: answers found there skip splitting and checking
            (counted in ``answers_cached`` and ``claims_cached``), and answers finished
            here without an error are stored in it.
        coverer: adds recall: every finished result goes through ``coverer.cover`` in
            ``options.cover_concurrency`` cover workers before the writer. Not with ``whole``.

    Raises:
        ValueError: both ``whole`` and ``coverer`` given (a whole answer has no recall).
        QuotaExhausted: the API quota ran out; results finished before are written.
        FatalAPIError: the endpoint cannot work (bad key, unreachable, breaker tripped);
            results finished before are written, and a re-run continues.
    """
    if coverer is not None and whole is not None:
        raise ValueError("the whole-answer cache cannot be used with a coverer")
    look_up = getattr(checker, "look_up", None) if getattr(checker, "can_look_up", False) else None
    check_missed = getattr(checker, "check_missed", None)
    lookup_workers = options.lookup_concurrency if look_up is not None else 0
    answers: Channel[QueuedAnswer] = Channel(options.queue_size)
    split: Channel[_Pending] = Channel(options.queue_size)
    # Claims travel to the check workers an answer at a time (one channel item per answer,
    # not per claim): with many producers on a full channel, per-claim sends made every
    # claim a blocked, woken and often re-blocked sender.
    claims: Channel[_ClaimJob] = Channel(max(1, options.queue_size // 4))
    ready: collections.deque[tuple[_Pending, int]] = collections.deque()  # claims taken from `claims`
    results: Channel[AnswerResult | EncodedResult | FoundLine] = Channel(options.queue_size)
    batches: Channel[list[QueuedAnswer]] = Channel(_WHOLE_WORKERS)
    whole_workers = _WHOLE_WORKERS if whole is not None else 0
    gamma, k = options.gamma, options.k
    # Every producer is counted before any task runs, so no channel ends early.
    answers.open_sender()  # the reader: answers not to look up whole
    results.open_sender()  # the reader: lines encoded by the source (FoundLine)
    if whole_workers:
        batches.open_sender()
        for _ in range(whole_workers):
            answers.open_sender()
            results.open_sender()
    for _ in range(options.split_concurrency):
        (split if lookup_workers else claims).open_sender()
        results.open_sender()
    for _ in range(lookup_workers):
        claims.open_sender()
        results.open_sender()
    for _ in range(options.check_concurrency):
        results.open_sender()
    # Interim cover stage (part S's stage-based pipeline replaces it): results -> cover
    # workers -> covered -> writer.
    cover_workers = options.cover_concurrency if coverer is not None else 0
    covered: Channel[AnswerResult | EncodedResult | FoundLine] = (
        Channel(options.queue_size) if cover_workers else results)
    for _ in range(cover_workers):
        covered.open_sender()

    async def read() -> None:
        try:
            while True:
                batch = await anyio.to_thread.run_sync(_next_batch, source, options.read_batch)
                if not batch:
                    return
                counters.answers_read += len(batch)
                to_look_up: list[QueuedAnswer] = []
                for item in batch:
                    if isinstance(item, FoundLine):  # found whole by the source
                        counters.answers_cached += 1
                        counters.claims_cached += item.claims
                        counters.claims_done += item.claims
                        await results.send(item)
                    elif whole_workers and item.whole_key is None:
                        to_look_up.append(item)
                    else:  # no whole-answer cache, or the source looked it up already
                        await answers.send(item)
                if to_look_up:
                    await batches.send(to_look_up)
        finally:
            answers.close_sender()
            results.close_sender()
            if whole_workers:
                batches.close_sender()

    async def whole_worker() -> None:
        """Answer whole answers from the cache; pass the others on to splitting."""
        assert whole is not None
        try:
            async for batch in batches:
                keys, found = await whole.look_up([(item.answer, item.input_hash) for item in batch])
                for item, key, got in zip(batch, keys, found, strict=True):
                    if got is None:
                        await answers.send(item if key is None else dataclasses.replace(item, whole_key=key))
                        continue
                    n = sum(got.counts)
                    counters.answers_cached += 1
                    counters.claims_cached += n
                    counters.claims_done += n
                    await results.send(result_of_found(item.answer, item.input_hash, got, gamma=gamma, k=k))
        finally:
            answers.close_sender()
            results.close_sender()

    def finished(pending: _Pending) -> AnswerResult:
        """The result of an answer whose claims all have verdicts; kept whole if error-free."""
        verdicts = [v for v in pending.verdicts if v is not None]
        item = pending.item
        result = build_result(item.answer, item.input_hash, pending.claims, verdicts, gamma=gamma, k=k)
        if item.whole_key is not None and whole is not None:  # keep() refuses errors
            whole.keep(item.whole_key, result, pending.cleaned)
        return result

    async def split_worker() -> None:
        try:
            async for item in answers:
                answer = item.answer
                abstained = answer.abstained
                if len(answer.response) > options.max_response_chars:
                    too_long = f"response of {len(answer.response):,} characters exceeds the limit of " \
                        f"{options.max_response_chars:,}"
                    counters.errors["ResponseTooLong"] += 1
                    await results.send(build_result(answer, item.input_hash, [], [], gamma=gamma, k=k, split_error=too_long))
                    continue
                if options.preprocess and not abstained:
                    answer, abstained = await anyio.to_thread.run_sync(_prepare, answer)
                if abstained:
                    await results.send(build_result(item.answer, item.input_hash, [], [], gamma=gamma, k=k, abstained=True))
                    continue
                try:
                    parts = await splitter.split(answer)
                except (QuotaExhausted, FatalAPIError) as exc:  # the run stops; finished results are kept
                    stop(exc)
                    return
                except AdapterError as exc:
                    counters.errors[type(exc).__name__] += 1
                    await results.send(
                        build_result(item.answer, item.input_hash, [], [], gamma=gamma, k=k, split_error=_error_text(exc))
                    )
                    continue
                if not parts:
                    await results.send(build_result(item.answer, item.input_hash, [], [], gamma=gamma, k=k))
                    continue
                pending = _Pending(QueuedAnswer(answer, item.input_hash, item.whole_key), parts, answer is not item.answer)
                counters.claims_queued += len(parts)
                if lookup_workers:
                    await split.send(pending)
                    continue
                await claims.send((pending, range(len(parts))))
        finally:
            (split if lookup_workers else claims).close_sender()
            results.close_sender()

    async def lookup_worker() -> None:
        assert look_up is not None
        try:
            async for pending in split:
                found = await look_up(pending.claims, pending.item.answer)
                pending.keys = found.keys
                pending.generation = found.generation
                missing: list[int] = []
                for i, verdict in enumerate(found.verdicts):
                    if verdict is None:
                        missing.append(i)
                    else:
                        pending.verdicts[i] = verdict
                hits = len(pending.claims) - len(missing)
                counters.claims_done += hits
                pending.remaining -= hits
                if not missing:
                    await results.send(finished(pending))
                    continue
                await claims.send((pending, missing))
        finally:
            claims.close_sender()
            results.close_sender()

    async def next_claim() -> tuple[_Pending, int] | None:
        """The next claim to check, taking an answer's claims from ``claims`` when none is ready."""
        while not ready:
            try:
                pending, indices = await claims.receive()
            except EndOfChannel:
                break
            ready.extend((pending, i) for i in indices)
        return ready.popleft() if ready else None

    async def check_worker() -> None:
        try:
            while (job := await next_claim()) is not None:
                pending, i = job
                claim = pending.claims[i]
                counters.checks_in_flight += 1
                try:
                    if pending.keys is not None and check_missed is not None:
                        verdict = await check_missed(claim, pending.item.answer, pending.keys[i], pending.generation)
                    else:
                        verdict = await checker.check(claim, pending.item.answer)
                except (QuotaExhausted, FatalAPIError) as exc:  # the run stops; finished results are kept
                    stop(exc)
                    return
                except AdapterError as exc:
                    verdict = Verdict(label=Label.ERROR, checker=checker.fingerprint, error=_error_text(exc))
                finally:
                    counters.checks_in_flight -= 1
                if verdict.label is Label.ERROR:
                    counters.claims_failed += 1
                    # Raised or returned (an unparseable reply), the class leads the error text.
                    counters.errors[(verdict.error or "error").split(":", 1)[0]] += 1
                counters.claims_done += 1
                pending.verdicts[i] = verdict
                pending.remaining -= 1
                if pending.remaining == 0:
                    await results.send(finished(pending))
        finally:
            results.close_sender()

    async def cover_worker() -> None:
        assert coverer is not None
        try:
            async for item in results:
                if isinstance(item, AnswerResult):
                    try:
                        item = await coverer.cover(item)
                    except (QuotaExhausted, FatalAPIError) as exc:  # the run stops; finished results are kept
                        stop(exc)
                        return
                await covered.send(item)
        finally:
            covered.close_sender()

    async def write() -> None:
        batch: list[AnswerResult | EncodedResult | FoundLine] = []

        def record(batch: list[AnswerResult | EncodedResult | FoundLine]) -> None:
            for r in batch:
                counters.answers_done += 1
                counters.status[str(r.status)] += 1
                if on_result is not None:
                    on_result(r if isinstance(r, AnswerResult) else r.decoded())

        async def flush() -> None:
            # Cancelled before the thread starts, the batch is still held and the finally
            # below writes it; once written it is let go before record(), which may raise.
            nonlocal batch
            await anyio.to_thread.run_sync(log_file.append, batch)
            out, batch = batch, []
            record(out)

        try:
            while True:
                with anyio.move_on_after(options.flush_interval_s):
                    while len(batch) < options.flush_items:
                        try:
                            batch.append(await covered.receive())
                        except EndOfChannel:
                            if batch:
                                await flush()
                            return
                if batch:
                    await flush()
        finally:
            if batch:  # cancelled (Ctrl-C, quota): keep what was finished
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(log_file.append, batch)
                    record(batch)

    fatal: list[BaseException] = []

    def stop(exc: BaseException) -> None:
        """Stop every stage (the writer flushes what it has) and re-raise ``exc`` after."""
        if not fatal:
            fatal.append(exc)
        tg.cancel_scope.cancel()

    try:
        async with anyio.create_task_group() as tg:
            workers = [read, *[whole_worker] * whole_workers, *[split_worker] * options.split_concurrency,
                       *[lookup_worker] * lookup_workers, *[check_worker] * options.check_concurrency,
                       *[cover_worker] * cover_workers, write]
            for n, worker in enumerate(workers, 1):
                tg.start_soon(worker)
                if n % 32 == 0:  # starting ~200 tasks takes ~20 ms: let the loop run between chunks
                    await anyio.lowlevel.checkpoint()
    except BaseExceptionGroup as group:
        # A DahlError from any stage (e.g. an unreadable input) is the error to report,
        # not the group of follow-on failures it caused in other stages.
        first = next((e for e in _leaves(group) if isinstance(e, DahlError)), None)
        if first is None:
            raise
        raise first from group
    if fatal:
        raise fatal[0]


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
