"""Build the run's Splitter and Checker from their names and settings."""

from __future__ import annotations

import importlib
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from dahl.adapters._base import Checker, ConcurrencyHint, Splitter
from dahl.config import EndpointConfig
from dahl.lanes._lane import Lane, LanePool
from dahl.lanes._limiter import LimiterFactory
from dahl.engine._pipeline import PipelineOptions
from dahl.errors import ConfigError
from dahl.formats._needs import Needs

if TYPE_CHECKING:  # aiohttp and bm25s are imported only when used
    import aiohttp

    from dahl.adapters._endpoint import Connections
    from dahl.lanes._spend import Spend

    from dahl.adapters._corpus import Corpus
    from dahl.adapters._coverage import CoverageJudge

__all__ = ["CHECKERS", "SPLITTERS", "AdapterSettings", "open_adapters", "open_judge", "used_templates"]

SPLITTERS = ("rules", "given", "openai")
CHECKERS = ("evidence", "nli", "replay", "fake", "openai")


@dataclass(frozen=True)
class AdapterSettings:
    """Which Splitter and Checker a run uses.

    Attributes:
        splitter: one of :data:`SPLITTERS`.
        checker: one of :data:`CHECKERS`.
        evidence: corpus (JSONL ``{id, title?, text, url?}`` or a folder of .txt/.md files) for
            the evidence Checker, or passages for the ``openai`` Checker.
        split_endpoint: endpoint of the ``openai`` Splitter.
        check_endpoint: endpoint of the ``openai`` Checker.
        top_k: passages per claim given to the ``openai`` Checker with ``evidence``, or scored by
            the ``nli`` Checker (>= 1).
        index_dir: folder where corpus indexes are saved per corpus fingerprint; None = in memory.
        nli_model: the ``nli`` Checker's model folder (model.onnx, tokenizer.json, config.json).
        nli_threshold: P(entailment) at or above which the ``nli`` Checker says supported, in [0, 1].
        nli_contradiction: P(contradiction) at or above which it says contradicted, in [0, 1].
    """

    splitter: str = "rules"
    checker: str = "evidence"
    evidence: Path | None = None
    split_endpoint: EndpointConfig | None = None
    check_endpoint: EndpointConfig | None = None
    top_k: int = 5
    index_dir: Path | None = None
    nli_model: Path | None = None
    nli_threshold: float = 0.5
    nli_contradiction: float = 0.5

    def __post_init__(self) -> None:
        if self.splitter not in SPLITTERS:
            raise ConfigError(f"unknown splitter {self.splitter!r}; choose one of {', '.join(SPLITTERS)}")
        if self.checker not in CHECKERS:
            raise ConfigError(f"unknown checker {self.checker!r}; choose one of {', '.join(CHECKERS)}")
        if self.checker == "replay" and self.splitter != "given":
            raise ConfigError("--checker replay needs --splitter given: it replays the labels of the given claims")
        if self.checker in ("evidence", "nli") and self.evidence is None:
            raise ConfigError(f"--checker {self.checker} needs --evidence CORPUS.jsonl")
        if self.checker == "nli" and self.nli_model is None:
            raise ConfigError("--checker nli needs --nli-model DIR (model.onnx, tokenizer.json, config.json)")
        if not (0.0 <= self.nli_threshold <= 1.0 and 0.0 <= self.nli_contradiction <= 1.0):
            raise ConfigError(f"--nli-threshold and --nli-contradiction must be in [0, 1], got {self.nli_threshold}, "
                              f"{self.nli_contradiction}")
        if self.evidence is not None and self.checker in ("evidence", "nli", "openai") and not self.evidence.exists():
            raise ConfigError(f"evidence file not found: {self.evidence}")
        if self.top_k < 1:
            raise ConfigError(f"--top-k must be >= 1, got {self.top_k}")
        if self.splitter == "openai" and self.split_endpoint is None:
            raise ConfigError("--splitter openai needs --base-url and --model (or a [split] table in --config)")
        if self.checker == "openai" and self.check_endpoint is None:
            raise ConfigError("--checker openai needs --base-url and --model (or a [check] table in --config)")

    @property
    def input_needs(self) -> Needs:
        """What every input answer must carry for these adapters (claims, labels)."""
        needs = Needs.CLAIMS if self.splitter == "given" else Needs.NOTHING
        return needs | Needs.LABELS if self.checker == "replay" else needs


