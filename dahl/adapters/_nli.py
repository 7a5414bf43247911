"""The ``nli`` Checker: an entailment model from a local folder (ONNX), over the evidence Checker's corpus.

A model folder holds ``model.onnx`` (int64 ``input_ids``, ``attention_mask`` and optionally
``token_type_ids`` of shape (pairs, tokens) in, logits of shape (pairs, labels) out),
``tokenizer.json`` and ``config.json``, whose ``id2label`` names entailment / neutral /
contradiction (NLI), supported / unsupported (MiniCheck), or two labels with ``"supported_label"``.

A claim's BM25 top ``top_k`` passages (claim + question, as the evidence Checker; none → unknown)
are cut into chunks that fit the model's window beside the claim; the maximum P(entailment) over
every (chunk, claim) pair decides: supported at or above ``threshold``, else unsupported, reason
``contradicted`` when the maximum P(contradiction) reaches ``contradiction``, else ``no_evidence``.
Needs the ``nli`` extra (``pip install 'dahl[nli]'``: onnxruntime, tokenizers), imported on use.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np

from dahl.adapters._corpus import ANALYZER_VERSION, Corpus, Hit, analyze
from dahl.adapters._evidence import evidence_ids
from dahl.errors import AdapterError, ConfigError
from dahl.records import Answer, Claim, Evidence, Label, UnsupportedReason, Verdict

__all__ = ["MODEL_FILES", "ModelFolder", "NLIChecker", "NLIModel", "read_folder"]

MODEL_FILES = ("model.onnx", "tokenizer.json", "config.json")
_ENTAILS = frozenset(("entailment", "supported"))
_OTHERS = frozenset(("neutral", "contradiction", "unsupported", "not_entailment"))
#: Window (tokens) when neither tokenizer.json nor config.json gives one, and the cap on config.json's.
_WINDOW = 512
#: Pairs per inference call.
_BATCH = 32
_Pair = tuple[str, str]


@dataclass(frozen=True)
class ModelFolder:
    """What a model folder holds, read without loading the model (:func:`read_folder`).

    Attributes:
        path: the folder.
        labels: the ``id2label`` names by class index.
        supported: index of the class meaning entailed / supported.
        contradiction: index of the contradiction class, or None (two-label models).
        max_length: tokens of one (chunk, claim) pair with special tokens: tokenizer.json's
            truncation length, else config.json's ``max_position_embeddings`` (at most 512), else 512.
        fingerprint: blake2b-128 hex digest of ``model.onnx*``, tokenizer.json and config.json bytes.
    """

    path: Path
    labels: tuple[str, ...]
    supported: int
    contradiction: int | None
    max_length: int
    fingerprint: str


def read_folder(path: str | Path) -> ModelFolder:
    """Read a model folder's files, labels, window and fingerprint (blocking; hashes the weights).

    Raises:
        ConfigError: the folder or one of :data:`MODEL_FILES` is missing, a JSON file does not
            parse, or ``id2label`` does not say which label means supported (file and key named).
    """
    p = Path(path)
    if not p.is_dir():
        raise ConfigError(f"model folder not found: {p}")
    missing = [f for f in MODEL_FILES if not (p / f).is_file()]
    if missing:
        raise ConfigError(f"{p}: missing {', '.join(missing)} (a model folder holds {', '.join(MODEL_FILES)})")
    config, tokenizer = _json(p / "config.json"), _json(p / "tokenizer.json")
    labels, supported, contradiction = _roles(p / "config.json", config)
    truncation, positions = tokenizer.get("truncation") or {}, config.get("max_position_embeddings")
    max_length = int(truncation["max_length"]) if isinstance(truncation.get("max_length"), int) \
        else min(positions, _WINDOW) if isinstance(positions, int) and positions > 0 else _WINDOW
    digest = hashlib.blake2b(digest_size=16)
    for f in (*sorted(q for q in p.iterdir() if q.name.startswith("model.onnx")), p / MODEL_FILES[1], p / MODEL_FILES[2]):
        digest.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return ModelFolder(p, labels, supported, contradiction, max_length, digest.hexdigest())


def _json(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{file}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: must hold a JSON object")
    return data


def _roles(file: Path, config: dict[str, Any]) -> tuple[tuple[str, ...], int, int | None]:
    """``(labels, supported index, contradiction index or None)`` of config.json's ``id2label``."""
    raw = config.get("id2label")
    names = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    labels = tuple(names.get(str(i), "") for i in range(len(names)))
    if not labels or "" in labels:
        raise ConfigError(f"{file}: id2label must name the labels of classes 0..n-1, got {raw!r}")
    low = [n.lower() for n in labels]
    chosen = config.get("supported_label")
    if chosen is not None:
        if len(labels) != 2 or chosen not in labels:
            raise ConfigError(f"{file}: supported_label {chosen!r} must name one label of a two-label id2label "
                              f"{list(labels)}")
        return labels, labels.index(chosen), None
    if len(labels) in (2, 3) and sum(n in _ENTAILS for n in low) == 1 and set(low) <= _ENTAILS | _OTHERS:
        supported = next(i for i, n in enumerate(low) if n in _ENTAILS)
        return labels, supported, low.index("contradiction") if "contradiction" in low else None
    raise ConfigError(f"{file}: cannot tell which label means supported from id2label {list(labels)}: dahl reads "
                      "entailment/neutral/contradiction (NLI) or supported/unsupported (MiniCheck); for other "
                      "names of a two-label model add \"supported_label\": \"NAME\" to config.json")


