"""Labels and claim lists the mock server answers with in oracle mode.

Reads two formats itself (independently of ``dahl.formats``), detected per file from
the keys of its first non-blank line:

* dahl JSONL: ``question``, ``response``, ``claims: [{text, label?, reason?}]``; an
  unsupported claim with ``"reason": "contradicted"`` (or ``"label": "contradicted"``)
  is answered as contradicted by a check prompt with evidence passages, any other
  unsupported claim as not supported by the evidence (see :meth:`Oracle.verdict`).
* FActScore labeled JSONL (Min et al. 2023, ``data/labeled``): ``input``, ``output``,
  ``topic``, ``annotations``. Claims are each sentence's ``human-atomic-facts``
  (S -> supported, NS -> unsupported, IR -> irrelevant); a sentence with
  ``is-relevant: false`` contributes its ``model-atomic-facts`` as irrelevant.
  The question is the ``input`` field verbatim, as ``dahl.formats`` reads it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dahl.errors import ConfigError
from dahl.records import normalize_text

__all__ = ["Oracle"]

logger = logging.getLogger(__name__)

_LABEL_NAMES: dict[str, str] = {
    "supported": "supported",
    "s": "supported",
    "true": "supported",
    "unsupported": "unsupported",
    "ns": "unsupported",
    "false": "unsupported",
    "irrelevant": "irrelevant",
    "ir": "irrelevant",
    "unknown": "unknown",
    "contradicted": "contradicted",  # unsupported, and the evidence says otherwise
}

# One observation: (question or None, claim text, label or None when unlabelled).
_Fact = tuple[str, str, str | None]


def _label_of(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    name = _LABEL_NAMES.get(str(raw).strip().lower())
    if name is None:
        raise ConfigError(f"{where}: unknown claim label {raw!r}")
    return name


def _resolve(observed: dict[Any, list[str]]) -> tuple[dict[Any, str], int]:
    """Majority label per key (ties: the label seen first) and the number of keys in conflict."""
    resolved: dict[Any, str] = {}
    conflicts = 0
    for key, labels in observed.items():
        counts = Counter(labels)
        if len(counts) > 1:
            conflicts += 1
        top = max(counts.values())
        resolved[key] = next(label for label in labels if counts[label] == top)
    return resolved, conflicts


class Oracle:
    """Check labels by (question, claim) with a claim-only fallback, and claim lists by response.

    Build with :meth:`load`; an empty oracle answers nothing.

    Attributes:
        conflicts: (question, claim) pairs seen with more than one distinct label.
        claim_conflicts: claim texts (ignoring the question) seen with more than one label.
        answers: number of distinct responses with a claim list.

    Coverage (:meth:`supported`): the claims labelled supported of each response, so a
    reference fact is covered by an answer iff it is one of them (normalized text).
    """

    def __init__(self, facts: Iterable[tuple[str, list[_Fact]]] = ()) -> None:
        by_pair: dict[tuple[str, str], list[str]] = {}
        by_claim: dict[str, list[str]] = {}
        self._splits: dict[str, list[str]] = {}
        self._supported: dict[str, frozenset[str]] = {}
        for response, claims in facts:
            self._splits.setdefault(normalize_text(response), [text for _, text, _ in claims])
            self._supported.setdefault(
                normalize_text(response),
                frozenset(normalize_text(text) for _, text, label in claims if label == "supported"),
            )
            for question, text, label in claims:
                if label is None:
                    continue
                claim = normalize_text(text)
                by_pair.setdefault((normalize_text(question or ""), claim), []).append(label)
                by_claim.setdefault(claim, []).append(label)
        self._by_pair, self.conflicts = _resolve(by_pair)
        self._by_claim, self.claim_conflicts = _resolve(by_claim)
        self.answers = len(self._splits)

    @classmethod
    def load(cls, paths: Iterable[Path]) -> Oracle:
        """Read every file and build the oracle.

        Args:
            paths: dahl JSONL or FActScore labeled JSONL files.

        Returns:
            The oracle; conflicts are counted and logged at WARNING.

        Raises:
            ConfigError: a file is missing, unreadable, not JSON, of an unknown format,
                or carries an unknown label (file and line are named).
        """
        entries: list[tuple[str, list[_Fact]]] = []
        for path in paths:
            entries.extend(_read_file(Path(path)))
        oracle = cls(entries)
        if oracle.conflicts:
            logger.warning(
                "oracle: %d (question, claim) pairs carry conflicting labels; kept the majority",
                oracle.conflicts,
            )
        return oracle

    def label(self, question: str | None, claim: str) -> str | None:
        """Label for ``claim`` asked under ``question`` (falls back to the claim alone), or None.

        One of supported / unsupported / irrelevant / unknown (a contradicted claim is unsupported).
        """
        found = self.verdict(question, claim)
        return "unsupported" if found == "contradicted" else found

    def verdict(self, question: str | None, claim: str) -> str | None:
        """As :meth:`label`, but a claim recorded as contradicted gives ``"contradicted"``."""
        text = normalize_text(claim)
        if question is not None:
            found = self._by_pair.get((normalize_text(question), text))
            if found is not None:
                return found
        return self._by_claim.get(text)

    def claims(self, response: str) -> list[str] | None:
        """Claim texts recorded for ``response`` (normalized match), or None when unknown."""
        found = self._splits.get(normalize_text(response))
        return None if found is None else list(found)

    def supported(self, response: str) -> frozenset[str] | None:
        """Normalized texts of the claims labelled supported for ``response``, None when unknown."""
        return self._supported.get(normalize_text(response))

    def __len__(self) -> int:
        return len(self._by_pair)


def _read_file(path: Path) -> Iterator[tuple[str, list[_Fact]]]:
    try:
        with path.open(encoding="utf-8") as handle:
            kind: str | None = None
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{where}: not JSON ({exc.msg})") from exc
                if not isinstance(row, dict):
                    raise ConfigError(f"{where}: expected a JSON object")
                if kind is None:
                    kind = _detect(row, where)
                yield _factscore_row(row, where) if kind == "factscore" else _dahl_row(row, where)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read oracle file {path}: {exc}") from exc


def _detect(row: dict[str, Any], where: str) -> str:
    if "annotations" in row or {"input", "output"} <= row.keys():
        return "factscore"
    if "response" in row:
        return "dahl"
    raise ConfigError(f"{where}: neither dahl JSONL (question/response) nor FActScore (input/output)")


def _dahl_row(row: dict[str, Any], where: str) -> tuple[str, list[_Fact]]:
    question = str(row.get("question", ""))
    facts: list[_Fact] = []
    for claim in row.get("claims") or []:
        if isinstance(claim, str):
            facts.append((question, claim, None))
        elif isinstance(claim, dict) and isinstance(claim.get("text"), str):
            label = _label_of(claim.get("label"), where)
            if label == "unsupported" and claim.get("reason") == "contradicted":
                label = "contradicted"
            facts.append((question, claim["text"], label))
        else:
            raise ConfigError(f"{where}: each claim must be a string or {{text, label}}")
    return str(row.get("response", "")), facts


def _factscore_row(row: dict[str, Any], where: str) -> tuple[str, list[_Fact]]:
    question = str(row.get("input", ""))
    facts: list[_Fact] = []
    for sentence in row.get("annotations") or []:
        if sentence.get("is-relevant", True) is False:
            for fact in sentence.get("model-atomic-facts") or []:
                facts.append((question, fact["text"], "irrelevant"))
            continue
        for fact in sentence.get("human-atomic-facts") or []:
            facts.append((question, fact["text"], _label_of(fact.get("label"), where)))
    return str(row.get("output", "")), facts
