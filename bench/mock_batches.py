"""Batch routes of the mock server: OpenAI ``/v1/files`` + ``/v1/batches``, Anthropic ``/v1/messages/batches``.

Registered on the app by :func:`register` (``bench.mockserver``). Each request of a
batch is answered by the online route's reply logic (:func:`bench.mock_reply.parse_prompt`,
:func:`bench.mock_reply.reply_content`, the oracle when given), so a batch and an
online run get the same replies. Behaviour (:class:`BatchMockConfig`):

- ``complete_s``: seconds after creation when a batch has ended (0: at once);
- ``expire_fraction``: the batch expires with only the first ``floor(f * n)`` requests
  done (OpenAI: the rest in the error file with code ``batch_expired``; Anthropic:
  result type ``expired``);
- ``error_rate``: share of requests answered with an HTTP 500 error line (drawn per
  custom_id from ``seed``, so a retry of the same id may succeed: it draws again);
- ``faults``: the first N calls of a batch API operation fail (``--batch-fault
  OP:KIND[:N]``; OP one of :data:`FAULT_OPS`, KIND one of :data:`BATCH_FAULTS`):
  ``500`` / ``503`` reply that status without acting, ``reset`` acts and then drops
  the connection (the reply is lost: a create has created its batch).

The list routes page as the providers do, newest first: ``GET /v1/files`` (``purpose``,
``limit``, ``after``), ``GET /v1/batches`` (``limit`` <= 100, ``after``; each batch with its
``metadata``) and ``GET /v1/messages/batches`` (``limit`` <= 1000, ``after_id``); ``DELETE
/v1/files/{id}`` deletes a file. ``GET /stats/batches`` gives the counters: files uploaded and
deleted, batches created and canceled, requests answered per kind (split / check / cover), and
``faults_OP`` per operation.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import math
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import BodyPartReader, web

from bench.mock_batch_faults import BATCH_FAULTS, FAULT_OPS, faulty, parse_batch_fault
from bench.mock_oracle import Oracle
from bench.mock_reply import estimate_tokens, parse_prompt, reply_content
from dahl.errors import ConfigError

__all__ = ["BATCHES", "MAX_BODY_BYTES", "BatchMockConfig", "add_arguments", "config_from", "register"]


#: Largest request body the mock accepts, bytes (Anthropic's 256 MB batch limit plus room).
MAX_BODY_BYTES = 300 * 1024 * 1024


@dataclass(frozen=True)
class BatchMockConfig:
    """How the mock's batches behave.

    Attributes:
        complete_s: seconds from creation until a batch has ended (>= 0).
        expire_fraction: if set, batches expire with this fraction (0..1) of requests done.
        error_rate: probability (0..1) that a request gets an HTTP 500 error line.
        seed: seed of the error draws.
        call_delay_s: seconds every batch API call (upload, create, ...) takes before its reply.
        faults: ``(operation, kind, n)``: the first ``n`` calls of ``operation`` fail with ``kind``.
        cached_prompt: every result reports half of its prompt tokens as read from the prompt
            cache (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic
            ``cache_read_input_tokens``), as ``--cached-prompt`` does online.
    """

    complete_s: float = 0.0
    expire_fraction: float | None = None
    error_rate: float = 0.0
    seed: int = 0
    call_delay_s: float = 0.0
    faults: tuple[tuple[str, str, int], ...] = ()
    cached_prompt: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.complete_s) and self.complete_s >= 0):
            raise ConfigError("complete_s must be a finite number of seconds >= 0")
        if self.expire_fraction is not None and not 0 <= self.expire_fraction <= 1:
            raise ConfigError("expire_fraction must be within 0..1")
        if not (math.isfinite(self.call_delay_s) and self.call_delay_s >= 0):
            raise ConfigError("call_delay_s must be a finite number of seconds >= 0")
        if not 0 <= self.error_rate <= 1:
            raise ConfigError("error_rate must be within 0..1")


@dataclass
class _Batch:
    id: str
    kind: str  # "openai" or "anthropic"
    requests: list[dict[str, Any]]
    created: float
    created_unix: int
    input_file_id: str | None = None
    metadata: dict[str, Any] | None = None
    results: list[dict[str, Any]] | None = None  # per request: {custom_id, reply | error}
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None


@dataclass
class _Batches:
    config: BatchMockConfig
    oracle: Oracle | None
    clock: Callable[[], float]
    files: dict[str, bytes] = field(default_factory=dict)
    #: file id -> its OpenAI file object (``bytes``, ``created_at``, ``filename``, ``purpose``).
    file_objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, _Batch] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=itertools.count)
    counts: Counter[str] = field(default_factory=Counter)


BATCHES = web.AppKey("dahl_mock_batches", _Batches)


def _chat_reply(state: _Batches, body: dict[str, Any]) -> tuple[str, int, int, str]:
    """(content, prompt tokens, completion tokens, kind) as the online route answers ``body``."""
    prompt = parse_prompt(body)
    state.counts[f"requests_{prompt.kind}"] += 1
    content = reply_content(prompt, state.oracle)
    return content, prompt.prompt_tokens, estimate_tokens(len(content)), prompt.kind


def _failed(state: _Batches, custom_id: str, attempt: int) -> bool:
    rate = state.config.error_rate
    return rate > 0 and random.Random(f"{state.config.seed}:{custom_id}:{attempt}").random() < rate


def _finish(state: _Batches, batch: _Batch, cancel: bool = False) -> None:
    """Answer the batch's requests (the done part), once."""
    if batch.results is not None:
        return
    n = len(batch.requests)
    fraction = 0.0 if cancel else state.config.expire_fraction
    done = n if fraction is None else math.floor(fraction * n)
    results: list[dict[str, Any]] = []
    for i, request in enumerate(batch.requests):
        custom_id = str(request.get("custom_id"))
        attempt = state.counts[f"attempt:{custom_id}"]
        state.counts[f"attempt:{custom_id}"] += 1
        if i >= done:
            results.append({"custom_id": custom_id, "unfinished": "canceled" if cancel else "expired"})
        elif _failed(state, custom_id, attempt):
            results.append({"custom_id": custom_id, "error": 500})
        else:
            body = request.get("body") if batch.kind == "openai" else _chat_body(request.get("params") or {})
            results.append({"custom_id": custom_id, "reply": _chat_reply(state, body or {}),
                            "model": str((body or {}).get("model") or "mock")})
    batch.results = results
    batch.status = ("cancelled" if cancel else "expired" if fraction is not None else "completed") \
        if batch.kind == "openai" else "ended"
    if batch.kind == "openai":
        out, err = _openai_files(batch, state.config.cached_prompt)
        if out:
            batch.output_file_id = _store_file(state, out)
        if err:
            batch.error_file_id = _store_file(state, err)


