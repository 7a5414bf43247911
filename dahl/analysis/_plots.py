"""The figures: per-model scores with CI whiskers and a model × category heatmap, precision
against recall with ρ as marker size ("Beyond Precision"), and score against temperature (DAHL
paper Fig. 5). matplotlib (``pip install dahl[plot]``) is imported on first plot, Agg backend.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from dahl.analysis._leaderboard import Leaderboard, _pair
from dahl.analysis._study import TemperatureStudy
from dahl.errors import ConfigError

__all__ = [
    "POINTS_KEY", "RecallPoint", "board_points", "plot_leaderboard", "plot_precision_recall",
    "plot_temperature", "summary_points"
]

logger = logging.getLogger(__name__)

_LABELS = {
    "dahl_score": "DAHL Score",
    "factscore": "FActScore",
    "factscore_init": "FActScore (no length penalty)",
    "f1_at_k": "F1@K",
}
_RECALL_LABELS = {"recall": "Rec", "recall_w": "Rec^w"}
#: PNG text chunk holding the plotted points.
POINTS_KEY = "dahl:points"
# Marker area in points² of the model with the largest ρ.
_MAX_AREA = 900.0


@dataclass(frozen=True)
class RecallPoint:
    """One model in the precision–recall figure: ``precision`` (DAHL Score) and ``recall`` (mean Rec
    or Rec^w, per ``metric``) in [0, 1], and ``rho`` (ρ, mean claims per responding answer)."""

    model: str
    precision: float
    recall: float
    rho: float
    metric: str = "recall"


def _check_recall_metric(metric: str) -> None:
    if metric not in _RECALL_LABELS:
        raise ConfigError(f"the precision-recall plot draws recall or recall_w, not {metric!r}")


def board_points(board: Leaderboard, metric: str = "recall") -> list[RecallPoint]:
    """The points of ``board``'s models with a DAHL Score, ``metric`` (``recall``/``recall_w``) and ρ.

    Raises:
        ConfigError: another metric, or the board has no recall.
    """
    _check_recall_metric(metric)
    if not board.has_recall:
        raise ConfigError("the precision-recall plot needs runs scored with reference facts (dahl score --refs)")
    out = []
    for r in board.models:
        rec = r.recall if metric == "recall" else r.recall_w
        if r.dahl_score is not None and rec is not None and r.rho is not None:
            out.append(RecallPoint(r.model, r.dahl_score, rec, r.rho, metric))
    return out


def summary_points(summary: Mapping[str, Any], metric: str = "recall") -> list[RecallPoint]:
    """The points of a ``summary.json``: per model with all three, ``dahl_score``, ``recall[metric]``
    and ``recall.rho``, sorted by model.

    Raises:
        ConfigError: a metric other than ``recall``/``recall_w``.
    """
    _check_recall_metric(metric)
    out = []
    for name, block in sorted(summary.get("models", {}).items()):
        rec = block.get("recall") or {}
        if block.get("dahl_score") is not None and rec.get(metric) is not None and rec.get("rho") is not None:
            out.append(RecallPoint(name, float(block["dahl_score"]), float(rec[metric]), float(rec["rho"]), metric))
    return out


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plotting needs matplotlib: pip install 'dahl[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path, dpi: int, points: object = None) -> None:
    """Write ``fig`` to ``path`` and close it; a ``.png`` keeps ``points`` (JSON) under :data:`POINTS_KEY`."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    png = points is not None and path.suffix.lower() == ".png"
    fig.savefig(path, dpi=dpi, metadata={POINTS_KEY: orjson.dumps(points).decode()} if png else None)
    plt.close(fig)
    logger.info("wrote %s", path)


