"""The mock's answers to generation requests (``dahl generate``): chat and ``/v1/completions``.

A generation request carries no dahl tag: a chat request's last user message, or a
completion request's ``prompt``, is the question (a ``Question: ... Answer:`` prompt
is unwrapped). The answer is, in order of precedence:

* the oracle answer for that question (``--oracle-answers FILE``: JSONL lines with
  ``question`` and ``response``, e.g. PubMedQA LONG_ANSWER or MedHallu's hallucinated
  answers), so a "model" can answer with real text; ``--oracle-answers MODEL=FILE``
  (repeatable) answers the requests naming that model from FILE first, so two mock
  "models" on one server answer one question differently;
* otherwise three sentences chosen by a hash of (model, question): deterministic.

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
    "AnswerOracle",
    "chat_question",
    "completion_prompt",
    "completion_text_bytes",
    "generated_text",
    "question_of",
    "truncate",
]

_WRAPPED = re.compile(r"^\s*Question:\s*(.*?)\s*Answer:\s*$", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

_OPENINGS = (
    "This question concerns a well studied topic.",
    "The short answer is that several factors are involved.",
    "Clinical and experimental studies have addressed this topic.",
)
_MIDDLES = (
    "The main mechanism involves changes in cell signalling.",
    "Most guidelines recommend an individual assessment of each patient.",
    "The evidence comes mainly from observational cohorts.",
    "Outcomes depend on age, comorbidity and treatment timing.",
)
_ENDINGS = (
    "Further research is needed to confirm these findings.",
    "A specialist should interpret the results in context.",
    "These points summarise the current consensus.",
)


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


def generated_text(question: str, model: str, oracle: AnswerOracle | None) -> str:
    """The full answer text to ``question`` (see the module docstring)."""
    if oracle is not None:
        found = oracle.answer(question, model)
        if found is not None:
            return found
    digest = hashlib.blake2b(f"{model}\n{normalize_text(question)}".encode(), digest_size=8).digest()
    a, b, c = digest[0] % len(_OPENINGS), digest[1] % len(_MIDDLES), digest[2] % len(_ENDINGS)
    return f"{_OPENINGS[a]} {_MIDDLES[b]} {_ENDINGS[c]}"


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
