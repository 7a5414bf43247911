"""The build journal ``<out>.journal.jsonl``: one fsynced line per finished article, so a kill
resumes; the CSV is written from it in article order.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from dahl.engine._ends import read_back
from dahl.errors import InputError
from dahl.formats._appendlog import LineAppender

__all__ = ["ArticleQuestions", "Journal", "Judged", "check_journal", "journal_path", "read_journal"]


class Judged(msgspec.Struct, frozen=True, kw_only=True):
    """One generated question and the judge's answer.

    Attributes:
        question: the question text.
        answerable: True when the judge said it stands without its article.
        category: a canonical category, ``"ambiguous"``, or ``""`` (the judge's answer was not one).
        confidence: the judge's confidence in the category, 0-1.
    """

    question: str
    answerable: bool
    category: str
    confidence: float


class ArticleQuestions(msgspec.Struct, frozen=True, kw_only=True):
    """The questions of one article (a journal line).

    Attributes:
        article_id, title, license, url: the article's (``url`` "" when unknown).
        model: the generating model's name.
        generator: fingerprint of the generating endpoint (model, template, sampling).
        per_article: questions asked for.
        questions: in generation order.
    """

    article_id: str
    title: str
    license: str
    model: str
    generator: str
    per_article: int
    questions: tuple[Judged, ...]
    url: str = ""


_DECODER = msgspec.json.Decoder(ArticleQuestions)
_ENCODER = msgspec.json.Encoder()


def journal_path(out: Path) -> Path:
    """The journal of CSV ``out``: ``questions.csv`` → ``questions.csv.journal.jsonl``."""
    return out.with_name(out.name + ".journal.jsonl")


def read_journal(path: Path) -> dict[str, ArticleQuestions]:
    """The finished articles of ``path`` by id (blocking); truncates a torn last line.

    Raises:
        InputError: a complete line is not a journal line (the file is not this command's).
    """
    return {item.article_id: item for item in read_back(path, _DECODER.decode, "questions journal")}


def check_journal(path: Path, done: dict[str, ArticleQuestions], generator: str, per_article: int) -> None:
    """Refuse to continue a journal begun with another generator or question count.

    Raises:
        InputError: an article of ``done`` was built otherwise (file and setting named).
    """
    for item in done.values():
        if item.generator != generator or item.per_article != per_article:
            which = "the generating model, template or sampling" if item.generator != generator else "--per-article"
            raise InputError(f"its articles were built with other settings ({which}); re-run with the same "
                             "options, or choose another -o", file=str(path))


class Journal(LineAppender):
    """The journal opened for appending (blocking methods: call them in a worker thread).

    Raises:
        OutputWriteError: (on open) the file cannot be opened for writing.
    """

    def write(self, item: ArticleQuestions) -> None:
        """Append one line, flushed and fsynced.

        Raises:
            OutputWriteError: the disk is full or the file read-only (earlier lines are kept).
        """
        self.append(_ENCODER.encode(item))
