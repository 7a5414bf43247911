"""The recall part of one scoring run: load the reference sets, build the judge and the Coverer.

Used by :func:`dahl.run._score.score_async` when ``ScoreConfig.recall`` is set (``--refs``).
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import AsyncExitStack
from collections.abc import Iterator
from pathlib import Path

import anyio

from dahl.results import _manifest as manifest
from dahl.run._plan import AdapterSettings, open_judge
from dahl.adapters._recall import RecallCoverer, RecallSettings
from dahl.cache._wrap import CachingJudge
from dahl.cache._store import CacheStore
from dahl.config import EndpointConfig
from dahl.records import RefSet
from dahl.lanes._lane import LanePool
from dahl.formats._refs import RefIndex, read_refs, refs_sha256
from dahl.metrics import DEFAULT_WEIGHT, ranking
from dahl.analysis._summary import RecordedRecallSettings

__all__ = ["RunRecall", "load_refs", "open_recall"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RunRecall:
    """The run's Coverer and what the summary says about it.

    Attributes:
        coverer: adds recall to every finished answer.
        refs_sha256: sha256 of the refs file, hex.
        endpoint: the ``openai`` judge's endpoint, None for an offline judge.
        orders: reference sets per order of their F* for R@k (``importance``, ``support``, ``none``).
    """

    coverer: RecallCoverer
    refs_sha256: str
    endpoint: EndpointConfig | None
    orders: dict[str, int] = dataclasses.field(default_factory=dict)

    def settings(self, recall: RecallSettings) -> RecordedRecallSettings:
        """The ``recall_settings`` block of summary.json."""
        return RecordedRecallSettings(
            refs=manifest.json_text(str(recall.refs)), refs_sha256=self.refs_sha256,
            coverage=self.coverer.judge_fingerprint, partial=recall.partial, fstar_k=recall.fstar_k,
            fstar_min_importance=recall.fstar_min_importance, alpha=recall.alpha, beta=recall.beta,
            recall_at_order=self.orders)


def load_refs(path: Path) -> tuple[RefIndex, str]:
    """Read ``path`` (refs.jsonl) into an index, with the file's sha256 (hex). Blocking: run in a thread.

    Raises:
        InputError: a malformed line (file, line and field named), two sets for one question.
    """
    index, sha, _, _ = _read_refs(path)
    return index, sha


def _read_refs(path: Path) -> tuple[RefIndex, str, dict[str, int], set[tuple[float, float]]]:
    """:func:`load_refs`, with the sets per F* order (:func:`dahl.metrics.ranking`; ``none``: no order)
    and the (α, β) pairs the sets record in their ``meta`` (the build's)."""
    orders = {"importance": 0, "support": 0, "none": 0}
    built: set[tuple[float, float]] = set()

    def sets() -> Iterator[RefSet]:
        for ref_set in read_refs(path):
            orders[ranking(ref_set.facts) or "none"] += 1
            a, b = ref_set.meta.get("alpha"), ref_set.meta.get("beta")
            if isinstance(a, int | float) and isinstance(b, int | float):
                built.add((float(a), float(b)))
            yield ref_set

    return RefIndex(sets(), file=str(path)), refs_sha256(path), orders, built


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
    index, sha, orders, built = await anyio.to_thread.run_sync(_read_refs, recall.refs)
    if recall.alpha is not None or recall.beta is not None:
        given = (DEFAULT_WEIGHT if recall.alpha is None else recall.alpha,
                 DEFAULT_WEIGHT if recall.beta is None else recall.beta)
        other = sorted(pair for pair in built if pair != given)
        if other:
            log.warning("recall α %g, β %g (given) differ from the α, β the reference sets of %s were built with (%s): "
                        "importances are recomputed from the ratings", *given, recall.refs,
                        ", ".join(f"α {a:g}, β {b:g}" for a, b in other))
    name = recall.judge_name(adapters.checker)
    endpoint = recall.endpoint
    if endpoint is None and adapters.check_endpoint is not None:
        endpoint = dataclasses.replace(adapters.check_endpoint, max_tokens=None)
    judge = CachingJudge(await open_judge(name, endpoint, stack, lanes), cache)
    coverer = RecallCoverer(index, judge, recall, refs_sha256=sha)
    return RunRecall(coverer, sha, endpoint if name == "openai" else None, orders)
