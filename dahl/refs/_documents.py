"""``dahl refs build`` from documents, as stages of the engine ("Beyond Precision").

Per question: documents (inline, by ``doc_ids``, or BM25-retrieved) -> chunks -> facts
(cached per chunk) -> duplicates removed -> relevance and salience rated 1-5 -> importance
(:func:`dahl.metrics.importance`) -> one ``refs.jsonl`` line.
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import AsyncExitStack
from typing import Any, Literal

import anyio

from dahl.cache._wrap import BlobCache
from dahl.cache._store import open_store
from dahl.config import EndpointConfig
from dahl.engine._channel import Channel
from dahl.engine._ends import Reader, Writer
from dahl.engine._stage import Stage, run_stages
from dahl.errors import AdapterError, InputError
from dahl.metrics import importance
from dahl.records import FactSource, RefFact, RefSet
from dahl.refs._dedupe import distinct
from dahl.refs._extract import CachedExtractor, ExtractedFact, Extractor, RuleExtractor, chunks
from dahl.refs._library import DocumentLibrary
from dahl.refs._output import RefsLog, check_settings, finished_questions
from dahl.refs._questions import Document, RefQuestion, read_questions
from dahl.refs._rate import CachedRater, Rater, Rating
from dahl.refs._settings import BuildCounters, BuildReport, BuildSettings

__all__ = ["build_refs"]

log = logging.getLogger(__name__)

_READ_BATCH = 64


@dataclasses.dataclass(frozen=True)
class _Extracted:
    question: RefQuestion
    documents: tuple[str, ...]
    facts: list[tuple[str, ExtractedFact]]  # (doc id, fact), distinct


class _Builder:
    """The adapters, library and counters of one build."""

    def __init__(
        self,
        settings: BuildSettings,
        counters: BuildCounters,
        library: DocumentLibrary | None,
        extractor: CachedExtractor,
        rater: CachedRater | None,
    ) -> None:
        self.settings = settings
        self.counters = counters
        self.library = library
        self.extractor = extractor
        self.rater = rater
        self.meta: dict[str, object] = {
            "method": "documents",
            "extractor": extractor.fingerprint,
            "granularity": settings.granularity,
            "rater": rater.fingerprint if rater is not None else None,
            "alpha": settings.alpha,
            "beta": settings.beta,
            "near_duplicate_threshold": settings.near,
        }
        if library is not None:
            self.meta["corpus"] = library.fingerprint

    def documents(self, question: RefQuestion) -> list[Document]:
        """The question's documents (blocking: retrieval is CPU work).

        Raises:
            InputError: unknown doc ids, or doc ids / retrieval without a corpus.
        """
        where = str(self.settings.questions)
        if question.documents is not None:
            return list(question.documents)
        if self.library is None:
            field = "doc_ids" if question.doc_ids is not None else "documents"
            raise InputError("no documents: give them inline, or a corpus with --evidence", file=where,
                             line=question.line or None, field=field)
        if question.doc_ids is not None:
            return self.library.given(question, where)
        return self.library.retrieve(question.question, self.settings.docs_per_question)

    async def extract(self, question: RefQuestion) -> _Extracted | None:
        """Documents → chunks → facts → distinct facts; None when the input is bad (counted)."""
        try:
            docs = await anyio.to_thread.run_sync(self.documents, question)
        except InputError as exc:
            self.counters.skipped += 1
            log.warning("question %s skipped: %s", question.question_id, exc)
            return None
        facts: list[tuple[str, ExtractedFact]] = []
        granularity = self.settings.granularity
        for doc in docs:
            for chunk in await anyio.to_thread.run_sync(chunks, doc.id, doc.title, doc.text, granularity):
                found = await self.extractor.extract(chunk)
                self.counters.chunks += 1
                facts.extend((doc.id, fact) for fact in found)
        near = self.settings.near
        unique = await anyio.to_thread.run_sync(lambda: distinct(facts, lambda f: f[1].text, near=near))
        return _Extracted(question, tuple(d.id for d in docs), unique)

    async def rate(self, item: _Extracted) -> RefSet:
        """Ratings and importances of the distinct facts; the question's set."""
        texts = [fact.text for _, fact in item.facts]
        ratings: list[Rating | None] = [None] * len(texts)
        if self.rater is not None and texts:
            ratings = list(await self.rater.rate(item.question.question, texts))
        alpha, beta = self.settings.alpha, self.settings.beta
        facts = tuple(
            RefFact(
                id=f"f{n}",
                text=fact.text,
                source=FactSource(doc_id=doc_id, span=fact.span),
                relevance=rating.relevance if rating else None,
                salience=rating.salience if rating else None,
                importance=importance(rating.relevance, rating.salience, alpha=alpha, beta=beta) if rating else None,
            )
            for n, ((doc_id, fact), rating) in enumerate(zip(item.facts, ratings, strict=True), 1)
        )
        return RefSet(
            question_id=item.question.question_id,
            question=item.question.question,
            facts=facts,
            meta={**self.meta, "documents": list(item.documents)},
        )


