"""The mock's answers to generation requests (``dahl generate``): chat and ``/v1/completions``.

A generation request carries no dahl tag: a chat request's last user message, or a
completion request's ``prompt``, is the question (a ``Question: ... Answer:`` prompt
is unwrapped). The answer is, in order of precedence:

* the oracle answer for that question (``--oracle-answers FILE``: JSONL lines with
  ``question`` and ``response``, e.g. PubMedQA LONG_ANSWER or MedHallu's hallucinated
  answers), so a "model" can answer with real text; ``--oracle-answers MODEL=FILE``
  (repeatable) answers the requests naming that model from FILE first, so two mock
  "models" on one server answer one question differently;
* otherwise three sentences from a pool of medical facts (:data:`FACTS`), chosen by a hash
  of (model, question); each is said falsely (a changed number) with a probability rising
  with the request's temperature (:func:`false_probability`), drawn from a hash of (model,
  question, temperature, seed, sentence): deterministic, and a temperature study
  (``dahl study temperature``) sees the DAHL Score fall as the temperature rises when
  the evidence Checker runs over :func:`fact_corpus` (``python -m bench.mock_generate
  corpus FILE`` writes it).

A reply longer than ``max_tokens`` (``ceil(chars / 4)`` tokens) is cut to
``4 * max_tokens`` characters with ``finish_reason: "length"``, as a real server cuts
at its token limit; ``--finish-length`` cuts every reply of two or more sentences in
the middle of its last sentence the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from bench.mock_reply import Prompt, estimate_tokens
from bench.mock_wire import json_string
from dahl.errors import ConfigError
from dahl.records import normalize_text

__all__ = [
    "FACTS",
    "AnswerOracle",
    "chat_question",
    "completion_prompt",
    "completion_text_bytes",
    "fact_corpus",
    "false_probability",
    "generated_text",
    "question_of",
    "sampling_of",
    "truncate",
]

_WRAPPED = re.compile(r"^\s*Question:\s*(.*?)\s*Answer:\s*$", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# The pool of the generated answers: (true sentence, false twin). Each false twin changes
# the one number, so the evidence Checker over :func:`fact_corpus` tells them apart
# (a number the claim adds must appear in the passage).
FACTS = (
    ("An adult human skeleton has 206 bones.", "An adult human skeleton has 412 bones."),
    ("Normal human body temperature is about 37 degrees Celsius.",
     "Normal human body temperature is about 42 degrees Celsius."),
    ("The lifespan of a human red blood cell is about 120 days.",
     "The lifespan of a human red blood cell is about 12 days."),
    ("A full-term human pregnancy lasts about 40 weeks.", "A full-term human pregnancy lasts about 25 weeks."),
    ("The human heart has 4 chambers.", "The human heart has 6 chambers."),
    ("Human somatic cells carry 46 chromosomes.", "Human somatic cells carry 64 chromosomes."),
    ("An adult has 32 permanent teeth.", "An adult has 44 permanent teeth."),
    ("The human vertebral column has 33 vertebrae.", "The human vertebral column has 21 vertebrae."),
    ("An adult body holds about 5 litres of blood.", "An adult body holds about 11 litres of blood."),
    ("The kidneys filter about 180 litres of plasma each day.",
     "The kidneys filter about 18 litres of plasma each day."),
    ("An adult human brain weighs about 1.4 kilograms.", "An adult human brain weighs about 4.1 kilograms."),
    ("The adult small intestine is about 6 metres long.", "The adult small intestine is about 16 metres long."),
)
#: Sentences per generated answer.
SENTENCES = 3
# p(false sentence) = _BASE + _SLOPE * temperature (+ up to 0.08 by model), clipped to [0, 1].
_BASE, _SLOPE = 0.05, 0.45


class AnswerOracle:
    """Given answer texts by normalized question, for every model or for one.

    Args:
        answers: normalized question -> answer text, for any model.
        by_model: model -> (normalized question -> answer text); tried before ``answers``.
    """

    def __init__(self, answers: dict[str, str], by_model: Mapping[str, dict[str, str]] | None = None) -> None:
        self._answers = answers
        self._by_model = dict(by_model or {})

    def __len__(self) -> int:
        return len(self._answers) + sum(len(a) for a in self._by_model.values())

    @classmethod
    def load_all(cls, path: Path | None, by_model: Sequence[tuple[str, Path]] = ()) -> AnswerOracle:
        """Read the file for every model (``path``, or None) and each ``(model, file)``.

        Raises:
            ConfigError: as :meth:`load`, or a model given twice.
        """
        models = [model for model, _ in by_model]
        if len(set(models)) != len(models):
            raise ConfigError(f"--oracle-answers: a model is given twice: {', '.join(models)}")
        general = cls.load(path)._answers if path is not None else {}
        return cls(general, {model: cls.load(file)._answers for model, file in by_model})

    @classmethod
    def load(cls, path: Path) -> AnswerOracle:
        """Read a JSONL file of ``{"question", "response"}`` lines (blank lines skipped).

        Raises:
            ConfigError: the file cannot be read, or a line is not such an object (line named).
        """
        answers: dict[str, str] = {}
        try:
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except OSError as exc:
            raise ConfigError(f"--oracle-answers {path}: {exc.strerror}") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"--oracle-answers {path}:{n}: not JSON ({exc.msg})") from None
            if not (isinstance(record, dict) and isinstance(record.get("question"), str)
                    and isinstance(record.get("response"), str)):
                raise ConfigError(f"--oracle-answers {path}:{n}: needs string fields question and response")
            answers[normalize_text(record["question"])] = record["response"]
        return cls(answers)

    def answer(self, question: str, model: str | None = None) -> str | None:
        """The given answer of ``question`` (compared normalized) for ``model``, or None."""
        key = normalize_text(question)
        own = self._by_model.get(model, {}) if model is not None else {}
        return own.get(key, self._answers.get(key))


def question_of(prompt: str) -> str:
    """The question inside a generation prompt: unwrapped from ``Question: ... Answer:``, else all of it."""
    match = _WRAPPED.match(prompt)
    return match.group(1) if match else prompt.strip()


def completion_prompt(body: Mapping[str, Any]) -> Prompt:
    """A ``/v1/completions`` request as a :class:`~bench.mock_reply.Prompt` of kind ``generate``."""
    raw = body.get("prompt")
    text = raw if isinstance(raw, str) else ""
    limit = body.get("max_tokens")
    max_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else 16
    return Prompt(kind="generate", question=question_of(text), data="", json_mode=False,
                  prompt_tokens=estimate_tokens(len(text)), max_tokens=max_tokens,
                  model=str(body.get("model") or "mock"))


def chat_question(body: Mapping[str, Any]) -> str:
    """The question of a chat generation request: its last user message (string content)."""
    messages = body.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, Mapping) and message.get("role") == "user" and isinstance(message.get("content"), str):
            return question_of(message["content"])
    return ""


def _unit(*parts: object) -> float:
    """A stable float in [0, 1) from ``parts`` (blake2b-64)."""
    digest = hashlib.blake2b("\x00".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def false_probability(temperature: float, model: str) -> float:
    """The chance that one generated sentence is a false twin: 0.05 + 0.45 × temperature plus a
    model offset in {0, 0.02, ..., 0.08} (hash of the name), clipped to [0, 1]."""
    offset = 0.02 * int(_unit("offset", model) * 5)
    return min(1.0, max(0.0, _BASE + _SLOPE * temperature + offset))


def generated_text(question: str, model: str, oracle: AnswerOracle | None, *,
                   temperature: float | None = None, seed: int | None = None) -> str:
    """The full answer text to ``question`` (see the module docstring).

    Without an oracle answer: :data:`SENTENCES` distinct facts of :data:`FACTS` chosen by a
    hash of (model, question); each is said falsely with :func:`false_probability`, drawn
    from a hash of (model, question, temperature, seed, sentence index). So the same
    request gives the same text, samples differ by their seed, and a higher temperature
    gives more false sentences.

    Args:
        question: the question (compared normalized).
        model: the requested model.
        oracle: given answers, or None.
        temperature: the request's temperature; None is OpenAI's default, 1.
        seed: the request's seed, or None.
    """
    if oracle is not None:
        found = oracle.answer(question, model)
        if found is not None:
            return found
    key = normalize_text(question)
    order = sorted(range(len(FACTS)), key=lambda i: _unit("fact", model, key, i))[:SENTENCES]
    t = 1.0 if temperature is None else temperature
    p = false_probability(t, model)
    said = [FACTS[i][1] if _unit("false", model, key, repr(float(t)), seed, n) < p else FACTS[i][0]
            for n, i in enumerate(order)]
    return " ".join(said)


def sampling_of(body: Mapping[str, Any]) -> tuple[float | None, int | None]:
    """A generation request's ``(temperature, seed)``, each None when absent or not a number."""
    temperature, seed = body.get("temperature"), body.get("seed")
    t = float(temperature) if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) else None
    s = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    return t, s