def _chat_body(params: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages body as the chat body the reply logic reads."""
    messages = [{"role": "system", "content": params["system"]}] if params.get("system") else []
    messages += list(params.get("messages") or ())
    return {"model": params.get("model"), "messages": messages, "max_tokens": params.get("max_tokens")}


def _store_file(state: _Batches, data: bytes, filename: str = "output.jsonl", purpose: str = "batch_output") -> str:
    file_id = f"file-mock-{next(state.ids)}"
    state.files[file_id] = data
    state.file_objects[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                                   "filename": filename, "purpose": purpose}
    return file_id


def _page(request: web.Request, items: list[dict[str, Any]], cursor: str, most: int, default: int) -> dict[str, Any]:
    """One page of ``items`` (newest first) after the id in query parameter ``cursor``, as the providers page."""
    limit = min(int(request.query.get("limit", default)), most)
    after = request.query.get(cursor)
    start = next((i + 1 for i, item in enumerate(items) if item["id"] == after), 0) if after else 0
    data = items[start:start + limit]
    return {"data": data, "has_more": start + limit < len(items), "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None}


def _openai_files(batch: _Batch, cached_prompt: bool) -> tuple[bytes, bytes]:
    out, err = [], []
    assert batch.results is not None
    for i, row in enumerate(batch.results):
        cid = row["custom_id"]
        if "reply" in row:
            content, p, c, _ = row["reply"]
            body = {"id": f"chatcmpl-batch-{batch.id}-{i}", "object": "chat.completion", "created": batch.created_unix,
                    "model": row["model"], "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                                        "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
                              **({"prompt_tokens_details": {"cached_tokens": p // 2}} if cached_prompt else {})}}
            out.append({"id": f"batch_req_{i}", "custom_id": cid,
                        "response": {"status_code": 200, "request_id": f"req_{i}", "body": body}, "error": None})
        elif "error" in row:
            err.append({"id": f"batch_req_{i}", "custom_id": cid, "response": {"status_code": 500, "request_id": f"req_{i}",
                        "body": {"error": {"message": "Mock fault 500.", "type": "server_error"}}}, "error": None})
        else:
            code = "batch_expired" if row["unfinished"] == "expired" else "batch_cancelled"
            err.append({"id": f"batch_req_{i}", "custom_id": cid, "response": None,
                        "error": {"code": code, "message": f"This request could not be executed ({code})."}})
    return (b"".join(orjson.dumps(r) + b"\n" for r in out), b"".join(orjson.dumps(r) + b"\n" for r in err))


def _poll(state: _Batches, batch: _Batch) -> None:
    if batch.results is None and state.clock() - batch.created >= state.config.complete_s:
        _finish(state, batch)


def _openai_object(batch: _Batch) -> dict[str, Any]:
    results = batch.results or []
    failed = sum(1 for r in results if "reply" not in r)
    return {"id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions", "input_file_id": batch.input_file_id,
            "completion_window": "24h", "status": batch.status, "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id, "created_at": batch.created_unix, "metadata": batch.metadata,
            "request_counts": {"total": len(batch.requests), "completed": len(results) - failed, "failed": failed}}


def _anthropic_object(batch: _Batch, root: str) -> dict[str, Any]:
    results = batch.results
    counts = Counter("succeeded" if "reply" in r else "errored" if "error" in r else r["unfinished"]
                     for r in results or ())
    return {"id": batch.id, "type": "message_batch", "processing_status": batch.status,
            "request_counts": {"processing": len(batch.requests) if results is None else 0,
                               **{k: counts.get(k, 0) for k in ("succeeded", "errored", "canceled", "expired")}},
            "results_url": f"{root}/v1/messages/batches/{batch.id}/results" if results is not None else None,
            "created_at": datetime.datetime.fromtimestamp(batch.created_unix, datetime.UTC).isoformat()
            .replace("+00:00", "Z")}


def _batch(request: web.Request, kind: str) -> tuple[_Batches, _Batch]:
    state = request.app[BATCHES]
    batch = state.batches.get(request.match_info["batch_id"])
    if batch is None or batch.kind != kind:
        raise web.HTTPNotFound(text='{"error": {"message": "No such batch", "type": "not_found_error"}}',
                               content_type="application/json")
    _poll(state, batch)
    return state, batch


async def _upload(request: web.Request) -> web.Response:
    state = request.app[BATCHES]
    purpose, data, filename = None, None, None
    reader = await request.multipart()  # streamed: batch files exceed aiohttp's 1 MB body limit
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            continue
        if part.name == "purpose":
            purpose = (await part.read()).decode()
        elif part.name == "file":
            filename, data = part.filename, bytes(await part.read())
    if data is None or purpose != "batch":
        return web.json_response({"error": {"message": "need purpose=batch and a file", "type": "invalid_request_error"}},
                                 status=400)
    file_id = _store_file(state, data, filename or "upload.jsonl", "batch")
    state.counts["files_uploaded"] += 1
    return web.json_response(state.file_objects[file_id])


async def _files_list(request: web.Request) -> web.Response:
    state = request.app[BATCHES]
    purpose = request.query.get("purpose")
    files = [f for f in state.file_objects.values() if purpose is None or f["purpose"] == purpose][::-1]
    return web.json_response({"object": "list", **_page(request, files, "after", 10_000, 10_000)})


async def _file_delete(request: web.Request) -> web.Response:
    state = request.app[BATCHES]
    file_id = request.match_info["file_id"]
    if state.file_objects.pop(file_id, None) is None:
        raise web.HTTPNotFound()
    del state.files[file_id]
    state.counts["files_deleted"] += 1
    return web.json_response({"id": file_id, "object": "file", "deleted": True})


async def _file_content(request: web.Request) -> web.Response:
    data = request.app[BATCHES].files.get(request.match_info["file_id"])
    if data is None:
        raise web.HTTPNotFound()
    return web.Response(body=data, content_type="application/jsonl")


async def _openai_create(request: web.Request) -> web.Response:
    state = request.app[BATCHES]
    body = orjson.loads(await request.content.read())  # no 1 MB limit: batches are large
    data = state.files.get(str(body.get("input_file_id")))
    if data is None:
        return web.json_response({"error": {"message": "input file not found", "type": "invalid_request_error"}},
                                 status=400)
    batch = _Batch(f"batch_mock_{next(state.ids)}", "openai", [orjson.loads(x) for x in data.splitlines() if x.strip()],
                   state.clock(), int(time.time()), input_file_id=str(body["input_file_id"]),
                   metadata=body.get("metadata"))
    state.batches[batch.id] = batch
    state.counts["batches_created"] += 1
    _poll(state, batch)
    return web.json_response(_openai_object(batch))


async def _openai_list(request: web.Request) -> web.Response:
    state = request.app[BATCHES]
    data = [_openai_object(b) for b in state.batches.values() if b.kind == "openai"][::-1]
    return web.json_response({"object": "list", **_page(request, data, "after", 100, 20)})


async def _anthropic_list(request: web.Request) -> web.Response:
    state = request.app[BATCHES]
    for batch in state.batches.values():
        _poll(state, batch)
    data = [_anthropic_object(b, _root(request)) for b in state.batches.values() if b.kind == "anthropic"][::-1]
    return web.json_response(_page(request, data, "after_id", 1000, 20))


async def _openai_retrieve(request: web.Request) -> web.Response:
    return web.json_response(_openai_object(_batch(request, "openai")[1]))


async def _openai_cancel(request: web.Request) -> web.Response:
    state, batch = _batch(request, "openai")
    state.counts["batches_canceled"] += 1
    _finish(state, batch, cancel=True)
    return web.json_response(_openai_object(batch))


def _root(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


async def _anthropic_create(request: web.Request) -> web.Response:
    state = request.app[BATCHES]
    body = orjson.loads(await request.content.read())  # no 1 MB limit: batches are large
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        return web.json_response({"type": "error", "error": {"type": "invalid_request_error",
                                                             "message": "requests: a non-empty list"}}, status=400)
    batch = _Batch(f"msgbatch_mock_{next(state.ids)}", "anthropic", requests, state.clock(), int(time.time()),
                   status="in_progress")
    state.batches[batch.id] = batch
    state.counts["batches_created"] += 1
    _poll(state, batch)
    return web.json_response(_anthropic_object(batch, _root(request)))


async def _anthropic_retrieve(request: web.Request) -> web.Response:
    return web.json_response(_anthropic_object(_batch(request, "anthropic")[1], _root(request)))


async def _anthropic_cancel(request: web.Request) -> web.Response:
    state, batch = _batch(request, "anthropic")
    state.counts["batches_canceled"] += 1
    _finish(state, batch, cancel=True)
    return web.json_response(_anthropic_object(batch, _root(request)))


async def _anthropic_results(request: web.Request) -> web.Response:
    state, batch = _batch(request, "anthropic")
    if batch.results is None:
        return web.json_response({"type": "error", "error": {"type": "invalid_request_error",
                                                             "message": "batch has not ended"}}, status=400)
    lines = []
    for i, row in enumerate(batch.results):
        if "reply" in row:
            content, p, c, _ = row["reply"]
            message = {"id": f"msg_mock_{batch.id}_{i}", "type": "message", "role": "assistant", "model": row["model"],
                       "content": [{"type": "text", "text": content}], "stop_reason": "end_turn",
                       "usage": {"input_tokens": p - p // 2, "output_tokens": c, "cache_read_input_tokens": p // 2}
                       if state.config.cached_prompt else {"input_tokens": p, "output_tokens": c}}
            result: dict[str, Any] = {"type": "succeeded", "message": message}
        elif "error" in row:
            result = {"type": "errored", "error": {"type": "error", "error": {"type": "api_error",
                                                                              "message": "Mock fault 500."}}}
        else:
            result = {"type": row["unfinished"]}
        lines.append(orjson.dumps({"custom_id": row["custom_id"], "result": result}) + b"\n")
    return web.Response(body=b"".join(lines), content_type="application/binary")


async def _stats(request: web.Request) -> web.Response:
    counts = request.app[BATCHES].counts
    return web.json_response({k: v for k, v in counts.items() if not k.startswith(("attempt:", "calls:"))})


def register(app: web.Application, config: BatchMockConfig, oracle: Oracle | None,
             clock: Callable[[], float] = time.monotonic) -> None:
    """Add the batch routes to ``app`` (state in ``app[BATCHES]``).

    Args:
        app: the mock's application.
        config: completion time, expiry and error rate.
        oracle: the online routes' oracle (same replies), or None.
        clock: monotonic seconds (completion time).
    """
    app[BATCHES] = _Batches(config, oracle, clock)
    routes = (("POST", "/v1/files", "upload", _upload), ("GET", "/v1/files/{file_id}/content", "results", _file_content),
              ("GET", "/v1/files", "list", _files_list), ("DELETE", "/v1/files/{file_id}", "delete", _file_delete),
              ("POST", "/v1/batches", "create", _openai_create), ("GET", "/v1/batches", "list", _openai_list),
              ("GET", "/v1/batches/{batch_id}", "retrieve", _openai_retrieve),
              ("POST", "/v1/batches/{batch_id}/cancel", "cancel", _openai_cancel),
              ("POST", "/v1/messages/batches", "create", _anthropic_create),
              ("GET", "/v1/messages/batches", "list", _anthropic_list),
              ("GET", "/v1/messages/batches/{batch_id}", "retrieve", _anthropic_retrieve),
              ("GET", "/v1/messages/batches/{batch_id}/results", "results", _anthropic_results),
              ("POST", "/v1/messages/batches/{batch_id}/cancel", "cancel", _anthropic_cancel))
    for method, path, op, handler in routes:
        app.router.add_route(method, path, faulty(_delayed(handler, config.call_delay_s), op, config.faults,
                                                  app[BATCHES].counts))
    app.router.add_get("/stats/batches", _stats)


def _delayed(handler: Callable[[web.Request], Awaitable[web.Response]],
             delay_s: float) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``handler`` replying after ``delay_s`` seconds (a slow provider API)."""
    if delay_s <= 0:
        return handler

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(delay_s)
        return await handler(request)

    return slow


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line flags of :class:`BatchMockConfig`."""
    parser.add_argument("--batch-complete-s", type=float, default=0.0,
                        help="seconds from creation until a batch has ended (default at once)")
    parser.add_argument("--batch-expire-fraction", type=float, default=None, metavar="F",
                        help="batches expire with this fraction of their requests done")
    parser.add_argument("--batch-error-rate", type=float, default=0.0, metavar="RATE",
                        help="share of batch requests answered with an HTTP 500 error line")
    parser.add_argument("--batch-call-delay-s", type=float, default=0.0, metavar="S",
                        help="seconds every batch API call takes")
    parser.add_argument("--batch-fault", action="append", default=[], metavar="OP:KIND[:N]",
                        help=f"the first N (1) calls of OP ({', '.join(FAULT_OPS)}) fail with KIND "
                             f"({', '.join(BATCH_FAULTS)}; reset: after acting); repeatable")


def config_from(args: argparse.Namespace) -> BatchMockConfig:
    """The :class:`BatchMockConfig` of parsed flags (:func:`add_arguments`).

    Raises:
        ConfigError: a value out of range.
    """
    return BatchMockConfig(args.batch_complete_s, args.batch_expire_fraction, args.batch_error_rate, args.seed,
                           args.batch_call_delay_s, tuple(parse_batch_fault(f) for f in args.batch_fault),
                           cached_prompt=getattr(args, "cached_prompt", False))
