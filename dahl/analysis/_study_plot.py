"""The temperature study's figure (DAHL paper Fig. 5): score against temperature per model,
with the bootstrap CI as a band. A PNG records the points it draws as JSON in its
``dahl:points`` text chunk (as :mod:`dahl.analysis._plots` does).

matplotlib is an optional extra (``pip install dahl[plot]``), imported only here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson

from dahl.errors import ConfigError
from dahl.analysis._plots import POINTS_KEY, _pyplot
from dahl.analysis._study import TemperatureStudy

__all__ = ["plot_temperature"]

logger = logging.getLogger(__name__)


def plot_temperature(study: TemperatureStudy, path: Path, *, dpi: int = 150) -> list[dict[str, Any]]:
    """Draw the mean score (percent) against temperature, one line per model, CI bands shaded.

    Args:
        study: from :func:`dahl.analysis._study.temperature_study`.
        path: output file (format from the suffix; ``.png`` also stores the points).
        dpi: resolution in dots per inch.

    Returns:
        The points drawn: ``{"model", "temperature", "mean", "ci"}`` per cell with a mean
        (fractions in [0, 1]), models sorted, temperatures ascending.

    Raises:
        ConfigError: no cell has a mean, or matplotlib is not installed.
    """
    points: list[dict[str, Any]] = [{"model": c.model, "temperature": c.temperature, "mean": c.mean,
        "ci": None if c.ci is None else [c.ci[0], c.ci[1]]} for c in study.cells if c.mean is not None]
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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {POINTS_KEY: orjson.dumps(points).decode()} if path.suffix.lower() == ".png" else None
    fig.savefig(path, dpi=dpi, metadata=metadata)
    plt.close(fig)
    logger.info("wrote %s", path)
    return points
