"""The DAHL paper's temperature study (Seo et al. 2024, §5.2, Fig. 5) over one scored run.

The samples of one question at one temperature are not independent, so the study works at the
question level: per model × temperature (each answer's ``meta.sampling.temperature``), each
question's mean score over its samples; the cell's score is the mean of those question means, its
CI a percentile bootstrap over the questions. Between two temperatures of a model: a paired t-test
(Student 1908) of the question means over the questions both temperatures scored, two-sided and
uncorrected.
"""

from __future__ import annotations

import csv
import io
import itertools
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt

from dahl.errors import ConfigError, InputError
from dahl.results._manifest import stale_reason
from dahl.metrics import bootstrap_ci, group_seed
from dahl.analysis._leaderboard import _pair, _pct, _pct_ci
from dahl.analysis._paired_bootstrap import format_p
from dahl.analysis._verdicts import canonical_metric, load_verdicts

__all__ = [
    "COMPARE",
    "PAPER_REFERENCE",
    "TemperatureCell",
    "TemperatureStudy",
    "TemperatureTest",
    "cells_csv",
    "read_temperatures",
    "temperature_study",
    "tests_csv",
    "to_json",
    "to_markdown",
]

logger = logging.getLogger(__name__)

Compare = Literal["reference", "adjacent", "all"]
#: The pair choices of :func:`temperature_study`.
COMPARE: tuple[Compare, ...] = ("reference", "adjacent", "all")
#: The DAHL paper's generation temperature (§3.3), the default reference.
PAPER_REFERENCE = 0.6


@dataclass(frozen=True)
class TemperatureCell:
    """One model at one temperature.

    Attributes:
        n, excluded: answers inside and outside the metric's mask.
        questions: questions with an answer inside the mask.
        mean, ci: mean of the per-question mean scores, in [0, 1], and its percentile bootstrap CI
            over the questions; None when n is 0.
        sd: sample standard deviation (ddof 1) of the per-question means; None below 2 questions.
    """

    model: str
    temperature: float
    n: int
    excluded: int
    mean: float | None
    sd: float | None
    ci: tuple[float, float] | None
    questions: int = 0


#: The test of :class:`TemperatureTest`, as the outputs name it.
TEST = "paired t-test over questions"


@dataclass(frozen=True)
class TemperatureTest:
    """The paired t-test between two temperatures of one model, over their shared questions (two-sided).

    Attributes:
        a, b: the temperatures; t > 0 when a scores higher.
        n_a, n_b: answers inside the mask at a and at b.
        n_questions: questions scored at both, the pairs of the test.
        mean_diff: mean over those questions of (question mean at a − at b); None without a pair.
        t_test, t_stat, t_p: :data:`TEST` and its t and p; None below 2 pairs or when every
            difference is equal.
    """

    model: str
    a: float
    b: float
    n_a: int
    n_b: int
    n_questions: int
    mean_diff: float | None
    t_test: str | None
    t_stat: float | None
    t_p: float | None


@dataclass(frozen=True)
class TemperatureStudy:
    """Result of :func:`temperature_study`.

    Attributes:
        metric: canonical metric name (``precision`` is the DAHL Score).
        cells: one per (model, temperature), models sorted, temperatures ascending.
        tests: the pairs of ``compare``, per model in ``cells`` order.
        reference: the reference temperature (``compare == "reference"``), else None.
        level, seed: CI coverage, bootstrap seed.
        without_temperature: answers with no ``meta.sampling.temperature`` (left out).
    """

    run_dir: Path
    metric: str
    cells: list[TemperatureCell]
    tests: list[TemperatureTest]
    compare: Compare
    reference: float | None
    level: float
    seed: int
    without_temperature: int

    @property
    def models(self) -> list[str]:
        """The models, sorted."""
        return sorted({c.model for c in self.cells})

    def best(self, model: str) -> TemperatureCell | None:
        """The cell of ``model`` with the highest mean (the lowest temperature on a tie), or None."""
        scored = [c for c in self.cells if c.model == model and c.mean is not None]
        return max(scored, key=lambda c: (c.mean, -c.temperature)) if scored else None


class _Sampling(msgspec.Struct):
    temperature: float | None = None


class _Meta(msgspec.Struct):
    sampling: _Sampling | None = None


class _Line(msgspec.Struct):
    id: str
    meta: _Meta | None = None


_LINE = msgspec.json.Decoder(_Line)


