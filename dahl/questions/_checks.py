"""Checks a benchmark question must pass: context dependence, duplicates, category.

Context dependence: DAHL's three regex families (Seo et al. 2024, §3.2.2; later members dahl's) plus
"based on / according to" unless a named standard follows ("the DSM-5 criteria", "the WHO,"). Duplicates compare :func:`question_key`, exactly or by rapidfuzz ratio.
Categories: the 28 MedMCQA fields (Pal et al. 2023) plus "Other" (§3.2.3), lower case.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from rapidfuzz import fuzz, process

from dahl.errors import ConfigError
from dahl.records import normalize_text

__all__ = [
    "CATEGORIES",
    "CONTEXT_FLAGS",
    "NEAR_SYNONYMS",
    "NEAR_THRESHOLD",
    "OTHER",
    "canonical_category",
    "context_flags",
    "duplicate_clusters",
    "exact_duplicates",
    "question_key",
]

#: "Other": questions outside the 28 fields (DAHL §3.2.3).
OTHER = "other"

#: The 28 fields of DAHL §3.2.3 (from Pal et al. 2023) and "other", canonical spellings.
CATEGORIES: tuple[str, ...] = (
    "anaesthesia", "anatomy", "bio-statistics", "biochemistry", "cardiology", "community medicine",
    "dental", "dermatology", "ent", "forensic medicine", "genetics", "immunology", "medicine",
    "microbiology", "neurology", "obstetrics gynaecology", "oncology", "ophthalmology", "orthopaedics",
    "preventive and social medicine", "pathology", "pediatrics", "pharmacology", "physiology",
    "psychiatry", "public health", "radiology", "surgery", OTHER,
)

# Other spellings of a canonical category, as _fold() leaves them.
_ALIASES: dict[str, str] = {
    "anesthesia": "anaesthesia", "anaesthesiology": "anaesthesia", "anesthesiology": "anaesthesia",
    "biostatistics": "bio-statistics", "bio statistics": "bio-statistics", "statistics": "bio-statistics",
    "dentistry": "dental", "skin": "dermatology",
    "ear nose throat": "ent", "ent ear nose throat": "ent", "otorhinolaryngology": "ent",
    "o&g": "obstetrics gynaecology", "og": "obstetrics gynaecology",
    "obstetrics and gynaecology": "obstetrics gynaecology", "gynaecology obstetrics": "obstetrics gynaecology",
    "gynaecology and obstetrics": "obstetrics gynaecology", "gynaecology & obstetrics": "obstetrics gynaecology",
    "obstetrics & gynaecology": "obstetrics gynaecology", "obstetrics gynecology": "obstetrics gynaecology",
    "obstetrics and gynecology": "obstetrics gynaecology", "o&g obstetrics and gynaecology": "obstetrics gynaecology",
    "orthopedics": "orthopaedics", "paediatrics": "pediatrics",
    "psm": "preventive and social medicine", "preventive & social medicine": "preventive and social medicine",
    "psm preventive and social medicine": "preventive and social medicine",
}

#: Pairs of labels that name the same field: a set using both splits one field in two.
#: "statistics" is no category of the paper; the released file uses it beside "bio-statistics".
#: Community medicine and PSM (preventive and social medicine) are two categories of §3.2.3.
NEAR_SYNONYMS: tuple[tuple[str, str], ...] = (
    ("statistics", "bio-statistics"),
    ("biostatistics", "bio-statistics"),
    ("psm", "preventive and social medicine"),
)

#: Near-duplicate threshold (``fuzz.ratio`` of the question keys, 0–100).
NEAR_THRESHOLD = 95.0

_SOURCE_NOUNS = (r"(?:study|studies|analysis|analyses|paper|article|research|case\s+reports?|case\s+series|"
                 r"case\s+presented|case|report|trial|review|survey|experiment|investigation|authors?|"
                 r"findings|results|text|passage|cohort|patients?\s+described)")
# A name (capitalized words, acronyms, numbers, "(ESC)", joined by of/on/for/and/the/in/&) that is
# a standard: followed by "criteria", "guidelines"… (up to four words between) or ending the phrase.
_NAME_WORD = r"(?:[A-Z][\w'’‐/-]*|[\w‐-]*\d[\w‐/–-]*|\([A-Z][\w‐-]*\))"
_NAMED_STANDARD = (
    r"\s+(?:(?i:the)\s+)?" + _NAME_WORD + r"(?:\s+(?:(?:of|on|for|and|the|in|&)\s+)*" + _NAME_WORD + r")*"
    r"(?:(?:\s+[a-z][\w‐-]*){0,4}?\s+(?:criteria|guidelines?|classifications?|staging|grading|scoring"
    r"|recommendations?|standards?|consensus|definitions?|scales?)\b|\s*(?:,|\?|$))"
)
# (name, pattern); the names are the flags written to a question's output row.
_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # (1) the/this/that + study/analysis/paper…; "the study of X" is a field, not an article,
    # and in "this results in" the noun is a verb.
    ("context_reference", re.compile(
        rf"\b(?!this\s+results\s+in\b)(?:the|this|that|these|those)\s+(?:present\s+|current\s+|above\s+|given\s+|described\s+)?"
        rf"{_SOURCE_NOUNS}\b(?!\s+of\b)", re.IGNORECASE)),
    # (2) mentioned/inferred/addressed…
    ("context_verb", re.compile(
        r"\b(?:mentioned|inferred|addressed|discussed|described|highlighted|presented|outlined|stated|noted)\b",
        re.IGNORECASE)),
    # (3) was/were + used/identified…
    ("context_finding", re.compile(
        r"\b(?:was|were)\s+(?:used|identified|found|observed|employed|conducted|performed|reported|measured|"
        r"included|selected|developed|detected|noted)\b", re.IGNORECASE)),
    # dahl's addition: the answer hinges on an unnamed source (a named standard is none).
    ("context_basis", re.compile(r"\b(?i:based\s+on|depending\s+on|according\s+to)\b(?!" + _NAMED_STANDARD + ")")),
)

#: The context-dependence flags :func:`context_flags` can return, in family order.
CONTEXT_FLAGS: tuple[str, ...] = tuple(name for name, _ in _FAMILIES)

_PUNCT = str.maketrans({c: " " for c in string.punctuation if c not in "&-"})


def context_flags(question: str) -> list[str]:
    """The context-dependence families (DAHL §3.2.2) that ``question`` matches.

    Args:
        question: one question text.

    Returns:
        Flags from :data:`CONTEXT_FLAGS`, in that order; empty when none matches.
    """
    return [name for name, pattern in _FAMILIES if pattern.search(question)]


def question_key(question: str) -> str:
    """The duplicate key of ``question``: NFC, whitespace collapsed, case-folded."""
    return normalize_text(question).casefold()


def exact_duplicates(questions: Sequence[str]) -> list[int | None]:
    """For each question, the index of the first earlier question with the same key, else None.

    Args:
        questions: question texts in file order, length n.

    Returns:
        A list of length n; ``None`` for the first occurrence of each key.
    """
    first: dict[str, int] = {}
    out: list[int | None] = []
    for i, question in enumerate(questions):
        key = question_key(question)
        out.append(first.get(key))
        first.setdefault(key, i)
    return out


def duplicate_clusters(questions: Sequence[str], *, near: float = NEAR_THRESHOLD) -> list[int]:
    """Cluster exact and near-duplicate questions (CPU: run it in a worker thread).

    Greedy in file order: a question joins the cluster whose first question's key has the highest
    ``fuzz.ratio`` with its own, when at least ``near`` (earliest on ties), else starts one.

    Args:
        questions: question texts, length n.
        near: similarity threshold in [0, 100]; 100 clusters exact duplicates only.

    Returns:
        A list of length n: the index of the first question of each question's cluster.

    Raises:
        ConfigError: ``near`` outside [0, 100].
    """
    if not 0.0 <= near <= 100.0:
        raise ConfigError(f"near-duplicate threshold must be in [0, 100], got {near}")
    by_key: dict[str, int] = {}
    heads: list[str] = []
    head_index: list[int] = []
    out: list[int] = []
    for i, question in enumerate(questions):
        key = question_key(question)
        if key in by_key:
            out.append(by_key[key])
            continue
        found = (process.extractOne(key, heads, scorer=fuzz.ratio, score_cutoff=near)
                 if heads and near < 100.0 else None)
        if found is None:
            heads.append(key)
            head_index.append(i)
            by_key[key] = i
            out.append(i)
        else:
            by_key[key] = head_index[found[2]]
            out.append(head_index[found[2]])
    return out


def _fold(name: str) -> str:
    return " ".join(normalize_text(name).casefold().translate(_PUNCT).split())


def canonical_category(name: str) -> str | None:
    """The canonical spelling of category ``name``, or None when it names no category.

    Case, Unicode form, spacing and punctuation other than ``&`` and ``-`` are ignored; known other
    spellings ("O&G", "PSM", "Anesthesia") map to the category of :data:`CATEGORIES` they name.
    """
    key = _fold(name)
    if key in CATEGORIES:
        return key
    return _ALIASES.get(key) or _ALIASES.get(key.replace("-", " "))