def plot_leaderboard(board: Leaderboard, path: Path, *, dpi: int = 150) -> Path:
    """Draw the leaderboard to ``path`` (format from the suffix; dots per inch ``dpi``) and return it.

    Left: the ranking metric per model (percent) with CI whiskers; right, with categories, a
    model × category heatmap.

    Raises:
        ConfigError: matplotlib is not installed.
    """
    plt = _pyplot()
    import numpy as np

    label = _LABELS.get(board.metric, board.metric)
    if board.metric == "f1_at_k":
        label = f"F1@{board.k}"
    rows = [r for r in board.models if r.score is not None]
    cats = list(board.categories)
    n_models = max(len(rows), 1)
    height = max(3.0, 0.45 * n_models + 1.5)
    if cats:
        fig, (ax, hx) = plt.subplots(
            1, 2, figsize=(6 + 0.55 * len(cats), height), gridspec_kw={"width_ratios": [1, max(1.2, 0.2 * len(cats))]}
        )
    else:
        fig, ax = plt.subplots(figsize=(7, height))
    y = np.arange(len(rows))[::-1]
    scores = np.array([100 * (r.score or 0.0) for r in rows])
    lo = np.array([100 * r.ci[0] if r.ci else 100 * (r.score or 0.0) for r in rows])
    hi = np.array([100 * r.ci[1] if r.ci else 100 * (r.score or 0.0) for r in rows])
    ax.barh(y, scores, color="#4C72B0", alpha=0.8, height=0.6)
    ax.errorbar(scores, y, xerr=[scores - lo, hi - scores], fmt="none", ecolor="black", capsize=4, lw=1.2)
    for yy, s in zip(y, scores):
        ax.text(1, yy, f"{s:.1f}", va="center", ha="left", color="white", fontsize=9, fontweight="bold")
    ax.set_yticks(y)
    ax.set_yticklabels([f"#{r.rank} {r.model}" for r in rows], fontsize=10)
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"{label} (%), {round(100 * board.level)}% bootstrap CI")
    ax.set_title(f"{label} by model")
    ax.grid(axis="x", alpha=0.3)
    if cats:
        models = [r.model for r in rows]
        grid = np.full((len(models), len(cats)), np.nan)
        for j, cat in enumerate(cats):
            for i, m in enumerate(models):
                cell = board.categories[cat].get(m)
                if cell is not None and cell.score is not None:
                    grid[i, j] = 100 * cell.score
        image = hx.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
        hx.set_xticks(np.arange(len(cats)))
        hx.set_xticklabels(cats, rotation=45, ha="right", fontsize=9)
        hx.set_yticks(np.arange(len(models)))
        hx.set_yticklabels(models, fontsize=10)
        if len(models) * len(cats) <= 400:
            for i in range(len(models)):
                for j in range(len(cats)):
                    if not np.isnan(grid[i, j]):
                        hx.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=8,
                                color="white" if grid[i, j] < 60 else "black")
        hx.set_title(f"{label} by category (%)")
        fig.colorbar(image, ax=hx, fraction=0.04, pad=0.02)
    _save(plt, fig, path, dpi)
    return path


def plot_precision_recall(points: Sequence[RecallPoint], path: Path, *, dpi: int = 150) -> list[RecallPoint]:
    """Draw precision (DAHL Score) against recall per model, marker area ∝ ρ (900 points² at most),
    and return the points; a ``.png`` keeps them as JSON under :data:`POINTS_KEY`.

    Raises:
        ConfigError: no point, or matplotlib is not installed.
    """
    if not points:
        raise ConfigError("no model has both a DAHL Score and a recall to plot")
    plt = _pyplot()
    import numpy as np

    metric = points[0].metric
    x = np.array([100 * p.recall for p in points])
    y = np.array([100 * p.precision for p in points])
    rho = np.array([p.rho for p in points])
    top = float(rho.max())
    sizes = _MAX_AREA * rho / top if top > 0 else np.full(rho.shape, _MAX_AREA / 4)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    ax.scatter(x, y, s=sizes, color="#4C72B0", alpha=0.6, edgecolors="black", linewidths=0.8)
    for p, xx, yy, area in zip(points, x, y, sizes):
        # Beside the marker, whose radius in points is sqrt(area)/2.
        ax.annotate(f"{p.model} (ρ {p.rho:.1f})", (xx, yy), xytext=(float(np.sqrt(area)) / 2 + 4, 0),
                    textcoords="offset points", va="center", fontsize=9)
    ax.plot([0, 100], [0, 100], color="grey", lw=0.8, ls="--")  # precision = recall
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel(f"{_RECALL_LABELS[metric]} (%)")
    ax.set_ylabel("DAHL Score, precision (%)")
    ax.set_title("Precision against recall; marker area ∝ ρ (claims per answer)")
    ax.grid(alpha=0.3)
    _save(plt, fig, path, dpi, [asdict(p) for p in points])
    return list(points)


def plot_temperature(study: TemperatureStudy, path: Path, *, dpi: int = 150) -> list[dict[str, Any]]:
    """Draw the mean score (percent) against temperature, one line per model, CI bands shaded.

    Returns:
        The points drawn (a ``.png`` keeps them under :data:`POINTS_KEY`): ``{"model", "temperature",
        "mean", "ci"}`` per cell with a mean (fractions), models sorted, temperatures ascending.

    Raises:
        ConfigError: no cell has a mean, or matplotlib is not installed.
    """
    points: list[dict[str, Any]] = [
        {"model": c.model, "temperature": c.temperature, "mean": c.mean, "ci": _pair(c.ci)}
        for c in study.cells if c.mean is not None
    ]
    if not points:
        raise ConfigError("no model has a score at any temperature to plot")
    plt = _pyplot()
    label = "DAHL Score" if study.metric == "precision" else study.metric
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for model in study.models:
        mine = [p for p in points if p["model"] == model]
        x = [p["temperature"] for p in mine]
        y = [100 * p["mean"] for p in mine]
        (line,) = ax.plot(x, y, marker="o", lw=1.6, label=model)
        lo = [100 * (p["ci"] or [p["mean"]] * 2)[0] for p in mine]
        hi = [100 * (p["ci"] or [p["mean"]] * 2)[1] for p in mine]
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.18, lw=0)
    temps = sorted({p["temperature"] for p in points})
    ax.set_xticks(temps)
    ax.set_xticklabels([f"{t:g}" for t in temps])
    ax.set_xlabel("temperature")
    ax.set_ylabel(f"{label} (%)")
    ax.set_title(f"{label} against temperature ({round(100 * study.level)}% bootstrap CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    _save(plt, fig, path, dpi, points)
    return points
