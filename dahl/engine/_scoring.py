"""The stages that score answers: whole-answer lookup, split, cache lookup and check; every stage
that finishes an answer sends its result to ``results``."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio

from dahl.adapters._base import Checker, LookingUp, Splitter
from dahl.engine._channel import Channel
from dahl.results._counters import RunCounters
from dahl.engine._options import PipelineOptions
from dahl.engine._queued import ClaimJob, Line, Pending, QueuedAnswer, WholeAnswers
from dahl.results._assemble import build_result, result_of_found
from dahl.engine._stage import Stage, Unbatched
from dahl.errors import AdapterError
from dahl.preprocess import may_abstain, preprocess
from dahl.records import Answer, AnswerResult, Label, Verdict

__all__ = ["Scoring", "error_text", "prepare_answer"]

def error_text(exc: BaseException) -> str:
    """``"ClassName: message"``, the form of every error in a result line."""
    return f"{type(exc).__name__}: {exc}"


def prepare_answer(answer: Answer, clean: bool = True) -> tuple[Answer, bool]:
    """Preprocess ``answer`` (DAHL step 0, :func:`dahl.preprocess.preprocess`; CPU work): the cleaned
    answer (``answer`` itself if unchanged) and whether it abstained. Without ``clean`` (given claims,
    not taken from the response) the answer is returned as it is and abstained only when noncommittal
    (an echo of the question does not empty it)."""
    reason = answer.meta.get("finish_reason")  # dahl generate's: decides whether the tail was cut
    pre = preprocess(answer.question if clean else "", answer.response,
                     finish_reason=reason if isinstance(reason, str) else None)
    if not clean or pre.text == answer.response:
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


def _claims_of(job: ClaimJob) -> Iterator[tuple[Pending, int]]:
    pending, indices = job
    return ((pending, i) for i in indices)


class Scoring:
    """Builds the scoring stages over the given channels and holds what their workers share.

    A ``checker`` that is :class:`~dahl.adapters._base.LookingUp` and ``can_look_up`` gets a lookup
    stage (an answer's cached verdicts in one batched read; ``check_missed`` checks the rest).
    ``batches`` (answers to look up ``whole``) is None without a whole-answer cache; ``emit`` sends
    one finished answer to ``results``.
    """

    def __init__(
        self,
        *,
        splitter: Splitter,
        checker: Checker,
        whole: WholeAnswers | None,
        options: PipelineOptions,
        counters: RunCounters,
        answers: Channel[QueuedAnswer],
        batches: Channel[list[QueuedAnswer]] | None,
        results: Channel[Line],
        emit: Callable[[Line], Awaitable[None]],
    ) -> None:
        self.splitter = splitter
        self.checker = checker
        self.whole = whole
        self.options = options
        self.counters = counters
        self.answers = answers
        self.batches = batches
        self.results = results
        self.emit = emit
        self.looking_up = checker if isinstance(checker, LookingUp) and checker.can_look_up else None
        self._check_missed = self.looking_up.check_missed if self.looking_up is not None else None  # bound once
        self.gamma = options.gamma
        self.k = options.k

    def stages(self) -> list[Stage[Any]]:
        """The stages in pipeline order; building them counts their workers as senders."""
        o = self.options
        out: list[Stage[Any]] = []
        if self.whole is not None and self.batches is not None:
            out.append(Stage("whole", self.batches, self._whole, workers=WHOLE_WORKERS,
                             outputs=(self.answers, self.results)))
        # Claims travel to the check workers an answer at a time (one channel item per answer).
        self.claims: Channel[ClaimJob] = Channel(max(1, o.queue_size // 4))
        if self.looking_up is not None:
            self.split: Channel[Pending] = Channel(o.queue_size)
            out.append(Stage("split", self.answers, self._split, workers=o.split_concurrency,
                             outputs=(self.split, self.results), on_error=self._split_failed))
            out.append(Stage("lookup", self.split, self._lookup, workers=o.lookup_concurrency,
                             outputs=(self.claims, self.results)))
        else:
            out.append(Stage("split", self.answers, self._split, workers=o.split_concurrency,
                             outputs=(self.claims, self.results), on_error=self._split_failed))
        out.append(Stage("check", Unbatched(self.claims, _claims_of), self._check, workers=o.check_concurrency,
                         outputs=(self.results,), on_error=self._check_failed))
        return out

    async def _whole(self, batch: list[QueuedAnswer]) -> None:
        assert self.whole is not None
        counters = self.counters
        keys, found = await self.whole.look_up([(item.answer, item.input_hash) for item in batch])
        for item, key, got in zip(batch, keys, found, strict=True):
            if got is None:
                await self.answers.send(item if key is None else dataclasses.replace(item, whole_key=key))
                continue
            n = sum(got.counts)
            counters.answers_cached += 1
            counters.claims_cached += n
            counters.claims_done += n
            await self.emit(result_of_found(item.answer, item.input_hash, got, gamma=self.gamma, k=self.k))

    async def _split(self, item: QueuedAnswer) -> None:
        answer = item.answer
        abstained = answer.abstained
        gamma, k, limit = self.gamma, self.k, self.options.max_response_chars
        if len(answer.response) > limit:
            too_long = f"response of {len(answer.response):,} characters exceeds the limit of {limit:,}"
            self.counters.errors["ResponseTooLong"] += 1
            await self.emit(build_result(answer, item.input_hash, [], [], gamma=gamma, k=k, split_error=too_long))
            return
        clean = self.options.preprocess
        if not abstained and (clean or may_abstain(answer.response)):
            answer, abstained = await anyio.to_thread.run_sync(prepare_answer, answer, clean)
        if abstained:
            await self.emit(build_result(item.answer, item.input_hash, [], [], gamma=gamma, k=k, abstained=True))
            return
        parts = await self.splitter.split(answer)  # errors: see _split_failed; quota and fatal stop the run
        if not parts:
            await self.emit(build_result(item.answer, item.input_hash, [], [], gamma=gamma, k=k))
            return
        pending = Pending(QueuedAnswer(answer, item.input_hash, item.whole_key), parts, answer is not item.answer)
        if self.looking_up is not None:
            await self.split.send(pending)
        else:
            await self.claims.send((pending, range(len(parts))))

    async def _split_failed(self, item: QueuedAnswer, exc: AdapterError) -> None:
        self.counters.errors[type(exc).__name__] += 1
        await self.emit(build_result(item.answer, item.input_hash, [], [], gamma=self.gamma, k=self.k,
                                     split_error=error_text(exc)))

    async def _lookup(self, pending: Pending) -> None:
        assert self.looking_up is not None
        found = await self.looking_up.look_up(pending.claims, pending.item.answer)
        pending.keys = found.keys
        pending.generation = found.generation
        missing: list[int] = []
        for i, verdict in enumerate(found.verdicts):
            if verdict is None:
                missing.append(i)
            else:
                pending.verdicts[i] = verdict
        hits = len(pending.claims) - len(missing)
        self.counters.claims_done += hits
        pending.remaining -= hits
        if not missing:
            await self.emit(self._finished(pending))
            return
        await self.claims.send((pending, missing))

    async def _check(self, job: tuple[Pending, int]) -> None:
        pending, i = job
        claim = pending.claims[i]
        counters = self.counters
        counters.checks_in_flight += 1
        try:
            check_missed = self._check_missed
            if check_missed is not None and pending.keys is not None:
                verdict = await check_missed(claim, pending.item.answer, pending.keys[i], pending.generation)
            else:
                verdict = await self.checker.check(claim, pending.item.answer)
        finally:
            counters.checks_in_flight -= 1
        await self._decided(pending, i, verdict)

    async def _check_failed(self, job: tuple[Pending, int], exc: AdapterError) -> None:
        pending, i = job
        await self._decided(pending, i, Verdict(label=Label.ERROR, checker=self.checker.fingerprint,
                                                error=error_text(exc)))

    async def _decided(self, pending: Pending, i: int, verdict: Verdict) -> None:
        counters = self.counters
        if verdict.label is Label.ERROR:
            counters.claims_failed += 1
            # Raised or returned (an unparseable reply), the class leads the error text.
            counters.errors[(verdict.error or "error").split(":", 1)[0]] += 1
        counters.claims_done += 1
        pending.verdicts[i] = verdict
        pending.remaining -= 1
        if pending.remaining == 0:
            await self.emit(self._finished(pending))

    def _finished(self, pending: Pending) -> AnswerResult:
        """The result of an answer whose claims all have verdicts; kept whole if error-free."""
        verdicts = [v for v in pending.verdicts if v is not None]
        item = pending.item
        result = build_result(item.answer, item.input_hash, pending.claims, verdicts, gamma=self.gamma, k=self.k)
        if item.whole_key is not None and self.whole is not None:  # keep() refuses errors
            self.whole.keep(item.whole_key, result, pending.cleaned)
        return result


WHOLE_WORKERS = 2  #: Workers looking whole answers up (each holds one batch of ``read_batch`` answers).