class NLIModel:
    """A model folder loaded: its tokenizer and onnxruntime session (thread-safe, one CPU thread per call).

    Args:
        folder: :func:`read_folder`'s result.

    Attributes:
        folder: the folder read.
        inputs: the input names the graph takes.

    Raises:
        ConfigError: the ``nli`` extra is not installed; the model or tokenizer does not load;
            the graph's inputs or its output's shape do not fit (named).
    """

    def __init__(self, folder: ModelFolder) -> None:
        try:
            import onnxruntime  # type: ignore[import-untyped,unused-ignore]
            import tokenizers
        except ImportError as exc:
            raise ConfigError(f"--checker nli needs onnxruntime and tokenizers ({exc}): "
                              "pip install 'dahl[nli]'") from None
        self.folder = folder
        try:
            self._plain = tokenizers.Tokenizer.from_file(str(folder.path / "tokenizer.json"))
            self._pairs = tokenizers.Tokenizer.from_file(str(folder.path / "tokenizer.json"))
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            self._session = onnxruntime.InferenceSession(str(folder.path / "model.onnx"), options,
                                                         providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - both raise plain Exception subclasses
            raise ConfigError(f"{folder.path}: cannot load the model: {exc}") from None
        self._plain.no_truncation()
        self._plain.no_padding()
        self._pairs.enable_truncation(folder.max_length, strategy="longest_first")
        if self._pairs.padding is None:
            pad = next((t for t in ("[PAD]", "<pad>") if self._pairs.token_to_id(t) is not None), None)
            self._pairs.enable_padding(pad_id=self._pairs.token_to_id(pad) if pad else 0, pad_token=pad or "[PAD]")
        self.inputs = tuple(i.name for i in self._session.get_inputs())
        unknown = set(self.inputs) - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown or not {"input_ids", "attention_mask"} <= set(self.inputs):
            raise ConfigError(f"{folder.path}/model.onnx takes inputs {list(self.inputs)}: dahl feeds input_ids, "
                              "attention_mask and token_type_ids")
        try:
            shape = self.probabilities([("A passage.", "A claim.")]).shape
        except AdapterError as exc:
            raise ConfigError(str(exc)) from None
        if shape != (1, len(folder.labels)):
            raise ConfigError(f"{folder.path}/model.onnx gives output of shape {shape} for one pair; config.json "
                              f"names {len(folder.labels)} labels")

    def chunks(self, passage: str, claim: str) -> list[str]:
        """``passage`` cut into consecutive pieces that fit the window beside ``claim`` (one piece
        when it fits, or when the claim leaves less than an eighth of the window: the pair is then truncated)."""
        room = self.folder.max_length - self._plain.num_special_tokens_to_add(True) \
            - len(self._plain.encode(claim, add_special_tokens=False).ids)
        offsets = self._plain.encode(passage, add_special_tokens=False).offsets
        if len(offsets) <= room or room < max(1, self.folder.max_length // 8):
            return [passage]
        return [passage[offsets[i][0]:offsets[min(i + room, len(offsets)) - 1][1]]
                for i in range(0, len(offsets), room)]

    def probabilities(self, pairs: Sequence[_Pair]) -> np.ndarray:
        """Softmax of the logits of ``(premise, hypothesis)`` pairs, float64 of shape (len(pairs),
        labels), in batches of 32 (blocking).

        Raises:
            AdapterError: onnxruntime failed.
        """
        out = []
        for start in range(0, len(pairs), _BATCH):
            try:
                encoded = self._pairs.encode_batch(list(pairs[start:start + _BATCH]))
                feeds = {"input_ids": [e.ids for e in encoded], "attention_mask": [e.attention_mask for e in encoded],
                         "token_type_ids": [e.type_ids for e in encoded]}
                result = self._session.run(None, {n: np.asarray(feeds[n], dtype=np.int64) for n in self.inputs})
            except Exception as exc:  # noqa: BLE001 - tokenizers and onnxruntime raise plain Exception subclasses
                raise AdapterError(f"{self.folder.path}/model.onnx: inference failed: {exc}") from None
            out.append(np.asarray(result[0], dtype=np.float64).reshape(len(encoded), -1))
        z = np.concatenate(out) if out else np.zeros((0, len(self.folder.labels)))
        z = np.exp(z - z.max(axis=1, keepdims=True, initial=-np.inf))
        return np.asarray(z / z.sum(axis=1, keepdims=True))


class NLIChecker:
    """Checker of claims against a local corpus by an entailment model (see the module docstring).

    Args:
        corpus: the indexed corpus (:func:`dahl.adapters._documents.open_corpus`).
        model: the loaded model.
        top_k: passages per claim (>= 1).
        threshold: P(entailment) at or above which a claim is supported, in [0, 1].
        contradiction: P(contradiction) at or above which an unsupported claim is ``contradicted``, in [0, 1].
        threads: inference threads (default: the CPU count).

    Attributes:
        fingerprint: ``"nli/v1:<model fingerprint>:<corpus fingerprint>:a<analyzer>:<settings>"``.
        concurrency: claims checked at once (16 per thread, so batches fill).

    Raises:
        ConfigError: a setting is out of range.
    """

    cacheable = True
    parser_version = "1"
    #: ``cache_request`` holds document ids only: the key keeps the question and claim texts.
    cache_request_covers_input = False

    def __init__(self, corpus: Corpus, model: NLIModel, *, top_k: int = 5, threshold: float = 0.5,
                 contradiction: float = 0.5, threads: int | None = None) -> None:
        if top_k < 1 or not (0.0 <= threshold <= 1.0 and 0.0 <= contradiction <= 1.0):
            raise ConfigError(f"need top_k >= 1 and thresholds in [0, 1], got {top_k}, {threshold}, {contradiction}")
        self.corpus, self.model, self.top_k = corpus, model, top_k
        self.threshold, self.contradiction = threshold, contradiction
        self.threads = threads or os.cpu_count() or 1
        self.concurrency = 16 * self.threads
        self.fingerprint = (f"nli/v1:{model.folder.fingerprint}:{corpus.fingerprint}:a{ANALYZER_VERSION}:"
                            f"k={top_k},e={threshold:g},c={contradiction:g}")
        self._queue: deque[tuple[list[_Pair], asyncio.Future[np.ndarray]]] = deque()
        self._slots: asyncio.Semaphore | None = None

    def cache_request(self, claim: Claim, answer: Answer) -> dict[str, list[str] | None]:
        """``{"doc_ids": [...] | None}``: the documents searched, what the verdict depends on beyond
        the claim and question (cache keys)."""
        return {"doc_ids": evidence_ids(answer)}

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Judge one claim; retrieval and inference run in worker threads, inference batched with
        the other claims in flight.

        Raises:
            AdapterError: inference failed.
        """
        hits, pairs, owners = await anyio.to_thread.run_sync(self._pairs_of, claim, answer)
        return self._decide(hits, owners, await self._score(pairs) if hits else None)

    def check_sync(self, claim: Claim, answer: Answer) -> Verdict:
        """Blocking form of :meth:`check`, one claim's pairs in one call."""
        hits, pairs, owners = self._pairs_of(claim, answer)
        return self._decide(hits, owners, self.model.probabilities(pairs) if hits else None)

    def _pairs_of(self, claim: Claim, answer: Answer) -> tuple[list[Hit], list[_Pair], list[int]]:
        """The claim's passages, its (chunk, claim) pairs and each pair's passage index (blocking)."""
        query = analyze(claim.text) + (analyze(answer.question) if answer.question else [])
        hits = self.corpus.search(query, k=self.top_k, doc_ids=evidence_ids(answer))
        chunks = [(i, c) for i, hit in enumerate(hits) for c in self.model.chunks(hit.passage.text, claim.text)]
        return hits, [(c, claim.text) for _, c in chunks], [i for i, _ in chunks]

    async def _score(self, pairs: list[_Pair]) -> np.ndarray:
        """:meth:`NLIModel.probabilities` of ``pairs``: queued behind the pairs of the other claims in
        flight; whoever holds one of ``threads`` slots runs the queue's head (up to 32 pairs)."""
        if self._slots is None:  # created on first use: it belongs to the running loop
            self._slots = asyncio.Semaphore(self.threads)
        done: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        entry = (pairs, done)
        self._queue.append(entry)
        try:
            while not done.done():
                async with self._slots:
                    taken: list[tuple[list[_Pair], asyncio.Future[np.ndarray]]] = []
                    while self._queue and (not taken or sum(len(p) for p, _ in taken) + len(self._queue[0][0]) <= _BATCH):
                        taken.append(self._queue.popleft())
                    if not taken:
                        break  # ours is being scored by another slot
                    try:
                        probs = await anyio.to_thread.run_sync(self.model.probabilities,
                                                               [p for ps, _ in taken for p in ps])
                    except AdapterError as exc:  # every claim of the batch gets it
                        for _, future in taken:
                            future.set_exception(exc)
                        continue
                    except BaseException:
                        for _, future in taken:
                            if future is not done:
                                future.set_exception(AdapterError("inference was cancelled"))
                        raise
                    start = 0
                    for ps, future in taken:
                        if not future.done():
                            future.set_result(probs[start:start + len(ps)])
                        start += len(ps)
        except BaseException:
            if entry in self._queue:
                self._queue.remove(entry)
            raise
        return await done

    def _decide(self, hits: Sequence[Hit], owners: Sequence[int], probs: np.ndarray | None) -> Verdict:
        """The verdict from the pairs' probabilities (None: nothing retrieved)."""
        if probs is None or not hits:
            return Verdict(label=Label.UNKNOWN, checker=self.fingerprint, raw="no passage found")
        folder = self.model.folder
        entail = probs[:, folder.supported]
        per_passage = [float(entail[[j for j, o in enumerate(owners) if o == i]].max()) for i in range(len(hits))]
        order = sorted(range(len(hits)), key=lambda i: -per_passage[i])
        evidence = tuple(Evidence(text=hits[i].passage.text, source=hits[i].passage.doc_id,
                                  score=round(per_passage[i], 4), title=hits[i].passage.title or None,
                                  passage_id=hits[i].passage.id) for i in order)
        best = order[0]
        found = f"P({folder.labels[folder.supported]})={per_passage[best]:.2f} in passage {hits[best].passage.id}"
        if per_passage[best] >= self.threshold:
            return Verdict(label=Label.SUPPORTED, checker=self.fingerprint, raw=f"entailed: {found}", evidence=evidence)
        reason, raw = UnsupportedReason.NO_EVIDENCE, f"not entailed: best {found}"
        if folder.contradiction is not None:
            contra = probs[:, folder.contradiction]
            worst = int(np.argmax(contra))
            if float(contra[worst]) >= self.contradiction:
                reason = UnsupportedReason.CONTRADICTED
                raw = (f"contradicted: P({folder.labels[folder.contradiction]})={float(contra[worst]):.2f} in passage "
                       f"{hits[owners[worst]].passage.id}; best {found}")
        return Verdict(label=Label.UNSUPPORTED, checker=self.fingerprint, raw=raw, evidence=evidence, reason=reason)
