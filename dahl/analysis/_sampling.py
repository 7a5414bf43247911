"""Stratified samples that keep the category distribution, and the DAHL paper's check (§5.2) that
such samples do not differ: of a run's answers (:func:`repeat_check`) or of a question set, scored
per question by a run (:func:`question_check`)."""

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
from dahl.analysis._verdicts import Verdicts, canonical_metric

__all__ = ["RepeatCheck", "SampleTest", "allocate", "anova", "check_text", "pair_test", "question_check",
           "repeat_check", "sample_file", "stratified_sample"]


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


def anova(samples: Sequence[npt.NDArray[np.float64]]) -> tuple[float | None, float | None, tuple[int, int]]:
    """One-way ANOVA F-test that the samples' means are equal (Fisher 1925; as scipy.stats.f_oneway).

    F = (SS_between / (k − 1)) / (SS_within / (N − k)) over the k non-empty samples of N values in
    all, p = P(F' ≥ F) with (k − 1, N − k) degrees of freedom.

    Returns ``(F, p, (k − 1, N − k))``; F and p None when k < 2, N ≤ k or every sample is constant.
    """
    from scipy import stats  # lazy: ~1 s to import

    groups = [np.asarray(g, dtype=np.float64) for g in samples if len(g)]
    k, n = len(groups), sum(g.size for g in groups)
    df = (k - 1, n - k)
    if k < 2 or n <= k:
        return None, None, df
    grand = float(np.concatenate(groups).mean())
    between = sum(g.size * (float(g.mean()) - grand) ** 2 for g in groups)
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    if within <= 0:
        return None, None, df
    f_stat = (between / df[0]) / (within / df[1])
    return f_stat, float(stats.f.sf(f_stat, *df)), df


@dataclass(frozen=True)
class RepeatCheck:
    """Result of :func:`repeat_check` and :func:`question_check`: per sample the scored units
    (``sizes``: answers, or questions with a score) and ``means``, the one-way ANOVA across the
    samples (:func:`anova`), the ``tests`` of every pair, and their smallest p-values ``min_f_p``,
    ``min_t_p`` (None: undefined).

    Attributes:
        unit: ``answers`` or ``questions``, what a sample holds.
        drawn: units drawn per sample (before dropping the unscored ones).
        population: units sampled from (the model's answers, or the question set's questions).
    """

    model: str
    sizes: list[int]
    means: list[float | None]
    tests: list[SampleTest]
    min_f_p: float | None
    min_t_p: float | None
    anova_f: float | None = None
    anova_p: float | None = None
    anova_df: tuple[int, int] = (0, 0)
    unit: str = "answers"
    drawn: int = 0
    population: int = 0


def _model_of(store: Verdicts, model: str | None) -> str:
    """``model``, or the run's one model; ConfigError when missing or ambiguous."""
    present = sorted({store.models[c] for c in np.unique(np.asarray(store.model)).tolist()})
    if model is None:
        if len(present) != 1:
            raise ConfigError(f"the run holds several models; choose one with --model ({', '.join(present)})")
        return str(present[0])
    if model not in present:
        raise ConfigError(f"model {model!r} not in the run; it holds {', '.join(present)}")
    return model


def _compare(model: str, samples: list[npt.NDArray[np.float64]], unit: str, drawn: int, population: int) -> RepeatCheck:
    """The ANOVA and pairwise tests of ``samples`` (one float array each) as a :class:`RepeatCheck`."""
    tests = [pair_test(samples[i], samples[j], i, j) for i, j in itertools.combinations(range(len(samples)), 2)]
    f_ps = [t.f_p for t in tests if t.f_p is not None]
    t_ps = [t.t_p for t in tests if t.t_p is not None]
    f_stat, f_p, df = anova(samples)
    return RepeatCheck(
        model=model,
        sizes=[int(s.size) for s in samples],
        means=[float(s.mean()) if s.size else None for s in samples],
        tests=tests,
        min_f_p=min(f_ps) if f_ps else None,
        min_t_p=min(t_ps) if t_ps else None,
        anova_f=f_stat,
        anova_p=f_p,
        anova_df=df,
        unit=unit,
        drawn=drawn,
        population=population,
    )


def repeat_check(
    store: Verdicts,
    *,
    fraction: float,
    repeats: int,
    seed: int,
    model: str | None = None,
    metric: str = "precision",
) -> RepeatCheck:
    """The DAHL paper's check that a stratified sample represents the full set (§5.2), over answers.

    Draws ``repeats`` (>= 2) samples, by category, of ``fraction`` of ``model``'s answers (None: the
    run's one model) from one generator seeded ``seed``, drops answers outside ``metric``'s mask
    and tests each pair with :func:`pair_test` (Student's t-test).

    Raises:
        ConfigError: repeats < 2, bad fraction, or model missing/ambiguous.
    """
    if repeats < 2:
        raise ConfigError(f"--repeats must be >= 2, got {repeats}")
    model = _model_of(store, model)
    values, mask = store.scores(metric)
    rows = np.flatnonzero(np.asarray(store.model) == store.models.index(model))
    strata = [store.categories[c] for c in np.asarray(store.category)[rows].tolist()]
    rng = np.random.default_rng(seed)
    samples = []
    drawn = 0
    for _ in range(repeats):
        picked = rows[stratified_sample(strata, fraction, rng)]
        drawn = int(picked.size)
        samples.append(values[picked][mask[picked]])
    return _compare(model, samples, "answers", drawn, int(rows.size))