async def open_adapters(
    settings: AdapterSettings, stack: AsyncExitStack, *, spend: Spend | None = None,
    limiters: LimiterFactory | None = None,
) -> tuple[Splitter, Checker, PipelineOptions, LanePool]:
    """Construct the Splitter and Checker, pipeline options that suit them, and the run's lanes.

    Resources (HTTP sessions) are closed with ``stack``; blocking set-up runs in a worker thread.
    With ``spend``, each stage's calls are metered and capped; ``limiters`` builds the lanes' limiters
    (in memory by default).

    Raises:
        ConfigError: unknown names, missing files, an unset API key variable.
        InputError: a malformed evidence corpus line.
    """
    # Adapter modules pull in aiohttp, pysbd or bm25s (~0.1-0.2 s each): import them in a
    # worker thread so the event loop is never held by an import.
    modules = {settings.splitter, settings.checker}  # adapter names are their module names
    if "openai" in modules:
        modules.update(("http", "route"))
    if modules & {"evidence", "nli"} or (settings.checker == "openai" and settings.evidence is not None):
        modules.update(("corpus", "documents"))
    await anyio.to_thread.run_sync(
        lambda: [importlib.import_module(f"dahl.adapters._{m}") for m in sorted(modules)]
    )
    pool = LanePool(spend=spend, limiter_factory=limiters)
    opened: Connections | None = None

    async def endpoint(cfg: EndpointConfig) -> tuple[aiohttp.ClientSession, Lane]:
        nonlocal opened
        from dahl.adapters._endpoint import Connections  # aiohttp: imported above in a worker thread

        if opened is None:
            opened = Connections(stack, pool)
        return await opened.open(cfg)

    splitter: Splitter
    split_concurrency = 2
    if settings.splitter == "openai":
        from dahl.adapters._openai import OpenAISplitter

        assert settings.split_endpoint is not None  # checked in __post_init__
        session, lane = await endpoint(settings.split_endpoint)
        splitter = OpenAISplitter(settings.split_endpoint, session, lane, spend=pool.spend)
        split_concurrency = settings.split_endpoint.max_in_flight
    elif settings.splitter == "given":
        from dahl.adapters._given import GivenSplitter

        splitter = GivenSplitter()
    else:
        from dahl.adapters._rules import RuleSplitter

        splitter = RuleSplitter()

    checker: Checker
    check_concurrency = 8
    if settings.checker == "openai":
        from dahl.adapters._openai import OpenAIChecker

        assert settings.check_endpoint is not None  # checked in __post_init__
        session, lane = await endpoint(settings.check_endpoint)
        corpus = await _corpus(settings) if settings.evidence is not None else None
        checker = OpenAIChecker(settings.check_endpoint, session, lane, corpus=corpus, top_k=settings.top_k,
                                spend=pool.spend)
        check_concurrency = settings.check_endpoint.max_in_flight
    elif settings.checker == "replay":
        from dahl.adapters._replay import ReplayChecker

        checker = ReplayChecker()
    elif settings.checker == "fake":
        from dahl.adapters._fake import FakeChecker

        checker = FakeChecker()
    elif settings.checker == "nli":
        from dahl.adapters._nli import NLIChecker, NLIModel, read_folder

        assert settings.nli_model is not None  # checked in __post_init__
        path = settings.nli_model
        model = await anyio.to_thread.run_sync(lambda: NLIModel(read_folder(path)))
        checker = NLIChecker(await _corpus(settings), model, top_k=settings.top_k, threshold=settings.nli_threshold,
                             contradiction=settings.nli_contradiction)
    else:
        from dahl.adapters._evidence import EvidenceChecker

        checker = EvidenceChecker(await _corpus(settings))

    if settings.checker != "openai" and isinstance(checker, ConcurrencyHint):
        check_concurrency = checker.concurrency
    options = PipelineOptions(
        split_concurrency=split_concurrency,
        check_concurrency=check_concurrency,
        queue_size=max(256, 2 * check_concurrency),
        preprocess=settings.splitter != "given",
    )
    return splitter, checker, options, pool


async def _corpus(settings: AdapterSettings) -> Corpus:
    """Load (or read the saved index of) ``settings.evidence`` in a worker thread."""
    from dahl.adapters._documents import open_corpus

    assert settings.evidence is not None
    path, index_dir = settings.evidence, settings.index_dir
    return await anyio.to_thread.run_sync(lambda: open_corpus(path, index_dir=index_dir))


async def open_judge(
    name: str, endpoint: EndpointConfig | None, stack: AsyncExitStack, pool: LanePool
) -> CoverageJudge:
    """Construct the coverage judge ``name`` (:data:`dahl.adapters._coverage.COVERAGE_JUDGES`).

    Raises:
        ConfigError: unknown name; ``openai`` without an endpoint; an unset API key variable.
    """
    from dahl.adapters._coverage import COVERAGE_JUDGES, ExactJudge, LexicalJudge

    if name == "exact":
        return ExactJudge()
    if name == "lexical":
        return LexicalJudge()
    if name != "openai":
        raise ConfigError(f"unknown coverage judge {name!r}; choose one of {', '.join(COVERAGE_JUDGES)}")
    if endpoint is None:
        raise ConfigError("--coverage openai needs an endpoint: --base-url and --model (the Checker's with "
                          "--checker openai)")
    from dahl.adapters._coverage import OpenAICoverageJudge
    from dahl.adapters._endpoint import Connections

    session, lane = await Connections(stack, pool).open(endpoint)  # its own session
    return OpenAICoverageJudge(endpoint, session, lane, spend=pool.spend)


def used_templates(adapters: AdapterSettings, cover: EndpointConfig | None = None) -> list[dict[str, str]]:
    """The prompt template of each prompted stage of a run, for its summary and manifest.

    Returns:
        ``[{"stage", "version", "source"}]`` in pipeline order; ``source`` is ``"shipped"`` or
        ``"file"``; empty for an offline run.
    """
    from dahl.adapters import _prompts as prompts

    found = []
    if adapters.splitter == "openai" and adapters.split_endpoint is not None:
        found.append(adapters.split_endpoint.template(prompts.SPLIT_TEMPLATE))
    if adapters.checker == "openai" and adapters.check_endpoint is not None:
        shipped = prompts.CHECK_EVIDENCE_TEMPLATE if adapters.evidence is not None else prompts.CHECK_TEMPLATE
        found.append(adapters.check_endpoint.template(shipped))
    if cover is not None:
        from dahl.adapters._coverage import COVER_TEMPLATE

        found.append(cover.template(COVER_TEMPLATE))
    return [{"stage": t.stage, "version": t.version, "source": t.source} for t in found]
