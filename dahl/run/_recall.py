"""The recall part of one scoring run: load the reference sets, build the judge and the Coverer.

Used by :func:`dahl.run._score.score_async` when ``ScoreConfig.recall`` is set (``--refs``).
"""

from __future__ import annotations

import dataclasses
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from dahl.results import _manifest as manifest
from dahl.run._plan import AdapterSettings, open_judge
from dahl.adapters._recall import RecallCoverer, RecallSettings
from dahl.cache._wrap import CachingJudge
from dahl.cache._store import CacheStore
from dahl.config import EndpointConfig
from dahl.lanes._lane import LanePool
from dahl.formats._refs import RefIndex, read_refs, refs_sha256
from dahl.analysis._summary import RecordedRecallSettings

__all__ = ["RunRecall", "load_refs", "open_recall"]


@dataclasses.dataclass(frozen=True)
class RunRecall:
    """The run's Coverer and what the summary says about it.

    Attributes:
        coverer: adds recall to every finished answer.
        refs_sha256: sha256 of the refs file, hex.
        endpoint: the ``openai`` judge's endpoint, None for an offline judge.
    """

    coverer: RecallCoverer
    refs_sha256: str
    endpoint: EndpointConfig | None

    def settings(self, recall: RecallSettings) -> RecordedRecallSettings:
        """The ``recall_settings`` block of summary.json."""
        return RecordedRecallSettings(
            refs=manifest.json_text(str(recall.refs)), refs_sha256=self.refs_sha256,
            coverage=self.coverer.judge_fingerprint, partial=recall.partial, fstar_k=recall.fstar_k,
            fstar_min_importance=recall.fstar_min_importance, alpha=recall.alpha, beta=recall.beta)


def load_refs(path: Path) -> tuple[RefIndex, str]:
    """Read ``path`` (refs.jsonl) into an index, with the file's sha256 (hex). Blocking: run in a thread.

    Raises:
        InputError: a malformed line (file, line and field named), two sets for one question.
    """
    return RefIndex(read_refs(path), file=str(path)), refs_sha256(path)


async def open_recall(
    recall: RecallSettings, adapters: AdapterSettings, stack: AsyncExitStack, lanes: LanePool,
    cache: CacheStore | None,
) -> RunRecall:
    """Load the reference sets (in a thread) and build the cached judge and the Coverer.

    The ``openai`` judge's endpoint is ``recall.endpoint``, else the Checker's with ``max_tokens``
    left to the judge's default.

    Raises:
        ConfigError: an openai judge without an endpoint, an unset key variable.
        InputError: a malformed refs line.
    """
    index, sha = await anyio.to_thread.run_sync(load_refs, recall.refs)
    name = recall.judge_name(adapters.checker)
    endpoint = recall.endpoint
    if endpoint is None and adapters.check_endpoint is not None:
        endpoint = dataclasses.replace(adapters.check_endpoint, max_tokens=None)
    judge = CachingJudge(await open_judge(name, endpoint, stack, lanes), cache)
    coverer = RecallCoverer(index, judge, recall, refs_sha256=sha)
    return RunRecall(coverer, sha, endpoint if name == "openai" else None)