def question_check(
    questions: Path,
    store: Verdicts,
    *,
    fraction: float = 0.1,
    repeats: int = 5,
    seed: int = 0,
    model: str | None = None,
    metric: str = "precision",
) -> RepeatCheck:
    """The DAHL paper's sampling check (§5.2) on a question set: do ``repeats`` random samples of it
    give the same score?

    Draws ``repeats`` (>= 2) samples of ``fraction`` of the questions of ``questions`` (a
    ``dahl generate`` questions file), stratified by category, from one generator seeded
    ``seed``. Each question's score is the mean ``metric`` of ``model``'s answers to it in
    ``store`` inside the metric's mask (matched by :func:`~dahl.records.content_id` of the text);
    a question without one is dropped from its sample. Then :func:`anova` across the samples and
    :func:`pair_test` (F-test of variances, Student's t-test) between every pair.

    Raises:
        InputError: an unreadable questions file or a bad record (file, line, field named).
        ConfigError: repeats < 2, bad fraction, model missing/ambiguous, an unknown metric, or no
            question of the set answered in the run.
    """
    from dahl.generate._questions import read_questions
    from dahl.records import content_id

    if repeats < 2:
        raise ConfigError(f"--repeats must be >= 2, got {repeats}")
    model = _model_of(store, model)
    rows = list(read_questions(questions))
    values, mask = store.scores(canonical_metric(metric))
    n_q = len(store.question_ids)
    inside = mask & (np.asarray(store.model) == store.models.index(model))
    question = np.asarray(store.question)[inside]
    count = np.bincount(question, minlength=n_q)
    means = np.divide(np.bincount(question, weights=values[inside], minlength=n_q), count, out=np.full(n_q, np.nan),
                      where=count > 0)
    code = {qid: i for i, qid in enumerate(store.question_ids)}
    scores = np.array([means[code[k]] if (k := content_id(r.question)) in code else np.nan for r in rows])
    if not np.isfinite(scores).any():
        raise ConfigError(f"no question of {questions} has a scored answer of {model} in the run "
                          "(questions are matched by their text)")
    rng = np.random.default_rng(seed)
    samples, drawn = [], 0
    for _ in range(repeats):
        picked = stratified_sample([r.category for r in rows], fraction, rng)
        drawn = int(picked.size)
        v = scores[picked]
        samples.append(v[np.isfinite(v)])
    return _compare(model, samples, "questions", drawn, len(rows))


def check_text(check: RepeatCheck, *, metric: str, fraction: float, seed: int, level: float = 0.05) -> str:
    """The plain-text report of a :class:`RepeatCheck`: what was drawn, the sample means (percent),
    the one-way ANOVA, the pairwise F- and t-tests (a Markdown table), the ANOVA's verdict at ``level``
    and how many uncorrected t-tests fall below it."""
    from dahl.analysis._paired_bootstrap import format_p

    def num(x: float | None) -> str:  # F and t to three decimals, so a column reads at a glance
        return "—" if x is None else f"{x:.3f}"

    label = "DAHL Score" if metric in ("precision", "dahl_score") else metric
    per = "per question (mean of its answers)" if check.unit == "questions" else "per answer"
    lines = [(f"{len(check.sizes)} samples of {fraction:g} of {check.population:,} {check.unit} ({check.drawn:,} "
              f"each, by category, seed {seed}); {check.model}'s {label} {per}"),
             f"scored {check.unit} per sample: {', '.join(map(str, check.sizes))}",
             "sample means: " + ", ".join("—" if m is None else f"{100 * m:.1f}" for m in check.means),
             (f"one-way ANOVA across the samples: F = {num(check.anova_f)} (df {check.anova_df[0]}, "
              f"{check.anova_df[1]}), p = {format_p(check.anova_p)}"),
             "", "pairs: F-test of equal variances, then Student's t-test (two-sided, as the DAHL paper §5.2)", "",
             "| i | j | F | p (F) | t | p (t) |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {t.i} | {t.j} | {num(t.f_stat)} | {format_p(t.f_p)} | {num(t.t_stat)} | {format_p(t.t_p)} |"
              for t in check.tests]
    below = sum(1 for t in check.tests if t.t_p is not None and t.t_p < level)
    verdict = ("no ANOVA (too few scored units or no variance)" if check.anova_p is None else
               f"the sample means differ (ANOVA p < {level:g})" if check.anova_p < level else
               f"no difference between the sample means (ANOVA p ≥ {level:g})")
    lines += ["", (f"smallest p: F-test {format_p(check.min_f_p)}, t-test {format_p(check.min_t_p)}; {verdict}; "
                   f"{below} of {len(check.tests)} t-tests below {level:g} (uncorrected)")]
    return "\n".join(lines) + "\n"
