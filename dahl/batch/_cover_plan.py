"""The cover requests of a wave: recall's ``openai`` coverage judge, asked as ``dahl score`` would ask it.

Per answer whose claims are known (its split cached, or a rule or given Splitter),
that is not abstained or too long (no judge call online either), and whose question
has a reference set: the facts of F* (:func:`dahl.metrics.fstar`) are looked up in
the coverage cache (:func:`dahl.cache._coverage.coverage_key`), and the missed ones,
in F* order, go out :data:`~dahl.adapters._coverage.MAX_FACTS` to a request, as
:class:`~dahl.cache._coverage.CachingJudge` hands its misses to
:class:`~dahl.adapters._coverage.OpenAICoverageJudge`. The response judged is the
one the online run covers: preprocessed when the answer has claims, as read when it
has none.
"""

from __future__ import annotations

import dataclasses
import hashlib
from contextlib import AsyncExitStack

import anyio

from dahl.adapters._coverage import MAX_FACTS, OpenAICoverageJudge, cover_request_body
from dahl.run._plan import open_judge
from dahl.adapters._recall import RecallSettings
from dahl.batch._requests import BatchRequest, StageMeta
from dahl.cache._coverage import coverage_key
from dahl.cache._store import CacheStore
from dahl.config import EndpointConfig
from dahl.lanes._lane import LanePool
from dahl.formats._refs import RefIndex
from dahl.metrics import fstar
from dahl.records import Answer, Coverage, content_id, normalize_text
from dahl.run._recall import load_refs

__all__ = ["CoverPlanner", "open_cover_planner"]

#: Stored coverage values that answer a fact (``error`` is never stored).
_LABELS = frozenset(c.value.encode() for c in Coverage if c is not Coverage.ERROR)


class CoverPlanner:
    """Adds the missed cover requests of answers to a wave.

    Args:
        index: the reference sets.
        judge: the run's openai coverage judge (its fingerprint keys the cache).
        cfg: the judge's endpoint.
        settings: F* cut and weights.
        store: the cache (read only).

    Attributes:
        meta: the stage's settings for ``collect``.
        facts_cached: facts of F* the cache already answers.
    """

    def __init__(self, index: RefIndex, judge: OpenAICoverageJudge, cfg: EndpointConfig, settings: RecallSettings,
                 store: CacheStore) -> None:
        self._index, self._judge, self._cfg, self._settings, self._store = index, judge, cfg, settings, store
        self._version = str(judge.parser_version)
        self.meta = StageMeta(judge.fingerprint, self._version, cfg.base_url, cfg.model, cfg.api_key_env or "")
        self.facts_cached = 0

    async def requests(self, answer: Answer, response: str) -> list[BatchRequest]:
        """The cover requests ``answer`` still needs, judging ``response`` (empty: none, or all cached)."""
        ref_set = self._index.find(content_id(answer.question), answer.question)
        if ref_set is None:
            return []
        s = self._settings
        ranked = fstar(ref_set.facts, k=s.fstar_k, min_importance=s.fstar_min_importance, alpha=s.alpha, beta=s.beta)
        facts = [f.text for f, _ in ranked]
        if not facts:
            return []
        fingerprint = self._judge.fingerprint
        keys = [coverage_key(fingerprint, answer.question, response, f) for f in facts]
        found = await self._store.get_many(keys, parser_version=self._version)
        missing = [i for i, entry in enumerate(found) if entry is None or entry.value not in _LABELS]
        self.facts_cached += len(facts) - len(missing)
        question = normalize_text(answer.question)
        out = []
        for start in range(0, len(missing), MAX_FACTS):
            chunk = missing[start:start + MAX_FACTS]
            texts = [normalize_text(facts[i]) for i in chunk]
            body = cover_request_body(self._cfg, question, response, texts, fmt=self._cfg.effective_format())
            chunk_keys = tuple(keys[i] for i in chunk)
            custom_id = hashlib.blake2b("\n".join(("cover", *chunk_keys)).encode(), digest_size=16).hexdigest()
            out.append(BatchRequest(custom_id, "cover", body, keys=chunk_keys))
        return out


async def open_cover_planner(recall: RecallSettings, checker: str, check_endpoint: EndpointConfig | None,
                             stack: AsyncExitStack, pool: LanePool, store: CacheStore) -> CoverPlanner | None:
    """The cover planner of a run with the ``openai`` coverage judge, else None (no cover calls to batch).

    Loads the reference sets in a worker thread; the judge's endpoint is chosen as
    :func:`dahl.run._recall.open_recall` chooses it.

    Raises:
        ConfigError: the judge's key variable is unset; InputError: a malformed refs line.
    """
    if recall.judge_name(checker) != "openai":
        return None
    index, _ = await anyio.to_thread.run_sync(load_refs, recall.refs)
    cfg = recall.endpoint
    if cfg is None and check_endpoint is not None:
        cfg = dataclasses.replace(check_endpoint, max_tokens=None)
    judge = await open_judge("openai", cfg, stack, pool)
    assert isinstance(judge, OpenAICoverageJudge) and cfg is not None
    return CoverPlanner(index, judge, cfg, recall, store)
