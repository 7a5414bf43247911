"""What ``dahl score`` prints when a run ends: the result table, fitted to the console
(columns dropped in :data:`DROP_ORDER`, never cut), and the summary lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dahl.cli._progress import count, usd
from dahl.run._score import ScoreReport

__all__ = ["DROP_ORDER", "RECALL_COLUMNS", "partial_message", "print_summary", "recall_lines", "result_table"]

#: Result-table columns in the order they are dropped when the console is too narrow
#: (``F1@K`` stands for the run's K).
DROP_ORDER = ("no penalty", "95% CI", "F1 of means", "abstained", "excluded", "answers", "F1@K", "mean F1", "Rec^w")
#: Recall columns: header -> key of a model's summary.json ``recall`` block ("mean F1": the mean of the
#: per-answer F1; "F1 of means": F1 of the model's DAHL Score and mean Rec).
RECALL_COLUMNS = {"Rec": "recall", "Rec^w": "recall_w", "mean F1": "f1", "F1 of means": "f1_of_means"}
#: Shorter headers, tried before a column is dropped.
_SHORT = {"abstained": "abst.", "excluded": "excl.", "mean F1": "F1"}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ci(ci: list[float] | None) -> str:
    return "" if not ci else f"{100 * ci[0]:.1f}–{100 * ci[1]:.1f}"


def _columns(summary: dict[str, Any]) -> dict[str, list[str]]:
    """Every column's cells by its name, rows sorted by model."""
    models = sorted(summary["models"].items())
    recall = {} if not any("recall" in m for _, m in models) else {
        header: [_pct((m.get("recall") or {}).get(key)) for _, m in models] for header, key in RECALL_COLUMNS.items()
    }
    return {
        "model": [name for name, _ in models],
        "answers": [f"{m['n_answers']:,}" for _, m in models],
        "scored": [f"{m['n_scored']:,}" for _, m in models],
        "abstained": [f"{m['n_abstained']:,}" for _, m in models],
        "excluded": [f"{m['n_excluded']:,}" for _, m in models],
        "DAHL Score": [_pct(m["dahl_score"]) for _, m in models],
        "95% CI": [_ci(m["dahl_score_ci"]) for _, m in models],
        "FActScore": [_pct(m["factscore"]) for _, m in models],
        "no penalty": [_pct(m["factscore_init"]) for _, m in models],
        "F1@K": [_pct(m["f1_at_k"]) for _, m in models],
        **recall,
    }


def _table(cells: dict[str, list[str]], names: list[str], k: int, short: bool, hidden: list[str]) -> Table:
    table = Table(title="dahl scores (percent)", title_justify="left")
    for name in names:
        header = f"F1@{k}" if name == "F1@K" else _SHORT.get(name, name) if short else name
        if name == "model":  # a long model name folds onto a second line rather than being cut
            table.add_column(header, justify="left", overflow="fold")
        else:
            table.add_column(header, justify="right", no_wrap=True, min_width=max([len(header), *map(len, cells[name])]))
    for row in zip(*(cells[name] for name in names), strict=True):
        table.add_row(*row)
    if hidden:
        shown = ", ".join(f"F1@{k}" if h == "F1@K" else h for h in hidden)
        table.caption = f"not shown at this width: {shown} (see summary.json)"
        table.caption_justify = "left"
    return table


def result_table(summary: dict[str, Any], k: int, width: int) -> Table:
    """The per-model result table, fitted to ``width`` console cells (a caption names dropped columns).

    ``summary`` is the content of ``summary.json``; ``k`` the run's K, for the ``F1@K`` header.
    """
    cells = _columns(summary)
    names = list(cells)
    measure = Console(width=10_000)
    hidden: list[str] = []
    short = False
    drops = list(DROP_ORDER)
    while True:
        table = _table(cells, names, k, short, hidden)
        if measure.measure(table).maximum <= width or not drops:
            return table
        if not short and drops[0] in _SHORT:
            short = True
            continue
        name = drops.pop(0)
        if name in names:  # recall columns only with reference facts
            names.remove(name)
            hidden.append(name)


_NULL_WORDS = {"empty_fstar": "empty F*", "zero_weight": "zero weight", "coverage_error": "coverage error",
               "split_error": "split error", "no_refs": "no reference set"}


