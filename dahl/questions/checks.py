"""Checks of exam questions: context dependence, duplicates, categories (minimal; part L replaces it).

The context regex families are DAHL's question filter (Wu et al. 2024, §3.2): (1)
the/this/that + study/analysis/paper…, (2) mentioned/inferred/addressed…, (3) was/were +
used/identified…; plus "based on", "depending on", "according to". The 28 fields are
those of MedMCQA (Pal et al. 2023), with "Other".
"""

from __future__ import annotations

import re
import unicodedata

from rapidfuzz import fuzz

__all__ = ["CATEGORIES", "canonical_category", "context_flags", "duplicate_clusters"]

#: The 28 fields (MedMCQA, Pal et al. 2023) and "Other", canonical spellings.
CATEGORIES: tuple[str, ...] = (
    "Anaesthesia", "Anatomy", "Biochemistry", "Dental", "ENT", "Forensic Medicine",
    "Gynaecology & Obstetrics", "Medicine", "Microbiology", "Ophthalmology", "Orthopaedics",
    "Pathology", "Pediatrics", "Pharmacology", "Physiology", "Psychiatry", "Radiology", "Skin",
    "Preventive & Social Medicine", "Surgery", "Cardiology", "Oncology", "Neurology", "Genetics",
    "Immunology", "Endocrinology", "Nephrology", "Bio-statistics", "Other",
)

_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("context:study", re.compile(r"\b(?:the|this|that|these|those)\s+(?:study|studies|analysis|paper|article|"
                                 r"research|trial|report|case|survey|review|experiment)\b", re.I)),
    ("context:mentioned", re.compile(r"\b(?:mentioned|inferred|addressed|described|discussed|presented|"
                                     r"reported|stated)\b", re.I)),
    ("context:was_used", re.compile(r"\b(?:was|were)\s+(?:used|identified|observed|found|included|"
                                    r"enrolled|selected|measured)\b", re.I)),
    ("context:according", re.compile(r"\b(?:based on|depending on|according to)\b", re.I)),
)


def context_flags(question: str) -> list[str]:
    """The context-dependence flags of ``question`` (one per regex family matched, in family order)."""
    return [name for name, pattern in _FAMILIES if pattern.search(question)]


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def duplicate_clusters(questions: list[str], near: float | None = 95.0) -> list[int]:
    """Cluster id per question: the index of the first question it duplicates (itself when none).

    Exact duplicates after NFC, casefold and whitespace folding; near duplicates when
    ``rapidfuzz.fuzz.ratio`` >= ``near`` (None: exact only). O(n·k) over k cluster heads.
    """
    heads: dict[str, int] = {}
    kept: list[tuple[str, int]] = []
    out: list[int] = []
    for n, question in enumerate(questions):
        key = _norm(question)
        if key in heads:
            out.append(heads[key])
            continue
        cluster = n
        if near is not None:
            for text, head in kept:
                if fuzz.ratio(key, text, score_cutoff=near):
                    cluster = head
                    break
        heads[key] = cluster
        if cluster == n:
            kept.append((key, n))
        out.append(cluster)
    return out


_CANON = {_norm(c): c for c in CATEGORIES}


def canonical_category(name: str) -> str | None:
    """The canonical spelling of category ``name`` (case and whitespace folded), or None."""
    return _CANON.get(_norm(name))
