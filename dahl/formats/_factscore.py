"""FActScore's human-labelled JSONL (Min et al. 2023, ``data/labeled/<Model>.jsonl``).

Each line becomes one Answer: ``id = f"{model}/{topic}"``, ``model`` = the file stem, ``question =
input``, ``response = output``, ``category = cat[0]``, abstained when ``annotations`` is null.
Claims: an irrelevant sentence's ``model-atomic-facts`` labelled irrelevant, else its
``human-atomic-facts`` (S / NS / IR).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from dahl.errors import InputError
from dahl.formats._compressed import model_stem
from dahl.formats._jsonlines import read_records
from dahl.formats._needs import Needs
from dahl.formats._stream import AnswerStream
from dahl.records import Answer, GivenClaim, Label

__all__ = ["FACTSCORE_LABELS", "read_factscore"]

#: FActScore's human label -> Label.
FACTSCORE_LABELS: dict[str, Label] = {
    "S": Label.SUPPORTED,
    "NS": Label.UNSUPPORTED,
    "IR": Label.IRRELEVANT,
}


class _Fact(msgspec.Struct):
    text: str
    label: str | None = None


_SENTENCE_KEYS = {
    "is_relevant": "is-relevant",
    "model_facts": "model-atomic-facts",
    "human_facts": "human-atomic-facts",
}


class _Sentence(msgspec.Struct, rename=_SENTENCE_KEYS):
    text: str = ""
    is_relevant: bool | None = None
    model_facts: list[_Fact] | None = None
    human_facts: list[_Fact] | None = None


class _Generation(msgspec.Struct):
    input: str
    output: str
    topic: str
    cat: list[str] | None = None
    annotations: list[_Sentence] | None = None


_DECODER = msgspec.json.Decoder(_Generation)


def _claims(sentences: list[_Sentence], *, file: str, line: int) -> tuple[GivenClaim, ...]:
    """Flatten annotated sentences into labelled claims, in answer order.

    Raises:
        InputError: a human fact has a label other than S / NS / IR.
    """
    claims: list[GivenClaim] = []
    for s, sentence in enumerate(sentences):
        if sentence.is_relevant is False:
            claims.extend(
                GivenClaim(text=fact.text, label=Label.IRRELEVANT)
                for fact in sentence.model_facts or ()
            )
            continue
        for f, fact in enumerate(sentence.human_facts or ()):
            label = FACTSCORE_LABELS.get(fact.label or "")
            if label is None:
                raise InputError(
                    f"human fact label {fact.label!r} is not S, NS or IR",
                    file=file,
                    line=line,
                    field=f"$.annotations[{s}].human-atomic-facts[{f}].label",
                )
            claims.append(GivenClaim(text=fact.text, label=label))
    return tuple(claims)


def _to_answer(record: _Generation, *, model: str, file: str, line: int) -> Answer:
    """Build the Answer of one generation (abstained when ``annotations`` is null)."""
    meta: dict[str, Any] = {"topic": record.topic, "cat": record.cat}
    category = record.cat[0] if record.cat else "all"
    abstained = record.annotations is None
    claims = () if record.annotations is None else _claims(record.annotations, file=file, line=line)
    return Answer(
        id=f"{model}/{record.topic}",
        question=record.input,
        response=record.output,
        model=model,
        category=category,
        claims=claims,
        abstained=abstained,
        meta=meta,
    )


def read_factscore(
    path: Path, *, on_error: Callable[[InputError], None] | None = None, needs: Needs = Needs.NOTHING
) -> AnswerStream:
    """Stream the Answers of a FActScore labelled file, one line at a time.

    Args:
        path: e.g. ``factscore/labeled/ChatGPT.jsonl``; its stem is the model name.
        on_error, needs: as in :func:`dahl.formats.read_answers`.

    Raises:
        InputError: a bad line, when ``on_error`` is None.
        ConfigError: the file cannot be opened.
    """
    model = model_stem(path)
    return read_records(
        path, _DECODER, lambda record, file, line: _to_answer(record, model=model, file=file, line=line), on_error,
        needs,
    )