def read_temperatures(path: Path) -> dict[str, float]:
    """Answer id -> ``meta.sampling.temperature`` of a run's ``answers.jsonl`` (blocking; streamed).

    Raises:
        InputError: the file cannot be read, or a line is not an answer with a string id and a
            numeric temperature (file, line and field named).
    """
    out: dict[str, float] = {}
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    with handle:
        for n, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                line = _LINE.decode(raw)
            except msgspec.ValidationError as exc:
                field = str(exc).rsplit("at `", 1)[-1].rstrip("`") if "at `" in str(exc) else None
                raise InputError(f"not a scored answer ({exc})", file=str(path), line=n, field=field) from None
            except msgspec.DecodeError as exc:
                raise InputError(f"not valid JSON ({exc})", file=str(path), line=n) from None
            if line.meta is not None and line.meta.sampling is not None and line.meta.sampling.temperature is not None:
                out[line.id] = float(line.meta.sampling.temperature)
    return out


def _pairs(temperatures: Sequence[float], compare: Compare, reference: float | None, model: str) -> list[tuple[float, float]]:
    """The (a, b) temperature pairs to test for one model (``temperatures`` ascending)."""
    if compare == "adjacent":
        return list(itertools.pairwise(temperatures))
    if compare == "all":
        return list(itertools.combinations(temperatures, 2))
    if reference is None or reference not in temperatures:
        listed = ", ".join(f"{t:g}" for t in temperatures)
        raise ConfigError(f"reference temperature {reference} is not among {model}'s ({listed}); "
                          "choose one with --reference or use --compare adjacent")
    ref: float = reference
    return [(t, ref) for t in temperatures if t != ref]


def temperature_study(
    run_dir: Path,
    *,
    metric: str = "dahl_score",
    compare: Compare = "reference",
    reference: float = PAPER_REFERENCE,
    seed: int = 0,
    n_boot: int = 1000,
    level: float = 0.95,
) -> TemperatureStudy:
    """Score against temperature per model, question by question, with paired t-tests (blocking).

    Args:
        run_dir: a finished ``dahl score`` run folder.
        metric: per-answer metric (:meth:`dahl.analysis._verdicts.Verdicts.scores`).
        compare: ``reference`` (each temperature against ``reference``; the paper's generation
            temperature 0.6, §3.3), ``adjacent`` or ``all``.
        seed, n_boot, level: bootstrap seed, resamples (>= 1) and CI coverage in (0, 1).

    Raises:
        InputError: no verdict store or ``answers.jsonl``, or a bad line (file and line named).
        ConfigError: a stale run, no answer with a temperature, an unknown metric, a bad
            ``compare``, or a model without the reference temperature.
    """
    from scipy import stats  # type: ignore[import-untyped]  # lazy: ~1 s to import

    if compare not in COMPARE:
        raise ConfigError(f"compare must be one of {', '.join(COMPARE)}, got {compare!r}")
    reason = stale_reason(run_dir)
    if reason is not None:
        raise ConfigError(f"{run_dir}: {reason}; run the same dahl score command again to finish it")
    name = canonical_metric(metric)
    store = load_verdicts(run_dir)
    by_id = read_temperatures(Path(run_dir) / "answers.jsonl")
    if not by_id:
        raise ConfigError(f"no answer in {run_dir} records meta.sampling.temperature; "
                          "generate the answers with dahl generate --temperatures")
    values, mask = store.scores(name)
    temps = np.array([by_id.get(i, np.nan) for i in store.ids], dtype=np.float64)
    known = ~np.isnan(temps)
    missing = int((~known).sum())
    if missing:
        logger.warning("%d answers of %s have no meta.sampling.temperature; left out", missing, run_dir)
    model_codes = np.asarray(store.model)
    question = np.asarray(store.question)
    n_q = len(store.question_ids)
    cells: list[TemperatureCell] = []
    tests: list[TemperatureTest] = []
    for model in sorted({store.models[c] for c in np.unique(model_codes[known]).tolist()}):
        of_model = known & (model_codes == store.models.index(model))
        grid = sorted(set(temps[of_model].tolist()))
        per_q: dict[float, tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], int]] = {}
        for t in grid:
            rows = of_model & (temps == t)
            inside = rows & mask
            count = np.bincount(question[inside], minlength=n_q)
            has = count > 0
            q_means = np.divide(np.bincount(question[inside], weights=values[inside], minlength=n_q), count,
                                out=np.zeros(n_q), where=has)
            per_q[t] = (q_means, has, int(inside.sum()))
            v = np.sort(q_means[has])
            ci = bootstrap_ci(v, rng=np.random.default_rng(group_seed(seed, model, repr(t))), n_boot=n_boot, level=level)
            cells.append(TemperatureCell(
                model=model, temperature=t, n=int(inside.sum()), excluded=int((rows & ~mask).sum()),
                mean=float(v.mean()) if v.size else None, sd=float(v.std(ddof=1)) if v.size >= 2 else None, ci=ci,
                questions=int(v.size),
            ))
        for a, b in _pairs(grid, compare, reference, model):
            (qa, ha, n_a), (qb, hb, n_b) = per_q[a], per_q[b]
            d = (qa - qb)[ha & hb]
            t_stat = t_p = None
            if d.size >= 2 and float(d.var(ddof=1)) > 0:
                res = stats.ttest_rel(qa[ha & hb], qb[ha & hb])
                t_stat, t_p = float(res.statistic), float(res.pvalue)
            tests.append(TemperatureTest(model, a, b, n_a, n_b, int(d.size), float(d.mean()) if d.size else None,
                                         TEST if t_stat is not None else None, t_stat, t_p))
    return TemperatureStudy(
        run_dir=Path(run_dir), metric=name, cells=cells, tests=tests, compare=compare,
        reference=reference if compare == "reference" else None, level=level, seed=seed,
        without_temperature=missing,
    )