async def _open_endpoints(
    settings: BuildSettings, stack: AsyncExitStack, caches: tuple[BlobCache | None, BlobCache | None],
    counters: BuildCounters,
) -> tuple[CachedExtractor, CachedRater | None]:
    """The extractor and rater (counting into ``counters``), with their lanes (metered by
    ``counters.spend``) and sessions (closed with ``stack``)."""
    from dahl.adapters._endpoint import Connections, Endpoint  # imports aiohttp: only when an LLM is used
    from dahl.refs._prompts import task

    connections = Connections(stack)

    async def endpoint(cfg: EndpointConfig, kind: Literal["extract", "rate"]) -> Endpoint:
        session, lane = await connections.open(cfg)
        return Endpoint(cfg, session, lane, task(cfg, kind), spend=counters.spend)

    extract_cache, rate_cache = caches
    inner: Extractor = RuleExtractor()
    if settings.extractor == "openai":
        from dahl.refs._extract import OpenAIExtractor

        assert settings.extract_endpoint is not None  # checked in __post_init__
        inner = OpenAIExtractor(await endpoint(settings.extract_endpoint, "extract"))
    extractor = CachedExtractor(inner, extract_cache if settings.extractor != "rules" else None, counters)
    rater: CachedRater | None = None
    if settings.rater == "openai":
        from dahl.refs._rate import OpenAIRater

        assert settings.rate_endpoint is not None and rate_cache is not None
        inner_rater: Rater = OpenAIRater(await endpoint(settings.rate_endpoint, "rate"), batch=settings.rate_batch)
        rater = CachedRater(inner_rater, rate_cache, counters)
    return extractor, rater


async def build_refs(settings: BuildSettings, counters: BuildCounters | None = None) -> BuildReport:
    """Build the reference set of every question of ``settings.questions`` into ``settings.out``.

    Resumes: questions already in the output are skipped; finished calls come from the cache.

    Args:
        settings: what to build.
        counters: live counters to update (for a progress display); new ones by default.

    Returns:
        The report (its ``exit_status``: 0, 5 or 6).

    Raises:
        ConfigError: an unreadable corpus, an unset API key variable, ``max_cost_usd`` with a
            model whose price is unknown.
        InputError: a bad questions record or corpus line (file, line, field named); an output
            file that is not a ``refs.jsonl``, or one begun with other settings.
        OutputWriteError: the output cannot be written (sets already written are kept).
        QuotaExhausted, FatalAPIError: the API stopped the build (finished sets are kept);
            CostCapReached: the next call could pass ``settings.max_cost_usd``.
    """
    counters = counters if counters is not None else BuildCounters()
    done = await anyio.to_thread.run_sync(finished_questions, settings.out)
    library = None
    if settings.evidence is not None:
        library = await anyio.to_thread.run_sync(DocumentLibrary.load, settings.evidence)
    async with AsyncExitStack() as stack:
        store = None
        if settings.use_cache and (settings.extractor != "rules" or settings.rater != "none"):
            store = (await open_store(stack, settings.cache_dir))[0]
        extract_cache = BlobCache(store, "extract/1") if store is not None else None
        rate_cache = BlobCache(store, "rate/1")
        counters.spend = await settings.open_spend()
        extractor, rater = await _open_endpoints(settings, stack, (extract_cache, rate_cache), counters)
        builder = _Builder(settings, counters, library, extractor, rater)
        await anyio.to_thread.run_sync(check_settings, settings.out, builder.meta)
        output = await anyio.to_thread.run_sync(RefsLog, settings.out)
        stack.callback(output.close)
        await _run(builder, output, done)
    return BuildReport(settings.out, counters)


def _workers(cfg: EndpointConfig | None, offline: int) -> int:
    return cfg.max_in_flight if cfg is not None else offline


async def _run(builder: _Builder, output: RefsLog, done: set[str]) -> None:
    settings, counters = builder.settings, builder.counters
    extract_workers = _workers(settings.extract_endpoint if settings.extractor == "openai" else None, 2)
    rate_workers = _workers(settings.rate_endpoint if settings.rater == "openai" else None, 1)
    questions: Channel[RefQuestion] = Channel(2 * extract_workers)
    extracted: Channel[_Extracted] = Channel(2 * rate_workers)
    finished: Channel[RefSet] = Channel(64)

    async def take(batch: list[RefQuestion]) -> None:
        for question in batch:
            counters.questions += 1
            if question.question_id in done:
                counters.resumed += 1
                continue
            await questions.send(question)

    async def extract(question: RefQuestion) -> None:
        item = await builder.extract(question)
        if item is not None:
            await extracted.send(item)

    async def rate(item: _Extracted) -> None:
        await finished.send(await builder.rate(item))

    async def failed(item: object, exc: AdapterError) -> None:
        counters.failed += 1
        question = item.question if isinstance(item, _Extracted) else item
        log.warning("question %s failed: %s: %s", getattr(question, "question_id", "?"), type(exc).__name__, exc)

    def append(sets: list[RefSet]) -> None:
        for ref_set in sets:  # each set flushed and fsynced alone
            output.write(ref_set)

    def written(sets: list[RefSet]) -> None:
        for ref_set in sets:
            counters.written += 1
            counters.facts += len(ref_set.facts)

    stages: list[Stage[Any]] = [
        Stage("extract", questions, extract, workers=extract_workers, outputs=[extracted], on_error=failed),
        Stage("rate", extracted, rate, workers=rate_workers, outputs=[finished], on_error=failed),
    ]
    reader = Reader(read_questions(settings.questions, settings.fmt), take, outputs=[questions], batch=_READ_BATCH)
    await run_stages(stages, [reader, Writer(finished, append, written=written)])
