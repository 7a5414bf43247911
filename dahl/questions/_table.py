"""The questions CSV: flags per question, duplicate clusters, and the rows kept."""

from __future__ import annotations

import collections
import csv
import os
from collections.abc import Iterable
from pathlib import Path

from dahl.errors import OutputWriteError
from dahl.questions._articles import article_url
from dahl.questions._checks import context_flags, duplicate_clusters
from dahl.questions._journal import ArticleQuestions
from dahl.questions._prompts import AMBIGUOUS, GENERATE_TEMPLATE_VERSION, JUDGE_TEMPLATE_VERSION
from dahl.records import content_id

__all__ = ["COLUMNS", "PROMPT_VERSION", "TableCounts", "write_table"]

COLUMNS = ("question", "category", "article_id", "article_url", "title", "license", "generator", "prompt_version",
           "flags", "category_confidence", "duplicate_cluster", "question_id")

#: Both templates' versions, as recorded per row.
PROMPT_VERSION = f"{GENERATE_TEMPLATE_VERSION}+{JUDGE_TEMPLATE_VERSION}"


class TableCounts:
    """What :func:`write_table` wrote.

    Attributes:
        questions: questions generated (all articles).
        written: rows written.
        flagged: questions with at least one flag (kept or dropped).
        dropped: flagged rows left out.
        flags: questions per flag (a question with two flags counts in both).
    """

    def __init__(self) -> None:
        self.questions = 0
        self.written = 0
        self.flagged = 0
        self.dropped = 0
        self.flags: collections.Counter[str] = collections.Counter()


def _flags(question: str, answerable: bool, category: str, duplicate: bool) -> list[str]:
    flags = context_flags(question)
    if not answerable:
        flags.append("needs_article")
    if category == AMBIGUOUS:
        flags.append("ambiguous")
    elif not category:
        flags.append("uncategorized")
    if duplicate:
        flags.append("duplicate")
    return flags


def write_table(out: Path, articles: Iterable[ArticleQuestions], *, near: float | None,
                keep_flagged: bool, prompt_version: str = PROMPT_VERSION) -> TableCounts:
    """Write the CSV of ``articles`` (in the given order) to ``out``, atomically (blocking).

    Columns: ``question, category, article_id, article_url, title, license, generator, prompt_version,
    flags, category_confidence, duplicate_cluster, question_id`` (``article_url``: the article's url, or
    its PMC page when its id is a PMC id; ``question_id``: :func:`~dahl.records.content_id` of the
    text). Flags (``;``-separated, in order): the context families, ``needs_article``, ``ambiguous`` /
    ``uncategorized``, ``duplicate``; flagged rows are dropped unless ``keep_flagged``.

    Args:
        out: the CSV path (replaced whole by rename).
        articles: finished articles, in article-file order.
        near: near-duplicate threshold, rapidfuzz ratio 0-100; None: exact duplicates only.
        keep_flagged: write flagged rows too.
        prompt_version: the prompt version column (``generate+judge`` template versions).

    Raises:
        OutputWriteError: the file cannot be written.
    """
    items = [(article, judged) for article in articles for judged in article.questions]
    clusters = duplicate_clusters([judged.question for _, judged in items], near=100.0 if near is None else near)
    ids = [content_id(judged.question) for _, judged in items]
    counts = TableCounts()
    tmp = out.with_name(out.name + ".tmp")
    try:
        with tmp.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            for n, ((article, judged), cluster) in enumerate(zip(items, clusters, strict=True)):
                counts.questions += 1
                flags = _flags(judged.question, judged.answerable, judged.category, cluster != n)
                counts.flags.update(flags)
                counts.flagged += bool(flags)
                if flags and not keep_flagged:
                    counts.dropped += 1
                    continue
                writer.writerow([judged.question, judged.category, article.article_id,
                                 article_url(article.article_id, article.url), article.title,
                                 article.license, article.model, prompt_version, ";".join(flags),
                                 f"{judged.confidence:.3f}", ids[cluster], ids[n]])
                counts.written += 1
        os.replace(tmp, out)
    except OSError as exc:
        raise OutputWriteError(f"cannot write {out}: {exc.strerror}", path=str(out)) from exc
    return counts