def fact_corpus() -> list[dict[str, str]]:
    """The evidence corpus of the true sentences (``{id, text}``, one document a fact),
    for ``dahl score --checker evidence --evidence``."""
    return [{"id": f"fact-{i:02d}", "text": true}
            for i, (true, _false) in enumerate(FACTS)]


def truncate(text: str, max_tokens: int, cut_last: bool) -> tuple[str, str]:
    """The reply text and its ``finish_reason`` (``"stop"`` or ``"length"``).

    Args:
        text: the full answer.
        max_tokens: the request's completion budget (tokens of 4 characters).
        cut_last: cut the last sentence in the middle (when there are two or more).
    """
    if len(text) > 4 * max_tokens:
        return text[: 4 * max_tokens], "length"
    parts = _SENTENCE_END.split(text.strip())
    if cut_last and len(parts) >= 2:
        words = parts[-1].split()
        kept = " ".join(words[: max(1, len(words) // 2)]).rstrip(".!?")
        return " ".join([*parts[:-1], kept]), "length"
    return text, "stop"


def completion_text_bytes(
    reply_id: str, created: int, model: str, text: str, finish_reason: str, prompt_tokens: int, completion_tokens: int
) -> bytes:
    """A ``text_completion`` reply body (OpenAI's ``/v1/completions`` shape), UTF-8 bytes."""
    usage = orjson.dumps({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}).decode()
    return (
        f'{{"id": {json_string(reply_id)}, "object": "text_completion", "created": {created}, '
        f'"model": {json_string(model)}, "choices": [{{"index": 0, "text": {json_string(text)}, '
        f'"logprobs": null, "finish_reason": {json_string(finish_reason)}}}], "usage": {usage}}}'
    ).encode("utf-8")


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.mock_generate corpus FILE``: write :func:`fact_corpus` as JSONL."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.mock_generate")
    parser.add_argument("what", choices=["corpus"])
    parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    args.file.write_bytes(b"".join(orjson.dumps(doc) + b"\n" for doc in fact_corpus()))


if __name__ == "__main__":  # pragma: no cover
    main()
