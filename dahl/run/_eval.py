"""``dahl eval``: the whole benchmark in one run, questions -> answers -> scores -> leaderboard.

Each step writes its own folder of OUT (``questions/``, ``answers/NAME.DIGEST.jsonl``,
``score/``, ``leaderboard/``) and resumes, so a re-run of a finished eval sends no request.
DIGEST (blake2b-48 hex) covers what the answer ids cover, not the server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import orjson

from dahl.results import _manifest as manifest
from dahl._version import __version__
from dahl.results._counters import RunCounters
from dahl.results._log import writing
from dahl.run._eval_config import EvalConfig, ModelSpec
from dahl.exit_status import ExitStatus
from dahl.generate._answers import generate_answers  # imports aiohttp, as dahl.run._score does
from dahl.generate._settings import GenerateCounters, GenerateReport, GenerateSettings
from dahl.generate._templates import GENERATE_TEMPLATES, Template, load_template
from dahl.run._score import ScoreConfig, score_async
from dahl.run._report import ScoreReport

__all__ = ["EvalReport", "GenerateRunner", "ScoreRunner", "answers_file", "run_eval"]

log = logging.getLogger(__name__)

#: Runs one model's generate step: ``(settings, counters) -> report`` (a progress display may wrap it).
GenerateRunner = Callable[[GenerateSettings, GenerateCounters], Awaitable[GenerateReport]]
#: Runs the score step: ``(config, counters) -> report``.
ScoreRunner = Callable[[ScoreConfig, RunCounters], Awaitable[ScoreReport]]

#: Bumped when the material of :func:`answers_file` or the leaderboard stamp changes.
EVAL_KEY_VERSION = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclasses.dataclass(frozen=True)
class EvalReport:
    """What one ``dahl eval`` produced.

    Attributes:
        config: the run's configuration.
        questions: the questions file answered (the sample, or the configured file).
        generated: each model's generate report, in config order.
        answers: each model's answers file.
        score: the score step's report; None when no answer was generated.
        board_files: the leaderboard files (Markdown, CSV, JSON, plots).
        board_markdown: the leaderboard as Markdown ("" without a score step).
        board_reused: the leaderboard was up to date and not recomputed.
        warnings: the leaderboard's warnings (runs that differ, ...).
    """

    config: EvalConfig
    questions: Path
    generated: dict[str, GenerateReport]
    answers: dict[str, Path]
    score: ScoreReport | None
    board_files: list[Path]
    board_markdown: str
    board_reused: bool
    warnings: list[str]

    @property
    def exit_status(self) -> ExitStatus:
        """As ``dahl score``: 5 when nothing was scored; 6 when an answer failed to generate
        or a record, split or claim failed in scoring; else 0."""
        if self.score is None or self.score.exit_status == ExitStatus.NOTHING_SCORED:
            return ExitStatus.NOTHING_SCORED
        if any(r.exit_status != ExitStatus.OK for r in self.generated.values()):
            return ExitStatus.PARTIAL
        return self.score.exit_status


def _model_files(out_dir: Path, model: ModelSpec, questions_sha256: str) -> tuple[Path, Template | None]:
    """The model's answers file (its folder created) and template (blocking).

    Raises:
        ConfigError: the model's template file cannot be read.
    """
    template = load_template(model.template) if model.template is not None else None
    path = answers_file(out_dir, model, questions_sha256, template)
    with writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    return path, template


def answers_file(out_dir: Path, model: ModelSpec, questions_sha256: str, template: Template | None = None) -> Path:
    """The answers file of ``model`` in ``out_dir/answers`` (``NAME.DIGEST.jsonl``).

    Args:
        out_dir: OUT.
        model: the model and its generation settings.
        questions_sha256: hex SHA-256 of the questions file's bytes.
        template: the model's template; None: the shipped one of its mode.
    """
    template = template or GENERATE_TEMPLATES[model.mode]
    cfg = model.endpoint
    material = [EVAL_KEY_VERSION, questions_sha256, cfg.model, model.mode, template.version, cfg.temperature,
                cfg.max_tokens, cfg.seed, model.top_p, list(model.stop), model.samples]
    digest = hashlib.blake2b(orjson.dumps(material), digest_size=6).hexdigest()
    name = _UNSAFE.sub("_", cfg.model).strip("._") or "model"
    return out_dir / "answers" / f"{name}.{digest}.jsonl"


def _questions_step(config: EvalConfig) -> tuple[Path, str]:
    """The questions file to answer and the SHA-256 of its bytes (blocking)."""
    from dahl.analysis._sampling import sample_file

    spec = config.questions
    if spec.fraction is None:
        path = spec.file
        data = path.read_bytes()
    else:
        data, per = sample_file(spec.file, None, fraction=spec.fraction, stratify=spec.stratify, seed=spec.seed)
        path = config.out_dir / "questions" / f"questions{spec.file.suffix.lower()}"
        if not path.is_file() or path.read_bytes() != data:
            with writing(path):
                path.parent.mkdir(parents=True, exist_ok=True)
                manifest.write_atomic(path, data)
        log.info("eval: %d of %d questions sampled to %s", sum(m for _, m in per.values()),
                 sum(n for n, _ in per.values()), path)
    return path, hashlib.sha256(data).hexdigest()


def _has_answers(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def _board_stamp(config: EvalConfig) -> bytes:
    """What the leaderboard is computed from: the score run's manifest (without its times) and the settings."""
    record = manifest.read_manifest(config.out_dir / "score") or {}
    record = {k: v for k, v in record.items() if k not in ("started_at", "finished_at")}
    material = {"version": EVAL_KEY_VERSION, "dahl": __version__, "score": record,
                "leaderboard": dataclasses.asdict(config.leaderboard), "recall": config.recall is not None}
    return orjson.dumps(material, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)


