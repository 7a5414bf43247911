"""Stratified samples that keep the category distribution, and the DAHL paper's check (§5.1) that
such samples of a run's answers do not differ (:func:`repeat_check`)."""

from __future__ import annotations

import csv
import io
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import orjson

from dahl.errors import ConfigError, InputError
from dahl.analysis._verdicts import Verdicts

__all__ = ["RepeatCheck", "SampleTest", "allocate", "pair_test", "repeat_check", "sample_file", "stratified_sample"]


def allocate(sizes: Sequence[int], fraction: float, names: Sequence[str] | None = None) -> npt.NDArray[np.int64]:
    """Rows to draw per stratum by largest remainder (Hamilton's method).

    The total is round(fraction × N) (half to even); stratum h gets floor(fraction × N_h), and
    the rows still missing go one each to the largest remainders (ties: larger stratum, then name).

    Args:
        sizes: rows per stratum (h,).
        fraction: sample fraction in (0, 1].
        names: stratum names, for tie-breaking (default: position).

    Returns int64 (h,), each <= its size.

    Raises:
        ConfigError: fraction outside (0, 1].
    """
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"--fraction must be in (0, 1], got {fraction}")
    n = np.asarray(sizes, dtype=np.int64)
    quota = fraction * n
    base: npt.NDArray[np.int64] = np.floor(quota).astype(np.int64)
    total = int(round(fraction * int(n.sum())))
    left = total - int(base.sum())
    keys = list(names) if names is not None else [f"{i:012d}" for i in range(n.size)]
    order = sorted(range(n.size), key=lambda i: (-(quota[i] - base[i]), -int(n[i]), keys[i]))
    for i in order[: max(left, 0)]:
        base[i] += 1
    return base


def stratified_sample(strata: Sequence[str], fraction: float, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """Sorted int64 indices of a stratified sample (drawn without replacement by ``rng``) of rows
    whose strata (e.g. categories) are ``strata`` (n,).

    Raises:
        ConfigError: fraction outside (0, 1].
    """
    names, codes = np.unique(np.asarray(strata, dtype=object).astype(str), return_inverse=True)
    sizes = np.bincount(codes, minlength=names.size)
    take = allocate(sizes.tolist(), fraction, names.tolist())
    chosen = [rng.choice(np.flatnonzero(codes == h), size=int(t), replace=False) for h, t in enumerate(take) if t]
    if not chosen:
        return np.zeros(0, np.int64)
    out: npt.NDArray[np.int64] = np.sort(np.concatenate(chosen)).astype(np.int64)
    return out


def sample_file(input_path: Path, out_path: Path | None, *, fraction: float, stratify: str, seed: int) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """Stratified sample of a JSON Lines or CSV file (questions or answers), lines kept verbatim.

    Args:
        input_path: ``.jsonl`` (one object a line) or ``.csv`` with a header.
        out_path: where to write the sample (same format); None to only return it.
        fraction: sample fraction in (0, 1].
        stratify: the field holding the stratum (missing: stratum ``""``).
        seed: generator seed.

    Returns ``(content, per_stratum)``: the sample's bytes and stratum -> (rows in input, in sample).

    Raises:
        InputError: unreadable file or a line that is not a JSON object.
        ConfigError: fraction outside (0, 1].
    """
    is_csv = input_path.suffix.lower() == ".csv"
    try:
        raw = input_path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", file=str(input_path)) from None
    if is_csv:
        text = raw.decode("utf-8-sig")
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        if header is None or stratify not in header:
            raise InputError(f"CSV has no column {stratify!r}", file=str(input_path), field=stratify)
        col = header.index(stratify)
        rows = list(reader)
        strata = [r[col] if col < len(r) else "" for r in rows]
    else:
        lines = [ln for ln in raw.splitlines(keepends=True) if ln.strip()]
        strata = []
        for i, ln in enumerate(lines, start=1):
            try:
                rec = orjson.loads(ln)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc}", file=str(input_path), line=i) from None
            if not isinstance(rec, dict):
                raise InputError("line is not a JSON object", file=str(input_path), line=i)
            strata.append(str(rec.get(stratify, "")))
    picked = stratified_sample(strata, fraction, np.random.default_rng(seed))
    if is_csv:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header or [])
        writer.writerows(rows[i] for i in picked.tolist())
        content = buf.getvalue().encode("utf-8")
    else:
        content = b"".join(ln if ln.endswith(b"\n") else ln + b"\n" for ln in (lines[i] for i in picked.tolist()))
    total = Counter(strata)
    taken = Counter(strata[i] for i in picked.tolist())
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_bytes(content)
    return content, {s: (total[s], taken[s]) for s in sorted(total)}


