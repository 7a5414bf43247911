"""``dahl generate`` as a stage of the engine: questions x models (x temperatures) x samples -> answers JSONL.

The answer id is blake2b-128 of (question, model, template version, sampling settings, sample
index), so a re-run resumes and a changed setting makes new answers; the cache key adds the base
URL and the exact body.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from contextlib import AsyncExitStack
from typing import Any

import anyio
import msgspec

from dahl.adapters._endpoint import Connections
from dahl.adapters._http import REFUSALS
from dahl.cache._wrap import BlobCache
from dahl.cache._store import open_store
from dahl.engine._channel import Channel
from dahl.engine._ends import Reader, Writer
from dahl.engine._stage import Stage, run_stages
from dahl.errors import AdapterError
from dahl.generate._sampler import Generated, Sampler
from dahl.generate._output import AnswerLog, finished_ids, lock_answers
from dahl.generate._questions import GenQuestion, read_questions
from dahl.generate._settings import GenerateCounters, GenerateReport, GenerateSettings

__all__ = ["answer_id", "cache_key", "generate_answers"]

log = logging.getLogger(__name__)

#: Bumped when the material of :func:`answer_id` or :func:`cache_key` changes.
GENERATE_KEY_VERSION = 1

_ENCODER = msgspec.msgpack.Encoder(order="deterministic")
_GENERATED = msgspec.msgpack.Decoder(Generated)
_READ_BATCH = 64


def answer_id(question: str, model: str, template: str, sampling: dict[str, Any], sample: int) -> str:
    """The answer's id: blake2b-128 hex (32 digits) of its question (verbatim), model,
    template version, sampling settings and 0-based sample index."""
    material = [GENERATE_KEY_VERSION, "answer", question, model, template, sampling, sample]
    return hashlib.blake2b(_ENCODER.encode(material), digest_size=16).hexdigest()


def cache_key(url: str, template: str, body: dict[str, Any], sample: int) -> str:
    """The reply's cache key: blake2b-128 hex of the route URL, template version, exact
    request body (never the key) and sample index (samples without a seed send equal bodies)."""
    material = [GENERATE_KEY_VERSION, "generate", url, template, body, sample]
    return hashlib.blake2b(_ENCODER.encode(material), digest_size=16).hexdigest()


@dataclasses.dataclass(frozen=True)
class _Job:
    question: GenQuestion
    endpoint: Sampler
    sample: int
    id: str


def _record(job: _Job, reply: Generated) -> dict[str, Any]:
    """The dahl JSONL line of one answer (``dahl score`` reads it as it is)."""
    endpoint = job.endpoint
    usage = None
    if reply.prompt_tokens is not None:
        usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
    record: dict[str, Any] = {
        "id": job.id,
        "question": job.question.question,
        "response": reply.text,
        "model": endpoint.cfg.model,
        "category": job.question.category,
    }
    # An empty reply (the model said nothing) or a refusal (flagged by its finish_reason) is abstained.
    if not reply.text.strip() or reply.finish_reason in REFUSALS:
        record["abstained"] = True
    record["meta"] = {
        "question_id": job.question.question_id,
        "template": endpoint.template.version,
        "sampling": endpoint.sampling(job.sample),
        "sample": job.sample,
        "usage": usage,
        "finish_reason": reply.finish_reason,
    }
    return record


async def generate_answers(settings: GenerateSettings, counters: GenerateCounters | None = None) -> GenerateReport:
    """Generate every (question, model, sample) answer of ``settings`` into ``settings.out``.

    Resumes: answers already in the output are skipped; finished calls come from the cache.

    Args:
        settings: what to generate.
        counters: live counters to update (for a progress display); new ones by default.

    Returns:
        The report (its ``exit_status``: 0, 5 or 6).

    Raises:
        ConfigError: an unset API key variable; another dahl run writes ``settings.out``;
            ``max_cost_usd`` with a model whose price is unknown.
        InputError: a bad questions record (file, line, field named), or an output that is not
            an answers file.
        OutputWriteError: the output cannot be written (answers already written are kept).
        QuotaExhausted, FatalAPIError: the API stopped the run (finished answers are kept);
            CostCapReached: the next call could pass ``settings.max_cost_usd``.
    """
    counters = counters if counters is not None else GenerateCounters()
    lock = await anyio.to_thread.run_sync(lock_answers, settings.out)
    async with AsyncExitStack() as stack:
        stack.callback(lock.release)
        done = await anyio.to_thread.run_sync(finished_ids, settings.out)
        template = settings.effective_template
        store = (await open_store(stack, settings.cache_dir))[0] if settings.use_cache else None
        cache = BlobCache(store, "generate/1")
        connections = Connections(stack)
        spend = counters.spend = await settings.open_spend()
        endpoints: list[Sampler] = []
        for cfg in settings.endpoints:
            session, lane = await connections.open(cfg)
            endpoints.append(Sampler(cfg, session, lane, settings.mode, template,
                                     settings.top_p, settings.stop, spend=spend))
        output = await anyio.to_thread.run_sync(AnswerLog, settings.out)
        stack.callback(output.close)
        await _run(settings, endpoints, cache, output, done, counters)
    return GenerateReport(settings.out, counters)


async def _run(
    settings: GenerateSettings,
    endpoints: list[Sampler],
    cache: BlobCache,
    output: AnswerLog,
    done: set[str],
    counters: GenerateCounters,
) -> None:
    # The lane caps each model's requests; a model asked at several temperatures has one lane.
    workers = max(cfg.max_in_flight for cfg in settings.endpoints) * len({cfg.model for cfg in settings.endpoints})
    jobs: Channel[_Job] = Channel(2 * workers)
    finished: Channel[dict[str, Any]] = Channel(64)
    asked: set[str] = set()

    async def take(batch: list[GenQuestion]) -> None:
        for question in batch:
            counters.questions += 1
            for endpoint in endpoints:
                for sample in range(settings.samples):
                    counters.answers += 1
                    job_id = answer_id(question.question, endpoint.cfg.model, endpoint.template.version,
                                       endpoint.sampling(sample), sample)
                    if job_id in done:
                        counters.resumed += 1
                        continue
                    if job_id in asked:  # a question given twice is answered once
                        counters.duplicates += 1
                        continue
                    asked.add(job_id)
                    await jobs.send(_Job(question, endpoint, sample, job_id))

    async def generate(job: _Job) -> None:
        endpoint = job.endpoint
        body = endpoint.body(job.question.question, job.sample)
        called = False

        async def compute() -> tuple[bytes, str | None]:
            nonlocal called
            called = True
            reply = await endpoint.generate(body)
            return _ENCODER.encode(reply), None

        blob = await cache.get_or_compute(cache_key(endpoint.url, endpoint.template.version, body, job.sample),
                                          compute)
        reply = _GENERATED.decode(blob)
        if not called:
            counters.cached += 1
        if reply.finish_reason == "length":
            counters.truncated += 1
        elif reply.finish_reason in REFUSALS:
            counters.refused += 1
        elif not reply.text.strip():
            counters.empty += 1
            log.warning("answer %s (%s, sample %d) is empty (finish_reason %r): written as abstained",
                        job.id, endpoint.cfg.model, job.sample, reply.finish_reason)
        await finished.send(_record(job, reply))

    async def failed(job: _Job, exc: AdapterError) -> None:
        counters.failed += 1
        log.warning("answer %s (%s, sample %d) failed: %s: %s", job.id, job.endpoint.cfg.model, job.sample,
                    type(exc).__name__, exc)

    def append(records: list[dict[str, Any]]) -> None:
        for record in records:  # each answer flushed and fsynced alone
            output.write(record)

    def written(records: list[dict[str, Any]]) -> None:
        counters.written += len(records)

    stage = Stage("generate", jobs, generate, workers=workers, outputs=[finished], on_error=failed)
    reader = Reader(read_questions(settings.questions), take, outputs=[jobs], batch=_READ_BATCH)
    await run_stages([stage], [reader, Writer(finished, append, written=written)])