def _board_paths(config: EvalConfig) -> list[Path]:
    folder = config.out_dir / "leaderboard"
    names = ["board.md", "board.csv", "board.json", "board.png"]
    if config.recall is not None:
        names.append("precision_recall.png")
    return [folder / name for name in names]


def _leaderboard_step(config: EvalConfig) -> tuple[list[Path], str, bool, list[str]]:
    """Write the leaderboard files unless they are up to date (blocking).

    Returns:
        ``(files, markdown, reused, warnings)``.
    """
    from dahl.analysis._leaderboard import build_leaderboard, to_csv, to_json, to_markdown
    from dahl.analysis._plots import board_points, plot_leaderboard, plot_precision_recall
    from dahl.analysis._runs import check_runs
    from dahl.analysis._verdicts import load_runs

    files = _board_paths(config)
    stamp_path = config.out_dir / "leaderboard" / "stamp.json"
    stamp = _board_stamp(config)
    if stamp_path.is_file() and stamp_path.read_bytes() == stamp and all(p.is_file() for p in files):
        return files, files[0].read_text(encoding="utf-8"), True, []
    score_dir = config.out_dir / "score"
    infos, warnings = check_runs([score_dir])
    spec = config.leaderboard
    board = build_leaderboard(load_runs([score_dir]), metric=spec.metric, seed=spec.seed, n_boot=spec.n_boot,
                              by_category=spec.by_category, compare=spec.compare,
                              checkers=[info.checker for info in infos])
    markdown = to_markdown(board)
    md, csv, js, png = files[:4]
    with writing(md):
        md.parent.mkdir(parents=True, exist_ok=True)
        stamp_path.unlink(missing_ok=True)  # until every file is rewritten, the folder is not up to date
        manifest.write_atomic(md, markdown.encode("utf-8"))
        manifest.write_atomic(csv, to_csv(board).encode("utf-8"))
        manifest.write_atomic(js, orjson.dumps(to_json(board), option=orjson.OPT_INDENT_2) + b"\n")
    plot_leaderboard(board, png)
    if config.recall is not None:
        weighted = spec.metric in ("recall_w", "f1_w")
        plot_precision_recall(board_points(board, "recall_w" if weighted else "recall"), files[4])
    with writing(stamp_path):
        manifest.write_atomic(stamp_path, stamp)
    return files, markdown, False, warnings


async def _generate(settings: GenerateSettings, counters: GenerateCounters) -> GenerateReport:
    return await generate_answers(settings, counters)


async def _score(config: ScoreConfig, counters: RunCounters) -> ScoreReport:
    return await score_async(config, counters=counters)


async def run_eval(
    config: EvalConfig,
    *,
    generate_runner: GenerateRunner | None = None,
    score_runner: ScoreRunner | None = None,
) -> EvalReport:
    """Run every step of ``config``, resuming what is finished.

    Args:
        config: the eval, from :func:`dahl.run._eval_config.load_eval_config`.
        generate_runner: runs one model's generate step (default
            :func:`~dahl.generate._answers.generate_answers`).
        score_runner: runs the score step (default :func:`~dahl.run._score.score_async`).

    Returns:
        The report; every step's files are on disk.

    Raises:
        ConfigError: an unset API key variable, a bad template or corpus.
        InputError: a bad questions record (file, line, field named).
        OutputWriteError: an output file cannot be written (finished work is kept).
        QuotaExhausted, FatalAPIError: an API stopped the run (finished work is kept).
    """
    generate_runner = generate_runner or _generate
    score_runner = score_runner or _score
    questions, questions_sha = await anyio.to_thread.run_sync(_questions_step, config)
    generated: dict[str, GenerateReport] = {}
    answers: dict[str, Path] = {}
    for model in config.models:
        path, template = await anyio.to_thread.run_sync(_model_files, config.out_dir, model, questions_sha)
        settings = GenerateSettings(
            questions=questions, out=path, endpoints=(model.endpoint,), mode=model.mode, top_p=model.top_p,
            stop=model.stop, samples=model.samples, template=template, cache_dir=config.cache_dir,
            use_cache=config.use_cache,
        )
        log.info("eval: generating with %s into %s", model.name, path)
        generated[model.name] = await generate_runner(settings, GenerateCounters())
        answers[model.name] = path
    inputs = [p for p in answers.values() if await anyio.to_thread.run_sync(_has_answers, p)]
    if not inputs:
        return EvalReport(config, questions, generated, answers, None, [], "", False, [])
    score_config = await anyio.to_thread.run_sync(lambda: ScoreConfig(  # checks the input files: off the loop
        inputs=tuple(inputs), out_dir=config.out_dir / "score", fmt="jsonl", adapters=config.adapters,
        gamma=config.gamma, k=config.k, seed=config.leaderboard.seed, n_boot=config.leaderboard.n_boot,
        cache_dir=config.cache_dir, use_cache=config.use_cache, recall=config.recall,
    ))
    score = await score_runner(score_config, RunCounters())
    files, markdown, reused, warnings = await anyio.to_thread.run_sync(_leaderboard_step, config)
    return EvalReport(config, questions, generated, answers, score, files, markdown, reused, warnings)

