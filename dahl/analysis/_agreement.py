"""Agreement between two sets of per-answer scores (two runs, or a run and human labels).

Statistics (:func:`agreement`), all two-sided: Pearson r and Spearman rho with their p-values;
the paired t-test of mean(A − B) = 0 (Student 1908) and its interval d̄ ± t_{1−α/2, n−1}·s_d/√n;
the F-test of equal variances F = s²_A / s²_B, (n − 1, n − 1) degrees of freedom,
p = 2·min(P(F' ≤ F), P(F' ≥ F)), as the DAHL paper used it (§4.3, §5.2; it assumes independent
samples, so it is descriptive here), also on claim counts (``n_claims``) to validate a Splitter (§3.2).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from dahl.errors import ConfigError, InputError
from dahl.analysis._verdicts import load_verdicts
from dahl.formats._rows import jsonl_rows

__all__ = ["Agreement", "agreement", "join_scores", "load_scores"]


@dataclass(frozen=True)
class Agreement:
    """Agreement statistics of paired scores A and B; None where undefined (n too small, zero variance).

    Attributes:
        mean_a, mean_b, var_a, var_b: sample means and variances (ddof = 1) of the n pairs.
        pearson_r, pearson_p, spearman_rho, spearman_p: the correlations and their p-values.
        t_stat, t_p, t_df: paired t-test of mean(A − B) = 0.
        f_stat, f_p, f_df: F = var_a / var_b, two-sided p, degrees of freedom (n−1, n−1).
        mean_diff, mean_diff_ci: mean(A − B) and its t-based interval.
        level: interval coverage.
    """

    n: int
    mean_a: float
    mean_b: float
    var_a: float | None
    var_b: float | None
    pearson_r: float | None
    pearson_p: float | None
    spearman_rho: float | None
    spearman_p: float | None
    t_stat: float | None
    t_p: float | None
    t_df: int
    f_stat: float | None
    f_p: float | None
    f_df: tuple[int, int]
    mean_diff: float
    mean_diff_ci: tuple[float, float] | None
    level: float


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def agreement(a: npt.ArrayLike, b: npt.ArrayLike, *, level: float = 0.95) -> Agreement:
    """Every agreement statistic of paired float arrays ``a``, ``b`` (n,), n >= 2.

    Raises:
        ConfigError: fewer than 2 pairs, different lengths, or level outside (0, 1).
    """
    from scipy import stats  # type: ignore[import-untyped]  # lazy: ~1 s to import

    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ConfigError(f"paired scores need equal 1-D shapes, got {x.shape} and {y.shape}")
    n = int(x.size)
    if n < 2:
        raise ConfigError(f"need at least 2 paired answers, got {n}")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level}")
    var_a, var_b = float(x.var(ddof=1)), float(y.var(ddof=1))
    d = x - y
    var_d = float(d.var(ddof=1))
    both_vary = var_a > 0 and var_b > 0
    pearson_r = pearson_p = spearman_rho = spearman_p = None
    if both_vary:
        pr = stats.pearsonr(x, y)
        pearson_r, pearson_p = _finite(pr.statistic), _finite(pr.pvalue)
        sr = stats.spearmanr(x, y)
        spearman_rho, spearman_p = _finite(sr.statistic), _finite(sr.pvalue)
    t_stat = t_p = None
    ci = None
    mean_d = float(d.mean())
    if var_d > 0:
        se = math.sqrt(var_d / n)
        t_stat = mean_d / se
        t_p = float(2.0 * stats.t.sf(abs(t_stat), n - 1))
        half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * se
        ci = (mean_d - half, mean_d + half)
    f_stat = f_p = None
    if both_vary:
        f_stat = var_a / var_b
        f_p = float(min(1.0, 2.0 * min(stats.f.cdf(f_stat, n - 1, n - 1), stats.f.sf(f_stat, n - 1, n - 1))))
    return Agreement(
        n=n,
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        var_a=var_a,
        var_b=var_b,
        pearson_r=pearson_r,
        pearson_p=pearson_p,
        spearman_rho=spearman_rho,
        spearman_p=spearman_p,
        t_stat=t_stat,
        t_p=t_p,
        t_df=n - 1,
        f_stat=f_stat,
        f_p=f_p,
        f_df=(n - 1, n - 1),
        mean_diff=mean_d,
        mean_diff_ci=ci,
        level=level,
    )


def _score(value: object, path: Path, line: int, score_field: str) -> float:
    if isinstance(value, bool) or value is None:
        raise InputError("score must be a number", file=str(path), line=line, field=score_field)
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"score {value!r} is not a number", file=str(path), line=line, field=score_field) from None
    if not math.isfinite(out):
        raise InputError(f"score {value!r} is not finite", file=str(path), line=line, field=score_field)
    return out


def load_scores(
    source: Path,
    *,
    metric: str = "precision",
    gamma: float | None = None,
    k: int | None = None,
    id_field: str = "id",
    score_field: str = "score",
) -> dict[str, float]:
    """Per-answer scores keyed by answer id.

    Args:
        source: a run folder, or a ``.jsonl`` or ``.csv`` (with a header) file of records
            holding ``id_field`` and ``score_field``.
        metric, gamma, k: the per-answer metric of a run folder (:meth:`Verdicts.scores`).

    Returns id -> score (a run's answers outside the metric's mask are absent).

    Raises:
        InputError: missing file or store, a line that is not a JSON object, a record
            without id or with a non-numeric score, or a duplicate id.
        ConfigError: unknown metric.
    """
    source = Path(source)
    if source.is_dir():
        store = load_verdicts(source)
        values, mask = store.scores(metric, gamma=gamma, k=k)
        ids = store.ids
        rows = np.flatnonzero(mask).tolist()
        return {ids[r]: float(values[r]) for r in rows}
    if not source.is_file():
        raise InputError("no such run folder or score file", file=str(source))
    out: dict[str, float] = {}

    def put(line: int, rec: dict[str, object]) -> None:
        if id_field not in rec or rec[id_field] in (None, ""):
            raise InputError("record has no id", file=str(source), line=line, field=id_field)
        key = str(rec[id_field])
        if key in out:
            raise InputError(f"duplicate id {key!r}", file=str(source), line=line, field=id_field)
        out[key] = _score(rec.get(score_field), source, line, score_field)

    if source.suffix.lower() == ".csv":
        with source.open(newline="", encoding="utf-8") as f:
            for line, row in enumerate(csv.DictReader(f), start=2):
                put(line, dict(row))
    else:
        for line, rec in jsonl_rows(source, on_error=None):
            put(line, rec)
    return out


def join_scores(
    a: dict[str, float], b: dict[str, float]
) -> tuple[list[str], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Inner join on id: ``(ids, values_a, values_b)``, ids sorted, arrays of shape (n,)."""
    ids = sorted(a.keys() & b.keys())
    return ids, np.array([a[i] for i in ids], dtype=np.float64), np.array([b[i] for i in ids], dtype=np.float64)