@dataclass(frozen=True)
class SampleTest:
    """F-test and t-test between samples ``i`` and ``j`` (two-sided).

    Attributes:
        equal_var: the t-test is Student's (pooled variance); False: Welch's.
    """

    i: int
    j: int
    f_stat: float | None
    f_p: float | None
    t_stat: float | None
    t_p: float | None
    equal_var: bool = True


def pair_test(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], i: int = 0, j: int = 1, *,
              alpha: float | None = None) -> SampleTest:
    """The DAHL paper's F-test of equal variances, then a t-test of equal means (§5.2).

    F = s²_a / s²_b with (n_a − 1, n_b − 1) degrees of freedom, p = min(1, 2·min(cdf, sf)). The
    t-test is Student's (scipy.stats.ttest_ind, pooled variance), as the paper, or with ``alpha``
    Welch's when f_p < alpha. Both None when a sample has < 2 values or zero variance.

    Args:
        a, b: per-answer scores, float arrays (n_a,), (n_b,).
        i, j: the labels the result carries.
    """
    from scipy import stats  # type: ignore[import-untyped]  # lazy: ~1 s to import

    if a.size < 2 or b.size < 2:
        return SampleTest(i, j, None, None, None, None)
    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))
    if va <= 0 or vb <= 0:
        return SampleTest(i, j, None, None, None, None)
    f_stat = va / vb
    dfa, dfb = a.size - 1, b.size - 1
    f_p = float(min(1.0, 2.0 * min(stats.f.cdf(f_stat, dfa, dfb), stats.f.sf(f_stat, dfa, dfb))))
    equal_var = alpha is None or f_p >= alpha
    res = stats.ttest_ind(a, b, equal_var=equal_var)
    return SampleTest(i, j, f_stat, f_p, float(res.statistic), float(res.pvalue), equal_var)


@dataclass(frozen=True)
class RepeatCheck:
    """Result of :func:`repeat_check`: per sample the scored answers (``sizes``) and ``means``, the
    ``tests`` of every pair, and their smallest p-values ``min_f_p``, ``min_t_p`` (None: undefined)."""

    model: str
    sizes: list[int]
    means: list[float | None]
    tests: list[SampleTest]
    min_f_p: float | None
    min_t_p: float | None


def repeat_check(
    store: Verdicts,
    *,
    fraction: float,
    repeats: int,
    seed: int,
    model: str | None = None,
    metric: str = "precision",
) -> RepeatCheck:
    """The DAHL paper's check that a stratified sample represents the full set (§5.1).

    Draws ``repeats`` (>= 2) samples, by category, of ``fraction`` of ``model``'s answers (None: the
    run's one model) from one generator seeded ``seed``, drops answers outside ``metric``'s mask
    and tests each pair with :func:`pair_test` (Student's t-test).

    Raises:
        ConfigError: repeats < 2, bad fraction, or model missing/ambiguous.
    """
    if repeats < 2:
        raise ConfigError(f"--repeats must be >= 2, got {repeats}")
    present = sorted({store.models[c] for c in np.unique(np.asarray(store.model)).tolist()})
    if model is None:
        if len(present) != 1:
            raise ConfigError(f"the run holds several models; choose one with --model ({', '.join(present)})")
        model = present[0]
    if model not in present:
        raise ConfigError(f"model {model!r} not in the run; it holds {', '.join(present)}")
    values, mask = store.scores(metric)
    rows = np.flatnonzero(np.asarray(store.model) == store.models.index(model))
    strata = [store.categories[c] for c in np.asarray(store.category)[rows].tolist()]
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(repeats):
        picked = rows[stratified_sample(strata, fraction, rng)]
        samples.append(values[picked][mask[picked]])
    tests = [pair_test(samples[i], samples[j], i, j) for i, j in itertools.combinations(range(repeats), 2)]
    f_ps = [t.f_p for t in tests if t.f_p is not None]
    t_ps = [t.t_p for t in tests if t.t_p is not None]
    return RepeatCheck(
        model=model,
        sizes=[int(s.size) for s in samples],
        means=[float(s.mean()) if s.size else None for s in samples],
        tests=tests,
        min_f_p=min(f_ps) if f_ps else None,
        min_t_p=min(t_ps) if t_ps else None,
    )
