"""Request bodies of the OpenAI-compatible adapters: what is sent, its token estimate, its fingerprint.

Pure functions of the endpoint settings and the texts (no I/O), shared by the
adapters (:mod:`dahl.adapters.openai`), their cache keys (:mod:`dahl.adapters.keybody`)
and the dry run (:mod:`dahl.run._dryrun`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import orjson

from dahl.adapters import prompts
from dahl.config import CHECK_MAX_TOKENS, SPLIT_MAX_TOKENS, EndpointConfig

__all__ = [
    "Format",
    "Kind",
    "check_request_body",
    "endpoint_fingerprint",
    "estimate_tokens",
    "max_tokens",
    "split_request_body",
    "template_version",
]

Format = Literal["json_schema", "json_object", "text"]
Kind = Literal["split", "check"]


def max_tokens(cfg: EndpointConfig, kind: Kind) -> int:
    """Completion token cap of a ``kind`` request: ``cfg.max_tokens``, else the stage's default."""
    if cfg.max_tokens is not None:
        return cfg.max_tokens
    return SPLIT_MAX_TOKENS if kind == "split" else CHECK_MAX_TOKENS


def _body(
    cfg: EndpointConfig, kind: Kind, messages: list[dict[str, str]], fmt: Format, *, with_evidence: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": messages,
        "temperature": cfg.temperature,
        "max_tokens": max_tokens(cfg, kind),
    }
    if cfg.seed is not None:
        body["seed"] = cfg.seed
    response_format = prompts.response_format(kind, fmt, with_evidence=with_evidence)
    if response_format is not None:
        body["response_format"] = response_format
    body.update(cfg.extra_body)
    return body


def split_request_body(
    cfg: EndpointConfig, question: str, answer_text: str, *, fmt: Format | None = None
) -> dict[str, Any]:
    """The exact JSON body of a split request (pure; the cache hashes it).

    Args:
        cfg: the split endpoint.
        question: the answer's question.
        answer_text: the preprocessed answer.
        fmt: reply format override (the adapter passes ``"text"`` after a fallback);
            default ``cfg.effective_format()``.

    Returns:
        ``{"model", "messages", "temperature", "max_tokens", ["seed"], ["response_format"],
        **cfg.extra_body}``; never the API key.
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
    """The exact JSON body of a check request (pure; the cache hashes it).

    Args:
        cfg: the check endpoint.
        question: the answer's question.
        claim: the claim text.
        evidence: passages to judge against as (passage id, title, text), if any
            (template ``check-evidence/v1`` and its label schema).
        fmt: reply format override; default ``cfg.effective_format()``.

    Returns:
        As :func:`split_request_body`, with the check messages and schema.
    """
    fmt = fmt or cfg.effective_format()
    messages = prompts.check_messages(
        question, claim, evidence, json_reply=fmt != "text",
        template=cfg.templates.get("check"), evidence_template=cfg.templates.get("check-evidence"),
    )
    return _body(cfg, "check", messages, fmt, with_evidence=bool(evidence))


def estimate_tokens(body: dict[str, Any]) -> int:
    """Tokens to reserve for ``body``: message characters / 4 (rounded up) + ``max_tokens``.

    The 4-characters-per-token rule of thumb for English (OpenAI tokenizer guidance);
    the lane refunds the difference from the reported usage.
    """
    chars = sum(len(m.get("content", "")) for m in body.get("messages", ()))
    return -(-chars // 4) + int(body.get("max_tokens") or 0)


def template_version(cfg: EndpointConfig, kind: Kind, *, with_evidence: bool = False) -> str:
    """The version of the template a ``kind`` request of ``cfg`` uses: the user's file
    (``file:<blake2b-64 hex>``) or the shipped one (``split/v1``, ``check/v1``, ``check-evidence/v1``)."""
    if kind == "split":
        return cfg.template(prompts.SPLIT_TEMPLATE).version
    return cfg.template(prompts.CHECK_EVIDENCE_TEMPLATE if with_evidence else prompts.CHECK_TEMPLATE).version


def endpoint_fingerprint(cfg: EndpointConfig, kind: Kind, *, with_evidence: bool = False) -> str:
    """Stable string of every setting that changes a ``kind`` reply of ``cfg``.

    Includes the normalized base URL, model, template version (``check-evidence/v1``
    for a check against evidence passages; ``file:<hash>`` for a user's template, see
    :func:`template_version`), temperature, seed, max_tokens, reply
    format, extra_body (canonical JSON, sorted keys) and a provider other than
    ``openai`` (``|provider=anthropic``: the same body asks differently there); never the
    API key, auth, headers, timeouts or concurrency limits.
    """
    version = template_version(cfg, kind, with_evidence=with_evidence)
    extra = orjson.dumps(cfg.extra_body, option=orjson.OPT_SORT_KEYS).decode()
    return (
        f"openai:{kind}|{cfg.base_url}|model={cfg.model}|template={version}"
        f"|temperature={cfg.temperature!r}|seed={cfg.seed}|max_tokens={max_tokens(cfg, kind)}"
        f"|format={cfg.effective_format()}|extra={extra}"
        + ("" if cfg.provider == "openai" else f"|provider={cfg.provider}")
    )
