"""Leaderboard figure: per-model scores with CI whiskers and a model × category heatmap.

matplotlib is an optional extra (``pip install dahl[plot]``); it is imported
only when a plot is drawn, with the Agg backend (no display needed).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from dahl.errors import ConfigError
from dahl.leaderboard import Leaderboard

__all__ = ["plot_leaderboard"]

logger = logging.getLogger(__name__)

_LABELS = {
    "dahl_score": "DAHL Score",
    "factscore": "FActScore",
    "factscore_init": "FActScore (no length penalty)",
    "f1_at_k": "F1@K",
}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plotting needs matplotlib: pip install 'dahl[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_leaderboard(board: Leaderboard, path: Path, *, dpi: int = 150) -> Path:
    """Draw the leaderboard to a PNG (or any format matplotlib infers from the suffix).

    Left panel: the ranking metric per model in percent, best at the top, with
    the bootstrap CI as whiskers and the rank in the label. Right panel (when
    the board has categories): models × categories heatmap of the metric in
    percent, with values written in the cells when the grid is small enough.

    Args:
        board: a computed leaderboard.
        path: output file.
        dpi: resolution in dots per inch.

    Returns:
        ``path``.

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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    logger.info("wrote %s", path)
    return path
