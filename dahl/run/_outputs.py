"""What a finished run writes beside ``answers.jsonl``: verdict columns, ``summary.json``, the manifest."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson

from dahl._version import __version__
from dahl.analysis._summary import (
    Changes,
    InputFile,
    QuestionSetSummary,
    RunConfig,
    RunSummary,
    Summary,
    SummaryBuilder,
    SummaryStatistics,
)
from dahl.analysis._verdicts import VerdictWriter
from dahl.errors import InputError
from dahl.lanes._spend import Spend
from dahl.records import ResultDigest
from dahl.results import _manifest as manifest
from dahl.results._counters import RunCounters
from dahl.results._index import InputIndex
from dahl.results._log import AnswerLog, writing

__all__ = ["Collected", "collect", "run_summary", "write_summary"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Collected:
    """The finished ``answers.jsonl`` read once.

    Attributes:
        builder: the summary's row counts (:class:`~dahl.analysis._summary.SummaryBuilder`).
        questions: the answers' question ids.
        n_input_answers: answers of this run's input (resumed ones included).
        kept: lines of answers.jsonl after the stale ones were dropped.
        dropped: stale or duplicate lines dropped.
    """

    builder: SummaryBuilder
    questions: manifest.QuestionSet
    n_input_answers: int
    kept: int
    dropped: int


async def collect(
    answer_log: AnswerLog, index: InputIndex, builder: SummaryBuilder, store: VerdictWriter
) -> Collected:
    """Finalize ``answers.jsonl`` (in input order, stale lines dropped) into the summary's builder and ``verdicts/``.

    Args:
        answer_log: the run's closed answers log.
        index: the answers of this input (their resume keys and input positions), cleared once read.
        builder: the summary's builder, empty (the run's γ, K, seed, n_boot, recall settings).
        store: the verdict store of the output folder, empty; written here.

    Raises:
        OutputWriteError: answers.jsonl or the verdict store cannot be written.
    """
    questions = manifest.QuestionSet()
    kept = [0]  # each line of answers.jsonl after finalize is consumed once

    def consume(result: ResultDigest) -> None:
        builder.add(result)
        store.add(result)
        questions.add((result.question_id or result.question,))
        kept[0] += 1

    n_input_answers = len(index)
    dropped = await anyio.to_thread.run_sync(answer_log.finalize, index, consume)
    await anyio.to_thread.run_sync(_close_verdicts, store)
    if dropped:
        log.info("dropped %d stale lines from %s", dropped, answer_log.path)
    return Collected(builder, questions, n_input_answers, kept[0], dropped)


async def run_summary(
    run_config: RunConfig,
    collected: Collected,
    counters: RunCounters,
    *,
    spend: Spend,
    cache_state: str,
    input_files: Future[list[dict[str, Any]]],
    input_errors: list[InputError],
    previous: dict[str, Any] | None,
    started_at: str,
    config_hash: str,
    shard: manifest.Shard | None = None,
) -> Summary:
    """The run's summary; its figures are computed in a thread.

    Args:
        run_config: the summary's ``config`` block.
        collected: the finished answers.
        counters: the run's counters (read now).
        spend: the run's money.
        cache_state: ``on``, ``off`` or ``disabled (why)``.
        input_files: the inputs' names, sizes and hashes (being read beside the run).
        input_errors: the first rejected input records.
        previous: the output folder's manifest before this run, None for a new folder.
        started_at: UTC start, ISO 8601.
        config_hash: hex blake2b-128 of the run fingerprint.
        shard: the shard the run scored, None: every answer.
    """
    figures = await anyio.to_thread.run_sync(collected.builder.build)
    question_set = collected.questions.as_dict()
    return Summary(
        models=figures.models,
        recall_settings=figures.recall_settings,
        run=RunSummary.of(counters, dahl_version=__version__, started_at=started_at, finished_at=manifest.now_utc(),
                          spend=spend, shard=shard),
        config=run_config,
        inputs=[InputFile(**f) for f in await anyio.to_thread.run_sync(input_files.result)],
        question_set=QuestionSetSummary(questions=question_set["questions"], blake2b=question_set["blake2b"]),
        input_errors=[manifest.json_text(str(e)) for e in input_errors],
        cache=cache_state,
        changes=Changes(
            previous_run=previous is not None or counters.answers_resumed > 0 or collected.dropped > 0,
            config_changed=previous is not None and previous.get("config_hash") != config_hash,
            answers_reused=counters.answers_resumed,
            answers_scored=counters.answers_done,
            answers_dropped=collected.dropped,
        ),
        statistics=SummaryStatistics(collected.builder, collected.questions),
    )


async def write_summary(
    summary: Summary, out_dir: Path, answer_log: AnswerLog, collected: Collected, config_hash: str
) -> Path:
    """Write ``summary.json`` (and a shard's :data:`~dahl.results._manifest.POSITIONS_NAME`), then the manifest
    that marks the folder complete.

    Returns:
        The path of summary.json.

    Raises:
        OutputWriteError: either file cannot be written (the previous one is kept).
    """
    summary_path = out_dir / "summary.json"
    await anyio.to_thread.run_sync(manifest.write_atomic, summary_path, summary.encode())
    shard = summary.run.shard
    if isinstance(shard, manifest.Shard):
        await anyio.to_thread.run_sync(manifest.write_atomic, out_dir / manifest.POSITIONS_NAME,
                                       answer_log.positions.astype("<i8").tobytes())
    plain = summary.as_builtins()
    record = {
        "state": manifest.COMPLETE,
        "dahl_version": summary.run.dahl_version,
        "started_at": summary.run.started_at,
        "finished_at": summary.run.finished_at,
        "config_hash": config_hash,
        "config": plain["config"],
        "inputs": plain["inputs"],
        "question_set": plain["question_set"],
        "answers": collected.n_input_answers,
        "claims": summary.n_claims,
    }
    if isinstance(shard, manifest.Shard):
        record["shard"] = plain["run"]["shard"]
    # Last: the manifest says "complete" only once the summary it vouches for is on disk.
    record["answers_file"] = await anyio.to_thread.run_sync(manifest.answers_file_state, answer_log.path,
                                                            collected.kept)
    await anyio.to_thread.run_sync(
        manifest.write_atomic, out_dir / manifest.MANIFEST_NAME, orjson.dumps(record, option=orjson.OPT_INDENT_2)
    )
    return summary_path


def _close_verdicts(store: VerdictWriter) -> None:
    """Write the verdict store; an OSError (disk full) becomes OutputWriteError naming it."""
    with writing(store.out_dir / "verdicts"):
        store.close()
