"""Metric formulas over per-answer label counts.

``counts`` is an integer array (n_answers, 5) in :data:`dahl.records.LABELS` order (supported S,
unsupported U, irrelevant I, unknown N, error E); ``eligible`` a bool array (n_answers,), True
for answers that responded (not abstained, split without error). Definitions (docs/scoring.md):

* factual precision = S / (S + U) (DAHL paper, Seo et al. 2024, §3.3);
* DAHL Score = mean precision over answers whose every claim got a clean
  verdict, irrelevant claims counting in neither S nor U;
* FActScore = S / (S + U + I), times exp(1 - γ/|A|) when |A| < γ
  (Min et al. 2023, §3 and the length penalty of their released scorer);
* F1@K = 2PR / (P + R) with P = S / (S + U), R = min(S / K, 1), 0 if S = 0
  (SAFE, Wei et al. 2024, §5).

Empty sets give None, never NaN.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from dahl.errors import ConfigError, InputError
from dahl.records import LABELS, AnswerMetrics, Label, Status

__all__ = [
    "MAX_N_BOOT",
    "REASONS",
    "answer_metrics",
    "answer_status",
    "as_counts",
    "bootstrap_ci",
    "dahl_mask",
    "dahl_score",
    "exclusion_codes",
    "f1_at_k",
    "f1_values",
    "factscore",
    "factscore_mask",
    "factscore_values",
    "group_seed",
    "precision",
    "sorted_mean",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Why an answer is not scored. Code ``i + 1`` in :func:`exclusion_codes` is ``REASONS[i]``; 0 is scored.
REASONS: tuple[str, ...] = (
    "abstained",
    "no_claims",
    "only_irrelevant",
    "unknown_claims",
    "error_claims",
    "split_error",
)

_S = LABELS.index(Label.SUPPORTED)
_U = LABELS.index(Label.UNSUPPORTED)
_I = LABELS.index(Label.IRRELEVANT)
_N = LABELS.index(Label.UNKNOWN)
_E = LABELS.index(Label.ERROR)

# Largest number of random draws held in memory at once by bootstrap_ci.
_DRAW_BUDGET = 4_000_000
#: Most bootstrap resamples (each one's mean is kept).
MAX_N_BOOT = 10_000_000


def as_counts(counts: Mapping[str, int] | npt.ArrayLike) -> npt.NDArray[np.int64]:
    """One answer's label counts as an int64 array (5,) in LABELS order.

    ``counts``: label name (``"supported"``, ...) -> count (missing: 0), or 5 counts in LABELS order.

    Raises:
        InputError: unknown label name, wrong length, non-integer or negative count.
    """
    if isinstance(counts, Mapping):
        row = np.zeros(len(LABELS), dtype=np.int64)
        for key, value in counts.items():
            try:
                col = LABELS.index(Label(key))
            except ValueError:
                raise InputError(f"unknown label {key!r}", field="counts") from None
            row[col] = int(value)
    else:
        arr = np.asarray(counts)
        if arr.shape != (len(LABELS),) or not np.issubdtype(arr.dtype, np.integer):
            raise InputError(
                f"expected {len(LABELS)} integer counts, got shape {arr.shape} {arr.dtype}",
                field="counts",
            )
        row = arr.astype(np.int64)
    if (row < 0).any():
        raise InputError(f"negative label count in {row.tolist()}", field="counts")
    return row


def _check_counts(counts: npt.ArrayLike) -> npt.NDArray[np.int64]:
    arr = np.asarray(counts)
    if arr.ndim != 2 or arr.shape[1] != len(LABELS):
        raise InputError(f"counts must have shape (n, {len(LABELS)}), got {arr.shape}", field="counts")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"counts must be integers, got {arr.dtype}", field="counts")
    return arr.astype(np.int64, copy=False)


def _check_eligible(eligible: npt.ArrayLike, n: int) -> BoolArray:
    arr = np.asarray(eligible, dtype=bool)
    if arr.shape != (n,):
        raise InputError(f"eligible must have shape ({n},), got {arr.shape}", field="eligible")
    return arr


def exclusion_codes(counts: npt.ArrayLike, abstained: npt.ArrayLike, split_error: npt.ArrayLike) -> npt.NDArray[np.int8]:
    """int8 (n,): 0 for a scored answer, else ``1 + REASONS.index(reason)``.

    Precedence: split_error, abstained, no_claims, error_claims, unknown_claims, only_irrelevant
    (DAHL paper §3.3 excludes noncommittal answers and those without a clean verdict for every unit).

    ``abstained``, ``split_error``: bool arrays (n,): the answer abstained; the Splitter failed on it.

    Raises:
        InputError: on wrongly shaped arrays.
    """
    c = _check_counts(counts)
    n = c.shape[0]
    abst = _check_eligible(abstained, n)
    serr = _check_eligible(split_error, n)
    conditions = [serr, abst, c.sum(axis=1) == 0, c[:, _E] > 0, c[:, _N] > 0, c[:, _S] + c[:, _U] == 0]
    order = ("split_error", "abstained", "no_claims", "error_claims", "unknown_claims", "only_irrelevant")
    choices = [np.int8(1 + REASONS.index(r)) for r in order]
    return np.select(conditions, choices, default=np.int8(0)).astype(np.int8)


def answer_status(
    counts: Mapping[str, int] | npt.ArrayLike, *, abstained: bool, split_error: bool = False
) -> tuple[Status, str | None]:
    """Whether one answer (``counts`` as for :func:`as_counts`) enters the DAHL Score, and if not why.

    Returns ``(Status.SCORED, None)``, or the status and one of :data:`REASONS`: ``split_error`` ->
    ERROR, ``abstained`` -> ABSTAINED, others -> EXCLUDED.

    Raises:
        InputError: malformed counts.
    """
    row = as_counts(counts)[np.newaxis, :]
    code = int(exclusion_codes(row, np.array([abstained]), np.array([split_error]))[0])
    if code == 0:
        return Status.SCORED, None
    reason = REASONS[code - 1]
    if reason == "split_error":
        return Status.ERROR, reason
    if reason == "abstained":
        return Status.ABSTAINED, reason
    return Status.EXCLUDED, reason


def precision(s: npt.ArrayLike, u: npt.ArrayLike) -> FloatArray:
    """Factual precision S / (S + U) of int arrays ``s``, ``u`` (n,) (DAHL paper §3.3): float64 (n,),
    NaN where S + U = 0 (aggregates never return NaN)."""
    s_arr = np.asarray(s, dtype=np.float64)
    den = s_arr + np.asarray(u, dtype=np.float64)
    out = np.full(den.shape, np.nan)
    np.divide(s_arr, den, out=out, where=den > 0)
    return out


def factscore_values(counts: npt.ArrayLike, gamma: float = 10.0) -> FloatArray:
    """Per-answer FActScore S / (S + U + I), times exp(1 - γ/|A|) if |A| = S + U + I < γ (Min et al. 2023).

    Returns float64 (n,), NaN where |A| = 0; ``gamma`` (claims, FActScore default 10) 0 disables the penalty.

    Raises:
        ConfigError: gamma < 0.
        InputError: malformed counts.
    """
    if gamma < 0:
        raise ConfigError(f"gamma must be >= 0, got {gamma}")
    c = _check_counts(counts).astype(np.float64)
    size = c[:, _S] + c[:, _U] + c[:, _I]
    out = np.full(size.shape, np.nan)
    np.divide(c[:, _S], size, out=out, where=size > 0)
    if gamma > 0:
        short = (size > 0) & (size < gamma)
        out[short] *= np.exp(1.0 - gamma / size[short])
    return out


def f1_values(counts: npt.ArrayLike, k: int = 64) -> FloatArray:
    """Per-answer F1@K = 2PR / (P + R), P = S / (S + U), R = min(S / K, 1), 0 when S = 0 (SAFE, Wei et
    al. 2024, §5): float64 (n,), NaN where S + U = 0; K supported claims (SAFE default 64).

    Raises:
        ConfigError: k < 1.
        InputError: malformed counts.
    """
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    c = _check_counts(counts)
    p = precision(c[:, _S], c[:, _U])
    r = np.minimum(c[:, _S] / float(k), 1.0)
    out = np.where(np.isnan(p), np.nan, 0.0)
    pos = c[:, _S] > 0
    out[pos] = 2.0 * p[pos] * r[pos] / (p[pos] + r[pos])
    return out


def dahl_mask(counts: npt.ArrayLike, eligible: npt.ArrayLike) -> BoolArray:
    """bool (n,): the answers that enter the DAHL Score and F1@K: eligible, S + U > 0, no unknown/error claim.

    Raises:
        InputError: wrongly shaped arrays.
    """
    c = _check_counts(counts)
    e = _check_eligible(eligible, c.shape[0])
    mask: BoolArray = e & (c[:, _S] + c[:, _U] > 0) & (c[:, _N] + c[:, _E] == 0)
    return mask


def factscore_mask(counts: npt.ArrayLike, eligible: npt.ArrayLike) -> BoolArray:
    """bool (n,): the answers that enter FActScore: eligible, a claim, no unknown/error claim.

    Unlike :func:`dahl_mask`, an answer with only irrelevant claims counts (score 0).

    Raises:
        InputError: wrongly shaped arrays.
    """
    c = _check_counts(counts)
    e = _check_eligible(eligible, c.shape[0])
    mask: BoolArray = e & (c[:, _S] + c[:, _U] + c[:, _I] > 0) & (c[:, _N] + c[:, _E] == 0)
    return mask


def _mean_or_none(values: FloatArray) -> float | None:
    return float(values.mean()) if values.size else None


def dahl_score(counts: npt.ArrayLike, eligible: npt.ArrayLike) -> float | None:
    """DAHL Score in [0, 1]: mean precision over :func:`dahl_mask` answers (DAHL paper §3.3); None if none.

    Raises:
        InputError: wrongly shaped arrays.
    """
    c = _check_counts(counts)
    mask = dahl_mask(c, eligible)
    return _mean_or_none(precision(c[mask, _S], c[mask, _U]))


def factscore(counts: npt.ArrayLike, eligible: npt.ArrayLike, gamma: float = 10.0) -> float | None:
    """FActScore in [0, 1]: mean :func:`factscore_values` over :func:`factscore_mask` answers (Min et
    al. 2023), None if none; ``gamma`` 0 gives FActScore without penalty ("init").

    Raises:
        ConfigError: gamma < 0.
        InputError: wrongly shaped arrays.
    """
    c = _check_counts(counts)
    mask = factscore_mask(c, eligible)
    return _mean_or_none(factscore_values(c[mask], gamma))


def f1_at_k(counts: npt.ArrayLike, eligible: npt.ArrayLike, k: int = 64) -> float | None:
    """Mean F1@K in [0, 1] over :func:`dahl_mask` answers (SAFE, Wei et al. 2024), None if none.

    Raises:
        ConfigError: k < 1.
        InputError: wrongly shaped arrays.
    """
    c = _check_counts(counts)
    mask = dahl_mask(c, eligible)
    return _mean_or_none(f1_values(c[mask], k))


def answer_metrics(counts: Mapping[str, int] | npt.ArrayLike, *, gamma: float = 10.0, k: int = 64) -> AnswerMetrics:
    """All per-answer metrics of one answer (``counts`` as for :func:`as_counts`), None where undefined.

    Unknown and error claims enter no numerator or denominator; :func:`answer_status` decides
    whether the answer enters an aggregate.

    Returns precision and f1_at_k (None if S + U = 0), factscore and factscore_init (None if S + U + I = 0).

    Raises:
        InputError: malformed counts.
        ConfigError: gamma < 0 or k < 1.
    """
    row = as_counts(counts)[np.newaxis, :]

    def one(arr: FloatArray) -> float | None:
        value = float(arr[0])
        return None if np.isnan(value) else value

    return AnswerMetrics(
        precision=one(precision(row[:, _S], row[:, _U])),
        factscore=one(factscore_values(row, gamma)),
        factscore_init=one(factscore_values(row, 0.0)),
        f1_at_k=one(f1_values(row, k)),
    )


def bootstrap_ci(
    values: npt.ArrayLike,
    *,
    rng: np.random.Generator,
    n_boot: int = 1000,
    level: float = 0.95,
    counts: npt.ArrayLike | None = None,
) -> tuple[float, float] | None:
    """Percentile bootstrap ``(lo, hi)`` of the mean of ``values`` (float (n,), no NaN; None when
    empty), resampling answers (Efron & Tibshirani 1993, ch. 13).

    ``counts`` (int (n,), >= 0): how many answers have each value (default: one each); the interval
    is that of the values repeated so, with the same ``rng`` draws. Values are sorted first, so the
    interval depends only on them and ``rng``'s seed; with many ties the resamples are multinomial
    counts over the distinct values (the same distribution). ``level`` 0.95 gives the 2.5th and
    97.5th percentiles of ``n_boot`` resample means.

    Raises:
        ConfigError: n_boot outside [1, MAX_N_BOOT] or level not in (0, 1).
        InputError: values not 1-D or containing NaN; counts not of the values' shape or negative.
    """
    if not 1 <= n_boot <= MAX_N_BOOT:
        raise ConfigError(f"n_boot must be in [1, {MAX_N_BOOT:,}] (each resample's mean is kept), got {n_boot:,}")
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level}")
    uniq, freq = _distinct(values, counts)
    n = int(freq.sum())
    if n == 0:
        return None
    means = np.empty(n_boot)
    if uniq.size * 4 <= n:
        probs = freq / n
        chunk = max(1, _DRAW_BUDGET // uniq.size)
        for start in range(0, n_boot, chunk):
            stop = min(n_boot, start + chunk)
            draws = rng.multinomial(n, probs, size=stop - start)
            means[start:stop] = draws @ uniq / n
    else:
        v = np.repeat(uniq, freq)
        chunk = max(1, _DRAW_BUDGET // n)
        for start in range(0, n_boot, chunk):
            stop = min(n_boot, start + chunk)
            idx = rng.integers(0, n, size=(stop - start, n))
            means[start:stop] = v[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _distinct(values: npt.ArrayLike, counts: npt.ArrayLike | None) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Sorted distinct values of ``values`` and how many answers have each (``counts``: per value).

    Raises:
        InputError: values not 1-D or containing NaN; counts not of the values' shape or negative.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise InputError(f"values must be 1-D, got shape {v.shape}", field="values")
    if np.isnan(v).any():
        raise InputError("values contain NaN", field="values")
    if counts is None:
        uniq, freq = np.unique(v, return_counts=True)
        return uniq, freq.astype(np.int64)
    c = np.asarray(counts)
    if c.shape != v.shape or (c.size and not np.issubdtype(c.dtype, np.integer)):
        raise InputError(f"counts must be integers of shape {v.shape}, got {c.shape} {c.dtype}", field="counts")
    if (c < 0).any():
        raise InputError("counts must be >= 0", field="counts")
    uniq, inverse = np.unique(v, return_inverse=True)
    freq = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(freq, inverse, c.astype(np.int64, copy=False))
    keep = freq > 0
    return uniq[keep], freq[keep]


def group_seed(seed: int, *names: str) -> list[int]:
    """Seed material of one group's bootstrap: ``[seed, blake2b-64 of the names joined by NUL]``."""
    digest = hashlib.blake2b("\x00".join(names).encode("utf-8"), digest_size=8).digest()
    return [seed, int.from_bytes(digest, "little")]


def sorted_mean(values: FloatArray, counts: npt.NDArray[np.integer] | None = None) -> float | None:
    """Mean of ``values`` (float (n,)) summed in sorted order (exactly order-invariant), None when empty.

    ``counts`` (int (n,), >= 0): how many answers have each value; the mean is exactly that of the
    values repeated so (the same sorted array is summed).
    """
    if counts is None:
        return float(np.sort(values).mean()) if values.size else None
    order = np.argsort(values, kind="stable")
    repeated = np.repeat(values[order], counts[order])
    return float(repeated.mean()) if repeated.size else None
