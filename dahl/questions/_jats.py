"""Articles from JATS XML (PMC ``efetch``), parsed with lxml (no entities, no network).

A reply with front matter but no ``<body>`` (outside the Open Access subset) is
:data:`METADATA_ONLY`.
"""

from __future__ import annotations

from typing import Literal

from lxml import etree

from dahl.errors import InputError
from dahl.questions._articles import Article, article_url

__all__ = ["METADATA_ONLY", "NOT_FOUND", "parse_jats"]

METADATA_ONLY: Literal["metadata_only"] = "metadata_only"
NOT_FOUND: Literal["not_found"] = "not_found"

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
_XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
_SKIP = frozenset({"table-wrap", "fig", "disp-formula", "ref-list", "supplementary-material"})


def _text(element: etree._Element | None) -> str:
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def _paragraphs(element: etree._Element | None) -> list[str]:
    if element is None:
        return []
    out = []
    for p in element.iter("p"):
        if any(a.tag in _SKIP for a in p.iterancestors()):
            continue
        if text := _text(p):
            out.append(text)
    return out


def parse_jats(pmc_id: str, xml: bytes) -> Article | Literal["metadata_only", "not_found"]:
    """The article of one ``efetch`` reply, or why there is none.

    Text: title, abstract, then body paragraphs (no tables, figures, formulas or references),
    separated by blank lines. Licence: ``<license>``'s xlink:href, else its type, else its text.

    Returns:
        The article; :data:`METADATA_ONLY` (front matter, no body) or :data:`NOT_FOUND`.

    Raises:
        InputError: the reply is not XML (the id named).
    """
    try:
        root = etree.fromstring(xml, parser=_PARSER)
    except etree.XMLSyntaxError as exc:
        raise InputError(f"efetch reply for {pmc_id} is not XML: {exc}", field=pmc_id) from None
    article = root if root.tag == "article" else root.find("article")
    if article is None:
        return NOT_FOUND
    body = article.find("body")
    if body is None or not _paragraphs(body):
        return METADATA_ONLY
    meta = article.find("front/article-meta")
    title = _text(meta.find("title-group/article-title") if meta is not None else None)
    abstract = _paragraphs(meta.find("abstract") if meta is not None else None)
    licence = article.find(".//permissions/license")
    license_text = ""
    if licence is not None:
        license_text = licence.get(_XLINK_HREF) or licence.get("license-type") or _text(licence)
    text = "\n\n".join([p for p in [title, *abstract, *_paragraphs(body)] if p])
    return Article(id=pmc_id, title=title, text=text, license=license_text, url=article_url(pmc_id))