def to_json(study: TemperatureStudy) -> dict[str, Any]:
    """The study as a JSON-ready dict: settings (``unit``: what the CI and tests resample and pair),
    ``cells``, ``tests`` and ``best`` temperature per model."""
    best = {m: (b.temperature if (b := study.best(m)) is not None else None) for m in study.models}
    return {
        "run_dir": str(study.run_dir), "metric": study.metric, "compare": study.compare,
        "reference": study.reference, "level": study.level, "seed": study.seed,
        "unit": "question: each question's mean over its samples; CI bootstrap over questions; " + TEST,
        "without_temperature": study.without_temperature, "best": best,
        "cells": [{**asdict(c), "ci": _pair(c.ci)} for c in study.cells],
        "tests": [asdict(t) for t in study.tests],
    }


def _num(x: float | None, digits: int = 4) -> str:
    return "" if x is None else f"{x:.{digits}g}"


def cells_csv(study: TemperatureStudy) -> str:
    """One row per (model, temperature): model, temperature, n, excluded, questions, mean, sd, ci_lo,
    ci_hi (fractions; mean, sd and CI over the per-question means)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "temperature", "n", "excluded", "questions", "mean", "sd", "ci_lo", "ci_hi"])
    for c in study.cells:
        lo, hi = c.ci if c.ci is not None else (None, None)
        w.writerow([c.model, repr(c.temperature), c.n, c.excluded, c.questions, _num(c.mean, 6), _num(c.sd, 6),
                    _num(lo, 6), _num(hi, 6)])
    return buf.getvalue()


def tests_csv(study: TemperatureStudy) -> str:
    """One row per test: model, a, b, n_a, n_b, n_questions, mean_diff, t_test, t_stat, t_p."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "a", "b", "n_a", "n_b", "n_questions", "mean_diff", "t_test", "t_stat", "t_p"])
    for t in study.tests:
        w.writerow([t.model, repr(t.a), repr(t.b), t.n_a, t.n_b, t.n_questions, _num(t.mean_diff, 6),
                    t.t_test or "", _num(t.t_stat, 6), _num(t.t_p, 6)])
    return buf.getvalue()


def to_markdown(study: TemperatureStudy) -> str:
    """Two Markdown tables: the score per model × temperature (percent, CI, answers, questions), then
    the tests; each says it works at the question level."""
    label = "DAHL Score" if study.metric == "precision" else study.metric
    pct = round(100 * study.level)
    lines = [(f"## {label} against temperature (mean of the question means; {pct}% bootstrap CI over questions, "
              f"seed {study.seed})"), "",
             f"| model | temperature | {label} | {pct}% CI | n | excluded | questions |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for c in study.cells:
        ci = _pct_ci(c.ci)
        lines.append(f"| {c.model} | {c.temperature:g} | {_pct(c.mean)} | {ci} | {c.n} | {c.excluded} | {c.questions} |")
    best = [f"{m} {b.temperature:g}" for m in study.models if (b := study.best(m)) is not None]
    lines += ["", f"Best temperature: {', '.join(best) or '—'}."]
    if study.without_temperature:
        lines.append(f"{study.without_temperature} answers without meta.sampling.temperature were left out.")
    pairs = {"reference": f"each temperature against {study.reference:g}" if study.reference is not None else "",
             "adjacent": "adjacent temperatures", "all": "every pair of temperatures"}[study.compare]
    lines += ["", (f"## {TEST[0].upper() + TEST[1:]} ({pairs}; each question's mean over its samples, the "
                   "questions both temperatures scored; two-sided, uncorrected)"), "",
              "| model | a | b | n_a | n_b | questions | a − b | t | p |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in study.tests:
        diff = "—" if t.mean_diff is None else f"{100 * t.mean_diff:+.1f}"
        lines.append(f"| {t.model} | {t.a:g} | {t.b:g} | {t.n_a} | {t.n_b} | {t.n_questions} | {diff} | "
                     f"{_num(t.t_stat) or '—'} | {format_p(t.t_p)} |")
    return "\n".join(lines) + "\n"
