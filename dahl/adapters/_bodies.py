"""Request bodies of every LLM stage: what is sent, its token estimate, its fingerprint, its task.

Pure functions of the endpoint settings and the texts, shared by the endpoint client, the
cache keys, the batch planners and the dry run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from dahl.adapters import _prompts as prompts
from dahl.config import CHECK_MAX_TOKENS, SPLIT_MAX_TOKENS, EndpointConfig

__all__ = [
    "BodyBytes", "Format", "Kind", "Task", "adapter_task", "chat_body", "check_request_body",
    "endpoint_fingerprint", "estimate_tokens", "fingerprint", "format_field", "max_tokens",
    "split_request_body", "template_version"
]

Format = Literal["json_schema", "json_object", "text"]
Kind = Literal["split", "check"]


def _same(text: str) -> str:
    return text


@dataclass(frozen=True)
class Task:
    """What one stage asks an endpoint; the rest of a request is the same for every stage.

    Attributes:
        name: the stage as fingerprints name it (``split``, ``check``, ``cover``, ...).
        template: version of its template (``split/v1``; ``file:<blake2b-64 hex>`` for a file).
        max_tokens: completion budget, tokens, when the endpoint sets none.
        json_schema: the ``response_format`` of a ``json_schema`` reply; None: ``json_object``.
        reask_json, reask_text: what the one re-ask says a reply must be, per mode.
        neutralize: makes the unparseable reply safe to quote back between the data tags.
    """

    name: str
    template: str
    max_tokens: int
    json_schema: Mapping[str, Any] | None = None
    reask_json: str = "reply with the JSON object only"
    reask_text: str = "reply with the JSON object only"
    neutralize: Callable[[str], str] = _same


def format_field(fmt: Format, json_schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``response_format`` request field of reply format ``fmt``: ``json_schema``
    (None: json_object), ``{"type": "json_object"}``, or None (text mode sends no field)."""
    if fmt == "json_schema" and json_schema is not None:
        return dict(json_schema)
    if fmt in ("json_schema", "json_object"):
        return {"type": "json_object"}
    return None


