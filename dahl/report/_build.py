"""``dahl report``: write the static site of one or more scored runs.

Layout of the output folder::

    index.html          leaderboard (rendered here: readable and printable without scripts)
    explorer.html       answer explorer (filled by static/explorer.js from data/)
    static/             report.css, leaderboard.js, explorer.js, theme.js (shipped in the package)
    data/index.js       one compact row per answer (see :mod:`dahl.report._answers`)
    data/answers-NNN.js the answers themselves, loaded on demand

Pages are rendered with Jinja2 (autoescaping on); no file refers to the network.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from dahl.analysis._paired_bootstrap import format_p as _p_value
from dahl.report._answers import write_answer_data
from dahl.results._log import writing

__all__ = ["ReportSite", "build_report"]

#: Board metric -> column heading (recall ones only when the runs were scored with reference facts).
_METRICS = {"dahl_score": "DAHL Score", "factscore": "FActScore", "factscore_init": "FActScore (no γ)",
            "f1_at_k": "F1@K"}
_RECALL_METRICS = {"recall": "Recall", "recall_w": "Recall (w)", "f1": "mean F1", "f1_w": "F1 (w)"}
_STATIC = ("report.css", "theme.js", "leaderboard.js", "explorer.js")


@dataclass(frozen=True)
class ReportSite:
    """What :func:`build_report` wrote.

    Attributes:
        out_dir: the site folder; open ``out_dir / "index.html"``.
        n_answers, n_claims: answers and claims in the explorer.
        n_chunks: answer data files (``data/answers-NNN.js``).
        warnings: why the runs may not be comparable (shown as the page's banner).
        size_bytes: bytes of all files of the site.
    """

    out_dir: Path
    n_answers: int
    n_claims: int
    n_chunks: int
    warnings: tuple[str, ...]
    size_bytes: int


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _count(n: int) -> str:
    """A count with thousands separators: ``11,815``."""
    return f"{n:,}"




def _rows(board: dict[str, Any], metrics: dict[str, str], parts: dict[str, tuple[str | None, str | None]],
          label: Callable[[str | None], str]) -> list[dict[str, Any]]:
    """Board rows for the page; ``parts``: model -> (Splitter, Checker) fingerprints, ``label`` shortens one."""
    rows = []
    for m in board["models"]:
        ci = m.get("dahl_score_ci")
        splitter, checker = parts.get(m["model"], (None, None))
        checker = m.get("checker") or checker
        rows.append({
            "model": m["model"], "rank": m["rank"],
            "cells": [(k, m.get(k), _pct(m.get(k))) for k in metrics],
            "ci": ci, "ci_text": "—" if ci is None else f"{_pct(ci[0])}–{_pct(ci[1])}",
            "n_scored": m["n_scored"], "n_excluded": m["n_excluded"],
            "excluded": ", ".join(f"{k} {v}" for k, v in m["excluded_by_reason"].items() if v) or "none",
            "splitter": label(splitter), "splitter_fp": splitter or "not recorded",
            "checker": label(checker), "checker_fp": checker or "not recorded",
        })
    return rows


def _heatmap(board: dict[str, Any]) -> dict[str, Any]:
    models = [m["model"] for m in board["models"]]
    cells = []
    for cat, by_model in sorted(board["categories"].items()):
        row = []
        for model in models:
            c = by_model.get(model)
            score = None if c is None else c["score"]
            row.append({"score": score, "text": _pct(score), "n": 0 if c is None else c["n_scored"],
                        "shade": None if score is None else round(score, 3)})
        cells.append({"category": cat, "cells": row})
    return {"models": models, "rows": cells}


def build_report(
    run_dirs: Sequence[Path],
    out_dir: Path,
    *,
    metric: str = "dahl_score",
    seed: int = 0,
    n_boot: int = 1000,
    allow_stale: bool = False,
    strict: bool = False,
    chunk_size: int = 250,
) -> ReportSite:
    """Write the report site of ``run_dirs`` into ``out_dir`` (blocking: reads runs, bootstraps, writes files).

    Args:
        run_dirs: run folders written by ``dahl score`` (``answers.jsonl``, ``summary.json``, ``verdicts/``).
        out_dir: site folder (created; files of an earlier report are replaced).
        metric: the board metric that ranks models first (see :data:`dahl.analysis._leaderboard.BOARD_METRICS`);
            the page can re-sort by any column.
        seed, n_boot: bootstrap seed and resamples of the CIs (as ``dahl leaderboard``).
        allow_stale, strict: as ``dahl leaderboard`` (:func:`dahl.analysis._runs.check_runs`).
        chunk_size: answers per data chunk.

    Returns:
        A :class:`ReportSite` describing what was written.

    Raises:
        ConfigError: a stale run (without ``allow_stale``), runs that differ under ``strict``, a bad metric.
        InputError: a run without a verdict store or with an unreadable ``answers.jsonl``.
        OutputWriteError: a file of the site cannot be written.
    """
    from dahl.analysis._leaderboard import build_leaderboard, to_json
    from dahl.analysis._runs import check_runs, checker_label
    from dahl.analysis._verdicts import load_runs

    infos, warnings = check_runs(run_dirs, allow_stale=allow_stale, strict=strict)
    store = load_runs(run_dirs)
    board_obj = build_leaderboard(store, metric=metric, seed=seed, n_boot=n_boot, by_category=True,
                                  checkers=[info.checker for info in infos])
    board = to_json(board_obj)
    out_dir = Path(out_dir)
    data = write_answer_data(run_dirs, out_dir / "data", chunk_size=chunk_size)
    parts = {model: (info.splitter, info.checker) for info, models in zip(infos, data.models_by_run) for model in models}
    metrics = dict(_METRICS, **(_RECALL_METRICS if board_obj.has_recall else {}))
    env = jinja2.Environment(loader=jinja2.PackageLoader("dahl.report", "templates"),
                             autoescape=jinja2.select_autoescape(default=True), undefined=jinja2.StrictUndefined)
    env.filters.update(count=_count, p_value=_p_value)
    common = {"warnings": warnings, "n_answers": data.n_answers, "n_claims": data.n_claims,
              "runs": [str(p) for p in run_dirs]}
    pages = {
        "index.html": env.get_template("leaderboard.html").render(
            **common, metrics=metrics, sort_metric=metric, rows=_rows(board, metrics, parts, checker_label),
            heatmap=_heatmap(board), comparisons=board["comparisons"], level=board["settings"]["level"],
            n_boot=board["settings"]["n_boot"]),
        "explorer.html": env.get_template("explorer.html").render(**common),
    }
    static = out_dir / "static"
    with writing(static):
        static.mkdir(parents=True, exist_ok=True)
        for name in _STATIC:
            with resources.as_file(resources.files("dahl.report") / "static" / name) as src:
                shutil.copyfile(src, static / name)
        for name, html in pages.items():
            (out_dir / name).write_text(html, encoding="utf-8")
    size = sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file())
    return ReportSite(out_dir, data.n_answers, data.n_claims, data.n_chunks, tuple(warnings), size)
