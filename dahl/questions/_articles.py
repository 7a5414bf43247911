"""Articles to generate questions from: JSON Lines ``{id, title, text, license?, url?}``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import msgspec

from dahl.errors import InputError
from dahl.formats._jsonpath import decode_json

__all__ = ["Article", "article_url", "read_articles"]


class Article(msgspec.Struct, frozen=True, kw_only=True):
    """One article.

    Attributes:
        id: its id (PMC id, PMID, or the user's).
        title: its title ("" when none).
        text: title + abstract … conclusion, plain text.
        license: its licence ("" when unknown).
        url: where it is from ("" when unknown).
        line: 1-based line in its file (0 when fetched).
    """

    id: str
    text: str
    title: str = ""
    license: str = ""
    url: str = ""
    line: int = 0


class _ArticleIn(msgspec.Struct, kw_only=True):
    id: str | int
    text: str
    title: str | None = None
    license: str | None = None
    url: str | None = None


_DECODER = msgspec.json.Decoder(_ArticleIn)


def read_articles(path: Path) -> Iterator[Article]:
    """The articles of a JSONL file, in file order (blocking; blank lines skipped).

    Raises:
        InputError: unreadable file, a bad line (file, line and field named), an empty text, or an
            id seen twice.
    """
    seen: set[str] = set()
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read articles: {exc.strerror}", file=str(path)) from exc
    with handle:
        for n, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            item = decode_json(_DECODER, raw, file=str(path), line=n, invalid="not an article: ")
            article_id = str(item.id)
            if not item.text.strip():
                raise InputError("empty article text", file=str(path), line=n, field="text")
            if article_id in seen:
                raise InputError(f"article id {article_id!r} seen twice", file=str(path), line=n, field="id")
            seen.add(article_id)
            yield Article(id=article_id, title=item.title or "", text=item.text, license=item.license or "",
                          url=item.url or "", line=n)


_PMC_ID = re.compile(r"PMC\d+", re.IGNORECASE)


def article_url(article_id: str, url: str = "") -> str:
    """``url`` when given, else the PMC page of a PMC id (``PMC123`` →
    ``https://www.ncbi.nlm.nih.gov/pmc/articles/PMC123/``), else ``""``."""
    if url or not _PMC_ID.fullmatch(article_id):
        return url
    return f"https://www.ncbi.nlm.nih.gov/pmc/articles/PMC{article_id[3:]}/"
