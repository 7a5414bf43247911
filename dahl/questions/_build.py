"""``dahl questions build``: exam questions from articles, through the engine (DAHL §3.2).

Per article: N questions from an LLM, then one judge call per question (answerable without the
article? which category?). Finished articles go to the journal; the CSV is written from it
once every article is done.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import msgspec

from dahl.adapters._endpoint import Connections, Endpoint
from dahl.adapters._parse import parse_json_object
from dahl.cache._wrap import BlobCache
from dahl.cache._store import open_store
from dahl.config import EndpointConfig
from dahl.engine._channel import Channel
from dahl.engine._ends import Reader, Writer
from dahl.engine._stage import Stage, run_stages
from dahl.errors import AdapterError, OutputParseError
from dahl.questions import _prompts as prompts
from dahl.questions._articles import Article, read_articles
from dahl.questions._checks import canonical_category
from dahl.questions._journal import ArticleQuestions, Journal, Judged, check_journal, journal_path, read_journal
from dahl.questions._table import TableCounts, write_table

__all__ = ["QuestionsCounters", "QuestionsReport", "QuestionsSettings", "build_questions"]

log = logging.getLogger(__name__)

#: Articles read per worker-thread call.
_READ_BATCH = 64

_KEY_ENCODER = msgspec.msgpack.Encoder(order="deterministic")


@dataclasses.dataclass(frozen=True)
class QuestionsSettings:
    """What one ``dahl questions build`` does.

    Attributes:
        articles: JSONL articles (:func:`~dahl.questions._articles.read_articles`).
        out: the CSV to write; its journal sits beside it.
        endpoint: the LLM generating and judging questions.
        per_article: questions asked per article (>= 1).
        near: near-duplicate threshold (rapidfuzz ratio 0-100); None: exact only.
        keep_flagged: keep flagged rows in the CSV (flags column filled).
        cache_dir: cache folder; None: ``$DAHL_CACHE_DIR`` or the user cache dir.
        use_cache: read and write the cache.

    Raises:
        ValueError: ``per_article < 1``.
    """

    articles: Path
    out: Path
    endpoint: EndpointConfig
    per_article: int = 5
    near: float | None = 95.0
    keep_flagged: bool = False
    cache_dir: Path | None = None
    use_cache: bool = True

    def __post_init__(self) -> None:
        if self.per_article < 1:
            raise ValueError(f"per_article must be >= 1, got {self.per_article}")


@dataclasses.dataclass
class QuestionsCounters:
    """Live counts of a build (for progress and the report).

    Attributes:
        articles: articles read.
        resumed: articles already in the journal (nothing sent).
        done: articles finished in this run.
        failed: articles whose calls failed (not journaled; a re-run retries them).
        generate_calls, judge_calls: requests sent (cache misses).
    """

    articles: int = 0
    resumed: int = 0
    done: int = 0
    failed: int = 0
    generate_calls: int = 0
    judge_calls: int = 0


@dataclasses.dataclass(frozen=True)
class QuestionsReport:
    """The outcome of a build.

    Attributes:
        out: the CSV written (None when an article failed: the CSV waits for all).
        counters: the live counters at the end.
        table: rows, drops and per-flag counts (None when the CSV was not written).
    """

    out: Path | None
    counters: QuestionsCounters
    table: TableCounts | None


def _parse_questions(count: int) -> Callable[[str], list[str]]:
    def parse(raw: str) -> list[str]:
        value = parse_json_object(raw).get("questions")
        if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
            raise OutputParseError("'questions' is not a list of strings", raw=raw)
        found = [" ".join(q.split()) for q in value if q.strip()]
        if not found:
            raise OutputParseError("no question in the reply", raw=raw)
        return found[:count]
    return parse


def _parse_judgement(raw: str) -> dict[str, Any]:
    value = parse_json_object(raw)
    answerable, category, confidence = value.get("answerable"), value.get("category"), value.get("confidence", 0.0)
    if not isinstance(answerable, bool) or not isinstance(category, str):
        raise OutputParseError("needs 'answerable' (true/false) and 'category' (a string)", raw=raw)
    if not isinstance(confidence, int | float) or isinstance(confidence, bool) or not 0 <= confidence <= 1:
        raise OutputParseError("'confidence' must be a number from 0 to 1", raw=raw)
    name = prompts.AMBIGUOUS if category.strip().casefold() == prompts.AMBIGUOUS else canonical_category(category)
    return {"answerable": answerable, "category": name or "", "confidence": float(confidence)}


def _key(fingerprint: str, messages: list[dict[str, str]]) -> str:
    material = [1, fingerprint, [[m["role"], m["content"]] for m in messages]]
    return hashlib.blake2b(_KEY_ENCODER.encode(material), digest_size=16).hexdigest()


class _Asker:
    """Generation and judge calls, behind the cache."""

    def __init__(self, generate: Endpoint, judge: Endpoint, cache: BlobCache, counters: QuestionsCounters,
                 per_article: int) -> None:
        self.generate_endpoint, self.judge_endpoint = generate, judge
        self.generate_template = generate.cfg.template(prompts.GENERATE_TEMPLATE)
        self.judge_template = judge.cfg.template(prompts.JUDGE_TEMPLATE)
        self.cache, self.counters, self.per_article = cache, counters, per_article

    async def _cached(self, endpoint: Endpoint, messages: list[dict[str, str]], parse: Callable[[str], Any]) -> Any:
        async def compute() -> tuple[bytes, str | None]:
            if endpoint is self.generate_endpoint:
                self.counters.generate_calls += 1
            else:
                self.counters.judge_calls += 1
            parsed = await endpoint.ask(lambda fmt: endpoint.body(messages, fmt), parse)
            return msgspec.json.encode(parsed.get()), parsed.raw

        return msgspec.json.decode(await self.cache.get_or_compute(_key(endpoint.fingerprint, messages), compute))

    async def article(self, article: Article) -> ArticleQuestions:
        """The article's questions, each judged.

        Raises:
            AdapterError: a call failed after retries, or its reply could not be parsed.
        """
        messages = prompts.generate_messages(article.title, article.text, self.per_article,
                                             template=self.generate_template)
        texts: list[str] = await self._cached(self.generate_endpoint, messages, _parse_questions(self.per_article))
        judged = []
        for text in texts:
            verdict = await self._cached(self.judge_endpoint, prompts.judge_messages(text, template=self.judge_template), _parse_judgement)
            judged.append(Judged(question=text, **verdict))
        return ArticleQuestions(article_id=article.id, title=article.title, license=article.license, url=article.url,
                                model=self.generate_endpoint.cfg.model,
                                generator=self.generate_endpoint.fingerprint, per_article=self.per_article,
                                questions=tuple(judged))


async def build_questions(settings: QuestionsSettings, counters: QuestionsCounters | None = None) -> QuestionsReport:
    """Generate, judge and flag the questions of every article into ``settings.out``.

    Resumes: journaled articles are skipped; calls of an article cut short come from the cache.

    Raises:
        InputError: a bad article line (file, line, field), or a journal of another command.
        ConfigError: an unset API key variable.
        OutputWriteError: the journal or CSV cannot be written (journaled articles are kept).
        QuotaExhausted, FatalAPIError: the API stopped the build (journaled articles are kept).
    """
    counters = counters if counters is not None else QuestionsCounters()
    path = journal_path(settings.out)
    done = await anyio.to_thread.run_sync(read_journal, path)
    cfg = settings.endpoint
    async with AsyncExitStack() as stack:
        store = (await open_store(stack, settings.cache_dir))[0] if settings.use_cache else None
        session, lane = await Connections(stack).open(cfg)
        asker = _Asker(Endpoint(cfg, session, lane, prompts.task(cfg, "generate")),
                       Endpoint(cfg, session, lane, prompts.task(cfg, "judge")),
                       BlobCache(store, "questions/1"), counters, settings.per_article)
        await anyio.to_thread.run_sync(check_journal, path, done, asker.generate_endpoint.fingerprint,
                                       settings.per_article)
        journal = await anyio.to_thread.run_sync(Journal, path)
        stack.callback(journal.close)
        order = await _run(settings, asker, journal, done)
    if counters.failed:
        return QuestionsReport(None, counters, None)
    finished = await anyio.to_thread.run_sync(read_journal, path)
    table = await anyio.to_thread.run_sync(
        lambda: write_table(settings.out, [finished[a] for a in order if a in finished], near=settings.near,
                            keep_flagged=settings.keep_flagged,
                            prompt_version=f"{asker.generate_template.version}+"
                                           f"{asker.judge_template.version}"))
    return QuestionsReport(settings.out, counters, table)


async def _run(settings: QuestionsSettings, asker: _Asker, journal: Journal,
               done: dict[str, ArticleQuestions]) -> list[str]:
    """Run the pipeline; the article ids in file order."""
    counters = asker.counters
    workers = settings.endpoint.max_in_flight
    articles: Channel[Article] = Channel(2 * workers)
    finished: Channel[ArticleQuestions] = Channel(64)
    order: list[str] = []

    async def take(batch: list[Article]) -> None:
        for article in batch:
            counters.articles += 1
            order.append(article.id)
            if article.id in done:
                counters.resumed += 1
                continue
            await articles.send(article)

    async def generate(article: Article) -> None:
        await finished.send(await asker.article(article))

    async def failed(article: Article, exc: AdapterError) -> None:
        counters.failed += 1
        log.warning("article %s failed: %s: %s", article.id, type(exc).__name__, exc)

    def append(items: list[ArticleQuestions]) -> None:
        for item in items:  # each article journaled (flushed, fsynced) alone
            journal.write(item)

    def written(items: list[ArticleQuestions]) -> None:
        counters.done += len(items)

    stage = Stage("generate", articles, generate, workers=workers, outputs=[finished], on_error=failed)
    reader = Reader(read_articles(settings.articles), take, outputs=[articles], batch=_READ_BATCH)
    await run_stages([stage], [reader, Writer(finished, append, written=written)])
    return order