def recall_lines(summary: dict[str, Any]) -> list[str]:
    """The summary lines of recall (and a warning when no answer found a reference set) and of
    unsupported claims by reason, over every model of ``summary`` (``summary.json``); may be empty."""
    models = list(summary.get("models", {}).values())
    lines = []
    blocks = [m["recall"] for m in models if m.get("recall")]
    if blocks:
        nulls: dict[str, int] = {}
        for b in blocks:
            for reason, n in (b.get("null_by_reason") or {}).items():
                nulls[reason] = nulls.get(reason, 0) + int(n)
        shown = [f"{n:,} {_NULL_WORDS.get(r, r)}" for r, n in nulls.items() if n]
        lines.append(f"recall: {count(sum(int(b.get('n') or 0) for b in blocks), 'answer')} with recall "
                     f"({sum(int(b.get('n_abstained') or 0) for b in blocks):,} abstained, counted 0)"
                     + (f"; null: {', '.join(shown)}" if shown else ""))
        if nulls.get("no_refs") and not any(n for r, n in nulls.items() if r != "no_refs") \
                and not any(b.get("n") for b in blocks):
            lines.append("warning: no answer's question matches a set of the reference facts (a set is found by "
                         "question_id, the hash of the question text, or by that text): check the refs file's "
                         "question field")
    reasons: dict[str, int] = {}
    for m in models:
        for reason, n in (m.get("unsupported_by_reason") or {}).items():
            reasons[reason] = reasons.get(reason, 0) + int(n)
    if reasons:
        lines.append("unsupported claims by reason: "
                     + ", ".join(f"{n:,} {r.replace('_', ' ')}" for r, n in reasons.items()))
    return lines


def partial_message(summary: dict[str, Any], skipped: int) -> str:
    """Why a finished run is partial (exit status 6), from ``summary`` (``summary.json``) and the
    number of ``skipped`` bad input records."""
    models = summary.get("models", {}).values()
    claims = sum(int((m.get("labels") or {}).get("error", 0)) for m in models)
    covers = sum(int(((m.get("recall") or {}).get("null_by_reason") or {}).get("coverage_error", 0)) for m in models)
    what = [f"{count(skipped, 'input record')} skipped"] if skipped else []
    what += [f"{count(claims, 'claim')} ended in error"] if claims else []
    what += [f"coverage failed for {count(covers, 'answer')}"] if covers else []
    retry = "; re-running retries the errors" if claims or covers or not skipped else ""
    return f"{', '.join(what) or 'some answers failed to split'} (exit status 6{retry})"


def print_summary(console: Console, report: ScoreReport, out_dir: Path) -> None:
    """Print on ``console`` the lines after the result table: what was scored, reused, cached and failed."""
    run = report.summary["run"]
    console.print(
        f"{count(run['answers_done'], 'answer')} scored now, {run['answers_resumed']:,} resumed, "
        f"{count(run['claims_done'], 'claim')} in {run['elapsed_s']:,.1f} s -> {report.answers_path}, "
        f"{report.summary_path}"
    )
    changes = report.summary["changes"]
    if changes["previous_run"]:
        what = "configuration changed" if changes["config_changed"] else "same configuration"
        console.print(f"since the last run in {out_dir}: {what}; {count(changes['answers_reused'], 'answer')} reused, "
                      f"{changes['answers_scored']:,} new or changed, {changes['answers_dropped']:,} dropped")
    whole = f" ({count(run['answers_cached'], 'answer')} found whole)" if run["answers_cached"] else ""
    console.print(f"claims: {run['claims_checked']:,} checked now, {run['claims_cached']:,} from the cache{whole}, "
                  f"{run['claims_deduped']:,} shared with an identical claim")
    if "facts_judged" in run:  # the run had a cover stage (recall)
        console.print(f"coverage: {count(run['answers_covered'], 'answer')} covered now, "
                      f"{count(run['facts_judged'], 'reference fact')} judged, {run['facts_failed']:,} in error")
    if run["lanes"]:
        t = report.counters.lane_totals()
        cost_lanes = (run.get("cost") or {}).get("lanes") or {}
        cached = sum(lane.get("cached_tokens", 0) for lane in cost_lanes.values())
        written = sum(lane.get("cache_write_tokens", 0) for lane in cost_lanes.values())
        caching = f" ({cached:,} prompt tokens read from the provider's cache, {written:,} written to it)" if (
            cached or written) else ""
        console.print(f"HTTP: {count(t['requests'], 'request')}, {t['rate_limited']:,} answered 429, "
                      f"{count(t['retries'], 'retry', 'retries')}, {count(t['tokens_used'], 'token')}{caching}")
    cost = run.get("cost")
    if isinstance(cost, dict) and cost.get("lanes"):
        stages = ", ".join(f"{name} {usd(lane['usd'])}" for name, lane in cost["lanes"].items())
        console.print(f"money: {usd(cost['usd'])} ({stages}; prices of {cost['price_table_date']})")
    errors = report.counters.error_count()
    if errors:  # the total the progress display showed; rejected records are InputErrors
        by_class = {**run["errors"], **({"InputError": run["input_errors"]} if run["input_errors"] else {})}
        console.print(f"{count(errors, 'error')} by class: "
                      + ", ".join(f"{name} {n:,}" for name, n in sorted(by_class.items())))
    for line in recall_lines(report.summary):
        console.print(line)
    if report.counters.input_errors:
        console.print(f"[yellow]{count(report.counters.input_errors, 'input record')} skipped[/]; first ones:")
        for err in report.input_errors[:5]:
            console.print(f"  {escape(str(err))}")
