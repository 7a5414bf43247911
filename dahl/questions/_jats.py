"""Articles from JATS XML (PMC ``efetch``), parsed with lxml; metadata-only replies detected.

NCBI answers HTTP 200 for an article outside the PMC Open Access subset too, with its
front matter only (title, abstract, permissions) and no ``<body>``: such a reply is
:data:`METADATA_ONLY`, reported and never turned into questions. The parser resolves
no entity and reads nothing from the network (untrusted XML).
"""

from __future__ import annotations

from typing import Literal

from lxml import etree

from dahl.errors import InputError
from dahl.questions._articles import Article

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

    Text: title, abstract paragraphs, then body paragraphs (tables, figures, formulas and
    references left out), separated by blank lines. Licence: ``<license>``'s xlink:href,
    else its ``license-type``, else its text.

    Args:
        pmc_id: the id asked for (``PMC123``), the article's id.
        xml: the reply body.

    Returns:
        The article; :data:`METADATA_ONLY` when the reply has front matter but no body
        (outside the Open Access subset); :data:`NOT_FOUND` when it holds no article.

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
    number = pmc_id.removeprefix("PMC")
    return Article(id=pmc_id, title=title, text=text, license=license_text,
                   url=f"https://www.ncbi.nlm.nih.gov/pmc/articles/PMC{number}/")
