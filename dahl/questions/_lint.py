"""``dahl questions lint``: the checks of :mod:`dahl.questions._checks` on a DAHL ``questions.csv``.

Findings either drop a row in ``dahl questions build`` (duplicates, context dependence, empty
questions) or are informational (category spellings, unused categories, no "?").
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import msgspec

from dahl.errors import InputError
from dahl.questions._checks import (
    CATEGORIES,
    CONTEXT_FLAGS,
    NEAR_SYNONYMS,
    NEAR_THRESHOLD,
    canonical_category,
    context_flags,
    duplicate_clusters,
    exact_duplicates,
)

__all__ = ["EXAMPLES", "LintReport", "lint_questions", "read_questions"]

#: Example questions kept per finding in a report.
EXAMPLES = 3

_REQUIRED = ("question", "category")


class LintReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`lint_questions` found in one question file.

    Attributes:
        file: the file read.
        rows: data rows (the header not counted).
        unique_questions: distinct question keys.
        duplicate_rows: rows whose key equals an earlier row's.
        near_duplicate_rows: other rows with a ``fuzz.ratio`` >= ``near`` with an earlier question.
        near: the near-duplicate threshold used (0-100).
        empty_questions: rows with an empty question.
        context: rows per context-dependence flag (:data:`CONTEXT_FLAGS`), zero counts kept.
        context_dependent: rows with at least one context flag.
        context_examples: up to :data:`EXAMPLES` questions per flag.
        no_question_mark: non-empty questions not ending in "?".
        no_question_mark_examples: up to :data:`EXAMPLES` of them.
        categories: rows per category label, as written.
        non_canonical: non-canonical labels -> the canonical category they name ("" when none).
        unused_categories: canonical categories no row uses.
        near_synonyms: ``[label, label]`` pairs of near-synonym categories both in use.
        dropping: rows ``dahl questions build`` would drop (a row counted once).
    """

    file: str
    rows: int
    unique_questions: int
    duplicate_rows: int
    near_duplicate_rows: int
    near: float
    empty_questions: int
    context: dict[str, int]
    context_dependent: int
    context_examples: dict[str, list[str]]
    no_question_mark: int
    no_question_mark_examples: list[str]
    categories: dict[str, int]
    non_canonical: dict[str, str]
    unused_categories: list[str]
    near_synonyms: list[list[str]]
    dropping: int


def read_questions(path: Path) -> list[tuple[int, str, str]]:
    """Read ``(line, question, category)`` per data row of a CSV file (``line``: 1-based start line).

    Args:
        path: a UTF-8 CSV (a BOM is allowed) with a header naming ``question`` and ``category``.

    Raises:
        InputError: unreadable, not UTF-8, not a CSV, or a required column missing (file, line and
            field named).
    """
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte {exc.start}): not a CSV file?", file=name, line=line) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=name) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InputError("contains a NUL byte: not a CSV file", file=name, line=line)
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise InputError("empty file: no header", file=name, line=1)
        header = [h.strip() for h in header]
        for column in _REQUIRED:
            if column not in header:
                raise InputError(f"missing column (header has {', '.join(map(repr, header))})",
                                 file=name, line=1, field=column)
        q_at, c_at = header.index("question"), header.index("category")
        rows: list[tuple[int, str, str]] = []
        start = reader.line_num + 1
        for record in reader:
            if record and len(record) != len(header):
                raise InputError(f"{len(record)} fields where the header has {len(header)}: not a CSV "
                                 f"file, or an unquoted comma", file=name, line=start,
                                 field=header[min(len(record), len(header)) - 1])
            if record:
                rows.append((start, record[q_at], record[c_at]))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", file=name, line=reader.line_num) from None
    return rows


def lint_questions(path: Path, *, near: float = NEAR_THRESHOLD) -> LintReport:
    """Run every question check on the file at ``path`` (CPU: run it in a worker thread).

    Args:
        path: a question CSV (see :func:`read_questions`).
        near: near-duplicate threshold (``fuzz.ratio``, 0-100); 100 checks exact duplicates only.

    Raises:
        InputError: the file cannot be read as a question CSV.
        ConfigError: ``near`` outside [0, 100].
    """
    rows = read_questions(path)
    questions = [q for _, q, _ in rows]
    exact = exact_duplicates(questions)
    clusters = duplicate_clusters(questions, near=near)
    drop = [e is not None or c != i for i, (e, c) in enumerate(zip(exact, clusters, strict=True))]
    near_rows = sum(1 for i, (e, c) in enumerate(zip(exact, clusters, strict=True)) if e is None and c != i)

    context = dict.fromkeys(CONTEXT_FLAGS, 0)
    examples: dict[str, list[str]] = {flag: [] for flag in CONTEXT_FLAGS}
    dependent = empty = 0
    open_ended: list[str] = []
    for i, question in enumerate(questions):
        text = question.strip()
        if not text:
            empty += 1
            drop[i] = True
            continue
        flags = context_flags(text)
        for flag in flags:
            context[flag] += 1
            if len(examples[flag]) < EXAMPLES:
                examples[flag].append(text)
        if flags:
            dependent += 1
            drop[i] = True
        if not text.endswith("?"):
            open_ended.append(text)

    categories = Counter(c for _, _, c in rows)
    canonical = {label: canonical_category(label) for label in categories}
    used = {c for c in canonical.values() if c is not None} | set(categories)
    synonyms = [[a, b] for a, b in NEAR_SYNONYMS if a in categories and b in categories]
    return LintReport(
        file=str(path),
        rows=len(rows),
        unique_questions=sum(1 for e in exact if e is None),
        duplicate_rows=sum(1 for e in exact if e is not None),
        near_duplicate_rows=near_rows,
        near=near,
        empty_questions=empty,
        context=context,
        context_dependent=dependent,
        context_examples={flag: ex for flag, ex in examples.items() if ex},
        no_question_mark=len(open_ended),
        no_question_mark_examples=open_ended[:EXAMPLES],
        categories=dict(sorted(categories.items(), key=lambda kv: (-kv[1], kv[0]))),
        non_canonical={label: c or "" for label, c in sorted(canonical.items()) if c != label},
        unused_categories=[c for c in CATEGORIES if c not in used],
        near_synonyms=synonyms,
        dropping=sum(drop),
    )
