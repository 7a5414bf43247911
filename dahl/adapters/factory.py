"""Build the run's Splitter and Checker from their names and settings."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio

from dahl.adapters.base import Checker, Splitter
from dahl.engine.pipeline import PipelineOptions
from dahl.errors import ConfigError

__all__ = ["CHECKERS", "SPLITTERS", "AdapterSettings", "open_adapters"]

SPLITTERS = ("rules", "given")
CHECKERS = ("evidence", "replay", "fake")


@dataclass(frozen=True)
class AdapterSettings:
    """Which Splitter and Checker a run uses.

    Attributes:
        splitter: one of :data:`SPLITTERS`.
        checker: one of :data:`CHECKERS`.
        evidence: JSONL corpus ``{id, title?, text}`` for the evidence Checker.
    """

    splitter: str = "rules"
    checker: str = "evidence"
    evidence: Path | None = None

    def __post_init__(self) -> None:
        if self.splitter not in SPLITTERS:
            raise ConfigError(f"unknown splitter {self.splitter!r}; choose one of {', '.join(SPLITTERS)}")
        if self.checker not in CHECKERS:
            raise ConfigError(f"unknown checker {self.checker!r}; choose one of {', '.join(CHECKERS)}")
        if self.checker == "evidence":
            if self.evidence is None:
                raise ConfigError("--checker evidence needs --evidence CORPUS.jsonl")
            if not self.evidence.is_file():
                raise ConfigError(f"evidence file not found: {self.evidence}")


async def open_adapters(
    settings: AdapterSettings, stack: AsyncExitStack
) -> tuple[Splitter, Checker, PipelineOptions]:
    """Construct the Splitter and Checker, and pipeline options that suit them.

    Resources (HTTP sessions) are registered on ``stack`` and closed with it.
    Blocking set-up (loading and indexing a corpus) runs in a worker thread.

    Raises:
        ConfigError: unknown names or missing files.
        InputError: a malformed evidence corpus line.
    """
    splitter: Splitter
    if settings.splitter == "given":
        from dahl.adapters.given import GivenSplitter

        splitter = GivenSplitter()
    else:
        from dahl.adapters.rules import RuleSplitter

        splitter = RuleSplitter()

    checker: Checker
    if settings.checker == "replay":
        from dahl.adapters.replay import ReplayChecker

        checker = ReplayChecker()
    elif settings.checker == "fake":
        from dahl.adapters.fake import FakeChecker

        checker = FakeChecker()
    else:
        from dahl.adapters.corpus import load_corpus
        from dahl.adapters.evidence import EvidenceChecker

        assert settings.evidence is not None  # checked in __post_init__
        corpus = await anyio.to_thread.run_sync(load_corpus, settings.evidence)
        checker = EvidenceChecker(corpus)

    options = PipelineOptions(
        split_concurrency=2,
        check_concurrency=int(getattr(checker, "concurrency", 8)),
        preprocess=settings.splitter != "given",
    )
    return splitter, checker, options