def chat_body(
    cfg: EndpointConfig, messages: list[dict[str, str]], *, max_tokens: int,
    response_format: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The chat-completions body of ``messages`` (pure; the cache hashes it).

    Returns:
        ``{"model", "messages", "temperature", "max_tokens", ["seed"], ["response_format"],
        **cfg.extra_body}``; never the API key.
    """
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": messages,
        "temperature": cfg.temperature,
        "max_tokens": max_tokens,
    }
    if cfg.seed is not None:
        body["seed"] = cfg.seed
    if response_format is not None:
        body["response_format"] = response_format
    body.update(cfg.extra_body)
    return body


def budget(cfg: EndpointConfig, default: int) -> int:
    """Completion token cap of a request on ``cfg``: ``cfg.max_tokens``, else the stage's ``default``
    (its :attr:`Task.max_tokens`), tokens."""
    return cfg.max_tokens if cfg.max_tokens is not None else default


def max_tokens(cfg: EndpointConfig, kind: Kind) -> int:
    """Completion token cap of a Splitter (``split``) or Checker (``check``) request (:func:`budget`)."""
    return budget(cfg, SPLIT_MAX_TOKENS if kind == "split" else CHECK_MAX_TOKENS)


def _body(
    cfg: EndpointConfig, kind: Kind, messages: list[dict[str, str]], fmt: Format, *, with_evidence: bool = False
) -> dict[str, Any]:
    return chat_body(cfg, messages, max_tokens=max_tokens(cfg, kind),
                     response_format=format_field(fmt, prompts.reply_schema(kind, with_evidence=with_evidence)))


def split_request_body(
    cfg: EndpointConfig, question: str, answer_text: str, *, fmt: Format | None = None
) -> dict[str, Any]:
    """The exact JSON body of a split request (pure; the cache hashes it).

    ``fmt`` overrides the reply format (default ``cfg.effective_format()``); the body is as
    :func:`chat_body`'s, never with the API key.
    """
    fmt = fmt or cfg.effective_format()
    messages = prompts.split_messages(
        question, answer_text, json_reply=fmt != "text", template=cfg.templates.get("split")
    )
    return _body(cfg, "split", messages, fmt)


def check_request_body(
    cfg: EndpointConfig,
    question: str,
    claim: str,
    *,
    evidence: Sequence[prompts.PromptPassage] | None = None,
    fmt: Format | None = None,
) -> dict[str, Any]:
    """The exact JSON body of a check request, as :func:`split_request_body`; with
    ``evidence`` passages (passage id, title, text), template ``check-evidence/v1``."""
    fmt = fmt or cfg.effective_format()
    messages = prompts.check_messages(
        question, claim, evidence, json_reply=fmt != "text",
        template=cfg.templates.get("check"), evidence_template=cfg.templates.get("check-evidence"),
    )
    return _body(cfg, "check", messages, fmt, with_evidence=bool(evidence))


def estimate_tokens(body: dict[str, Any]) -> int:
    """Tokens to reserve for ``body``: message (or ``prompt``) characters / 4, rounded up
    (OpenAI's rule of thumb for English), + ``max_tokens``."""
    chars = sum(len(m.get("content", "")) for m in body.get("messages", ())) + len(body.get("prompt") or "")
    return -(-chars // 4) + int(body.get("max_tokens") or 0)


class BodyBytes:
    """The encoded bytes of a request body whose one message content changes per request, built once.

    ``body`` holds ``hole`` as the whole content of one message; ``encode`` turns a body into the
    bytes sent (the route's). JSON escapes a string character by character, so the bytes of the
    body with ``content`` in the hole are the bytes before the hole's string, the string of
    ``content``, and the bytes after it. :attr:`usable` is False (build the body instead) unless
    the hole is encoded exactly once, in place of that message's content, and filling
    reproduces ``encode`` on probe texts.
    """

    __slots__ = ("_chars", "_head", "_max_tokens", "_tail", "usable")

    def __init__(self, body: dict[str, Any], hole: str, encode: Callable[[dict[str, Any]], bytes]) -> None:
        self._head = self._tail = b""
        self._chars = sum(len(m.get("content", "")) for m in body.get("messages", ())) - len(hole)
        self._max_tokens = int(body.get("max_tokens") or 0)
        data, marker = encode(body), orjson.dumps(hole)
        self.usable = "prompt" not in body and data.count(marker) == 1
        if self.usable:
            self._head, self._tail = data.split(marker)
            messages = body["messages"]
            index = next((i for i, m in enumerate(messages) if m.get("content") == hole), None)

            def exact(text: str) -> bytes:
                assert index is not None
                return encode({**body, "messages": [*messages[:index], {**messages[index], "content": text},
                                                    *messages[index + 1:]]})

            self.usable = index is not None and all(
                self.encode(text)[0] == exact(text) for text in _BYTES_PROBES
            )

    def encode(self, content: str) -> tuple[bytes, int]:
        """The bytes of the body with ``content`` in the hole, and their :func:`estimate_tokens`.

        Raises:
            TypeError: ``content`` is not valid UTF-8 text (a lone surrogate), as ``encode``.
        """
        return (self._head + orjson.dumps(content) + self._tail,
                -(-(self._chars + len(content)) // 4) + self._max_tokens)


#: Texts :class:`BodyBytes` checks its split against: quotes, escapes, non-ASCII, braces, tags.
_BYTES_PROBES = ('Q "x" \\ y\n\t\u0001 {z} <claim>', "é ‹ 漢字 \U0001f600", "")


def template_version(cfg: EndpointConfig, kind: Kind, *, with_evidence: bool = False) -> str:
    """The version of the template a ``kind`` request of ``cfg`` uses: the user's file
    (``file:<blake2b-64 hex>``) or the shipped one (``split/v1``, ``check/v1``, ``check-evidence/v1``)."""
    if kind == "split":
        return cfg.template(prompts.SPLIT_TEMPLATE).version
    return cfg.template(prompts.CHECK_EVIDENCE_TEMPLATE if with_evidence else prompts.CHECK_TEMPLATE).version


def endpoint_fingerprint(cfg: EndpointConfig, kind: Kind, *, with_evidence: bool = False) -> str:
    """Stable string of every setting that changes a ``kind`` reply of ``cfg`` (:func:`fingerprint`
    with :func:`template_version` and :func:`max_tokens`)."""
    return fingerprint(cfg, kind, template_version(cfg, kind, with_evidence=with_evidence), max_tokens(cfg, kind))


def fingerprint(cfg: EndpointConfig, name: str, template: str, budget: int) -> str:
    """Stable string of every setting that changes a reply of stage ``name`` on ``cfg``.

    ``openai:<name>|<base URL>|model=|template=|temperature=|seed=|max_tokens=<budget>|format=|extra=``
    (extra_body as canonical JSON, sorted keys), then ``|provider=<provider>`` for a provider
    other than ``openai``; never the API key, auth, headers, timeouts or concurrency limits.
    """
    extra = orjson.dumps(cfg.extra_body, option=orjson.OPT_SORT_KEYS).decode()
    return (
        f"openai:{name}|{cfg.base_url}|model={cfg.model}|template={template}"
        f"|temperature={cfg.temperature!r}|seed={cfg.seed}|max_tokens={budget}"
        f"|format={cfg.effective_format()}|extra={extra}"
        + ("" if cfg.provider == "openai" else f"|provider={cfg.provider}")
    )


def adapter_task(cfg: EndpointConfig, kind: Kind, *, with_evidence: bool = False) -> Task:
    """The :class:`Task` of the Splitter (``split``) or the Checker (``check``; with evidence
    passages, template ``check-evidence/v1`` and its labels) on ``cfg``."""
    default = SPLIT_MAX_TOKENS if kind == "split" else CHECK_MAX_TOKENS
    return Task(
        name=kind,
        template=template_version(cfg, kind, with_evidence=with_evidence),
        max_tokens=default,
        json_schema=prompts.reply_schema(kind, with_evidence=with_evidence),
        reask_json=prompts.expected_reply(kind, json_reply=True, with_evidence=with_evidence),
        reask_text=prompts.expected_reply(kind, json_reply=False, with_evidence=with_evidence),
        neutralize=prompts.neutralize_tags,
    )
