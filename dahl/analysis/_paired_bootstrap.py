"""Paired bootstrap of mean differences between two systems over shared questions."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dahl.errors import ConfigError
from dahl.metrics._precision import _DRAW_BUDGET, MAX_N_BOOT

__all__ = ["MIN_SHARED_QUESTIONS", "format_p", "joint_paired_bootstrap"]

#: Fewest shared questions a paired comparison needs before it reports a p-value.
MIN_SHARED_QUESTIONS = 10


def format_p(p: float | None, n_shared: int | None = None) -> str:
    """A p-value for a table cell: ``< 0.001`` below 0.001, else three decimals.

    Without a p: ``too few shared questions (n < MIN_SHARED_QUESTIONS)`` when ``n_shared`` (the
    comparison's shared questions) is below :data:`MIN_SHARED_QUESTIONS`, else ``—``.
    """
    if p is None:
        if n_shared is not None and n_shared < MIN_SHARED_QUESTIONS:
            return f"too few shared questions ({n_shared} < {MIN_SHARED_QUESTIONS})"
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def joint_paired_bootstrap(
    diffs: npt.ArrayLike,
    shared: npt.ArrayLike,
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    level: float = 0.95,
) -> list[tuple[float, tuple[float, float], float | None] | None]:
    """Paired bootstrap of several comparisons at once, resampling questions jointly.

    Each resample draws the questions with replacement; comparison j's mean is over the drawn
    questions it has (``shared``) (the paired bootstrap over a test set: Koehn 2004;
    Berg-Kirkpatrick et al. 2012). CI: percentile. p = (1 + #{|m*_b − d̄| ≥ |d̄|}) / (B' + 1) over
    the B' resamples where the comparison has a question (Efron & Tibshirani 1993, §16.4, data
    shifted to mean 0; the +1 of Davison & Hinkley 1997, eq. 4.11).

    Args:
        diffs: float array (n_q, n_comparisons) of per-question A − B (any value where not shared).
        shared: bool array (n_q, n_comparisons): the question counts for that comparison.
        rng, n_boot, level: seeded generator, resamples and CI coverage.

    Returns:
        Per comparison ``(mean, (lo, hi), p_value)``, or None when it shares no question;
        ``p_value`` is None when it shares fewer than :data:`MIN_SHARED_QUESTIONS` questions.

    Raises:
        ConfigError: shapes differ, n_boot < 1 or level outside (0, 1).
    """
    s = np.asarray(shared, dtype=bool)
    d = np.where(s, np.asarray(diffs, dtype=np.float64), 0.0)
    if d.ndim != 2 or d.shape != s.shape:
        raise ConfigError(f"diffs and shared need the same 2-D shape, got {d.shape} and {s.shape}")
    if n_boot < 1 or not 0.0 < level < 1.0:
        raise ConfigError("n_boot must be >= 1 and level in (0, 1)")
    if n_boot > MAX_N_BOOT:
        raise ConfigError(f"n_boot must be at most {MAX_N_BOOT:,}, got {n_boot:,}")
    # Questions no comparison uses carry no weight in any mean; resample only the others.
    used = s.any(axis=1)
    d, s = d[used], s[used]
    n_q, n_c = d.shape
    out: list[tuple[float, tuple[float, float], float | None] | None] = [None] * n_c
    if n_q == 0:
        return out
    n_shared = s.sum(axis=0)
    observed = d.sum(axis=0) / np.maximum(n_shared, 1)
    weights = np.concatenate([d, s.astype(np.float64)], axis=1)
    means = np.empty((n_boot, n_c))
    chunk = max(1, _DRAW_BUDGET // n_q)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        rows = stop - start
        idx = rng.integers(0, n_q, size=(rows, n_q))
        idx += np.arange(rows)[:, np.newaxis] * n_q
        counts = np.bincount(idx.ravel(), minlength=rows * n_q).reshape(rows, n_q).astype(np.float64)
        sums = counts @ weights
        with np.errstate(invalid="ignore", divide="ignore"):
            means[start:stop] = sums[:, :n_c] / sums[:, n_c:]
    tail = (1.0 - level) / 2.0
    for j in range(n_c):
        if n_shared[j] == 0:
            continue
        m = means[:, j]
        m = m[np.isfinite(m)]
        mean = float(observed[j])
        lo, hi = np.quantile(m, [tail, 1.0 - tail])
        # Tolerance: resample means equal to the observed mean up to rounding count as extreme.
        extreme = int((np.abs(m - mean) >= abs(mean) - 1e-12).sum())
        # A few shared questions give a resampling distribution too coarse for a p.
        p = min(1.0, (1.0 + extreme) / (m.size + 1.0)) if n_shared[j] >= MIN_SHARED_QUESTIONS else None
        out[j] = (mean, (float(lo), float(hi)), p)
    return out

