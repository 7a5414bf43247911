"""The ``nli`` Checker: an entailment model from a local folder (ONNX or transformers), over the evidence Checker's corpus.

A model folder is one of two kinds (:func:`read_folder` tells which):

- ``onnx``: ``model.onnx`` (int64 ``input_ids``, ``attention_mask`` and optionally
  ``token_type_ids`` of shape (pairs, tokens) in, logits of shape (pairs, labels) out),
  ``tokenizer.json`` and ``config.json``; run by onnxruntime (the ``nli`` extra, no torch).
- ``transformers``: a ``save_pretrained`` folder of a sequence-classification model, no
  ``model.onnx``: ``config.json``, ``model.safetensors`` or ``pytorch_model.bin`` (or their
  sharded index) and the tokenizer's files; loaded by ``AutoTokenizer`` and
  ``AutoModelForSequenceClassification`` with ``local_files_only=True`` (never a download) and
  run by torch on the CPU in float32 (the ``transformers`` extra). Its fast tokenizer's
  ``tokenizers`` form does the chunking and encoding, as ``tokenizer.json`` does for onnx.

Either way ``config.json``'s ``id2label`` names entailment / neutral / contradiction (NLI),
supported / unsupported (MiniCheck), or two labels with ``"supported_label"``, and everything
but the call "encoded pairs -> logits" (:class:`_Backend`) is one code path.

A claim's BM25 top ``top_k`` passages (claim + question, as the evidence Checker; none → unknown)
are cut into chunks that fit the model's window beside the claim; the maximum P(entailment) over
every (chunk, claim) pair decides: supported at or above ``threshold``, else unsupported, reason
``contradicted`` when the maximum P(contradiction) reaches ``contradiction``, else ``no_evidence``.
The extras are imported on use (``import dahl`` needs neither).
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
from typing import Any, Literal, Protocol

import anyio.to_thread
import numpy as np

from dahl.adapters._corpus import ANALYZER_VERSION, Corpus, Hit, analyze
from dahl.adapters._evidence import evidence_ids
from dahl.errors import AdapterError, ConfigError
from dahl.records import Answer, Claim, Evidence, Label, UnsupportedReason, Verdict

__all__ = ["KNOWN_FILES", "MODEL_FILES", "ModelFolder", "NLIChecker", "NLIModel", "read_folder"]

#: The files of an onnx folder.
MODEL_FILES = ("model.onnx", "tokenizer.json", "config.json")
#: Weights of a transformers folder, one of which (a single file or a sharded index) it holds.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
#: Tokenizer files a transformers folder may hold (hashed into the fingerprint when present).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.txt", "vocab.json", "merges.txt", "spm.model", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
#: The files ``dahl models check`` lists when present.
KNOWN_FILES = tuple(dict.fromkeys((MODEL_FILES[0], *WEIGHT_FILES, *TOKENIZER_FILES, "config.json")))
_FEEDS = ("input_ids", "attention_mask", "token_type_ids")
_ENTAILS = frozenset(("entailment", "supported"))
_OTHERS = frozenset(("neutral", "contradiction", "unsupported", "not_entailment"))
#: Window (tokens) when neither tokenizer.json nor config.json gives one, and the cap on config.json's.
_WINDOW = 512
#: Pairs per inference call.
_BATCH = 32
_Pair = tuple[str, str]
BackendName = Literal["onnx", "transformers"]


@dataclass(frozen=True)
class ModelFolder:
    """What a model folder holds, read without loading the model (:func:`read_folder`).

    Attributes:
        path: the folder.
        backend: ``"onnx"`` (model.onnx run by onnxruntime) or ``"transformers"`` (run by torch).
        labels: the ``id2label`` names by class index.
        supported: index of the class meaning entailed / supported.
        contradiction: index of the contradiction class, or None (two-label models).
        max_length: tokens of one (chunk, claim) pair with special tokens: tokenizer.json's
            truncation length, else config.json's ``max_position_embeddings`` (at most 512), else 512.
        fingerprint: blake2b-128 hex digest of the names and bytes of :attr:`files`.
        files: the files hashed, in order: onnx: ``model.onnx*``, tokenizer.json, config.json;
            transformers: the weights (with shards), the tokenizer files present, config.json.
    """

    path: Path
    labels: tuple[str, ...]
    supported: int
    contradiction: int | None
    max_length: int
    fingerprint: str
    backend: BackendName = "onnx"
    files: tuple[str, ...] = ()


def read_folder(path: str | Path) -> ModelFolder:
    """Read a model folder's kind, files, labels, window and fingerprint (blocking; hashes the weights).

    A folder with ``model.onnx`` is onnx; one without it but with ``config.json`` and one of
    :data:`WEIGHT_FILES` is transformers.

    Raises:
        ConfigError: the folder or a file its kind needs is missing, a JSON file does not parse,
            or ``id2label`` does not say which label means supported (file and key named).
    """
    p = Path(path)
    if not p.is_dir():
        raise ConfigError(f"model folder not found: {p}")
    backend: BackendName
    if not (p / MODEL_FILES[0]).is_file() and any((p / f).is_file() for f in WEIGHT_FILES):
        backend = "transformers"
        missing = [f for f in ("config.json",) if not (p / f).is_file()]
        if not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
            missing.append("tokenizer.json (or tokenizer_config.json)")
        if missing:
            raise ConfigError(f"{p}: missing {', '.join(missing)} (a transformers model folder holds config.json, "
                              "the weights and the tokenizer's files, as save_pretrained writes them)")
        weights = {f for f in WEIGHT_FILES if (p / f).is_file()}
        for index in weights & {"model.safetensors.index.json", "pytorch_model.bin.index.json"}:
            weights |= {str(v) for v in (_json(p / index).get("weight_map") or {}).values()}
        files = [p / f for f in sorted(weights)] + [p / f for f in TOKENIZER_FILES if (p / f).is_file()]
        files.append(p / "config.json")
    else:
        backend = "onnx"
        missing = [f for f in MODEL_FILES if not (p / f).is_file()]
        if missing:
            raise ConfigError(f"{p}: missing {', '.join(missing)} (a model folder holds {', '.join(MODEL_FILES)}, "
                              f"or is a transformers folder: config.json, {' or '.join(WEIGHT_FILES[::2])} and "
                              "the tokenizer's files)")
        files = [*sorted(q for q in p.iterdir() if q.name.startswith("model.onnx")), p / MODEL_FILES[1],
                 p / MODEL_FILES[2]]
    config = _json(p / "config.json")
    tokenizer = _json(p / "tokenizer.json") if (p / "tokenizer.json").is_file() else {}
    labels, supported, contradiction = _roles(p / "config.json", config)
    truncation, positions = tokenizer.get("truncation") or {}, config.get("max_position_embeddings")
    max_length = int(truncation["max_length"]) if isinstance(truncation.get("max_length"), int) \
        else min(positions, _WINDOW) if isinstance(positions, int) and positions > 0 else _WINDOW
    digest = hashlib.blake2b(digest_size=16)
    for f in files:
        digest.update(f.name.encode() + b"\0")
        try:
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        except OSError as exc:
            raise ConfigError(f"{f}: cannot read: {exc}") from None
    return ModelFolder(p, labels, supported, contradiction, max_length, digest.hexdigest(), backend,
                       tuple(f.name for f in files))


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


class _Backend(Protocol):
    """What runs a folder's model: encoded pairs in, logits out; the rest is :class:`NLIModel`'s.

    Attributes:
        name: the file named in errors (``model.onnx``, ``model.safetensors``).
        runtime: what runs it, for ``dahl models check`` (``onnxruntime 1.17.0``).
        inputs: the feeds the model takes, a subset of input_ids, attention_mask, token_type_ids.
        tokenizer: the ``tokenizers`` JSON of the folder's tokenizer.
        pad: ``(id, token)`` of the padding token, or None to look for ``[PAD]`` / ``<pad>``.
        calls: calls worth running at once, or None for one per core (each uses one thread).
    """

    name: str
    runtime: str
    inputs: tuple[str, ...]
    tokenizer: str
    pad: tuple[int, str] | None
    calls: int | None

    def logits(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """Logits of shape (pairs, labels) for int64 feeds of shape (pairs, tokens) (blocking, thread-safe)."""
        ...


class _OnnxBackend:
    """model.onnx in an onnxruntime session of one intra-op thread (see :class:`_Backend`)."""

    calls: int | None = None
    pad: tuple[int, str] | None = None
    name: str = MODEL_FILES[0]

    def __init__(self, folder: ModelFolder) -> None:
        try:
            import onnxruntime  # type: ignore[import-untyped,unused-ignore]
        except ImportError as exc:
            raise ConfigError(f"--checker nli needs onnxruntime and tokenizers ({exc}): "
                              "pip install 'dahl[nli]'") from None
        self.runtime = f"onnxruntime {onnxruntime.__version__}"
        try:
            self.tokenizer = (folder.path / "tokenizer.json").read_text(encoding="utf-8")
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            self._session = onnxruntime.InferenceSession(str(folder.path / self.name), options,
                                                         providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises plain Exception subclasses
            raise ConfigError(f"{folder.path}: cannot load the model: {exc}") from None
        self.inputs = tuple(i.name for i in self._session.get_inputs())
        if set(self.inputs) - set(_FEEDS) or not {"input_ids", "attention_mask"} <= set(self.inputs):
            raise ConfigError(f"{folder.path}/model.onnx takes inputs {list(self.inputs)}: dahl feeds input_ids, "
                              "attention_mask and token_type_ids")

    def logits(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self._session.run(None, feeds)[0])


class _TorchBackend:
    """A transformers folder loaded with ``local_files_only`` and run by torch on the CPU (see
    :class:`_Backend`). One call at a time: torch spreads a call over its intra-op threads
    (``torch.get_num_threads()``, the cores unless set)."""

    calls: int | None = 1

    def __init__(self, folder: ModelFolder) -> None:
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise ConfigError(f"{folder.path} is a transformers model folder (no model.onnx): running it needs torch "
                              f"and transformers ({exc}): pip install 'dahl[transformers]', or export the model to "
                              "ONNX (model.onnx, tokenizer.json, config.json) for the nli extra") from None
        self._torch = torch
        self.runtime = f"torch {torch.__version__}, transformers {transformers.__version__}"
        self.name = next(f for f in WEIGHT_FILES if (folder.path / f).is_file())
        logging = transformers.utils.logging
        bars = logging.is_progress_bar_enabled()
        logging.disable_progress_bar()  # its tqdm bars would cut through dahl's progress display
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder.path), local_files_only=True)
            model = transformers.AutoModelForSequenceClassification.from_pretrained(str(folder.path),
                                                                                    local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - transformers raises OSError, ValueError, KeyError and more
            raise ConfigError(f"{folder.path}: cannot load the transformers model: {exc}") from None
        finally:
            if bars:
                logging.enable_progress_bar()
        fast = getattr(tokenizer, "backend_tokenizer", None)
        if fast is None:
            raise ConfigError(f"{folder.path}: the tokenizer ({type(tokenizer).__name__}) has no tokenizers form, "
                              "which dahl chunks and encodes with: save the fast tokenizer (tokenizer.json) there")
        self.tokenizer = str(fast.to_str())
        pad, pad_id = tokenizer.pad_token, tokenizer.pad_token_id
        self.pad = (int(pad_id), str(pad)) if pad is not None and pad_id is not None else None
        self.inputs = tuple(n for n in tokenizer.model_input_names if n in _FEEDS)
        if not {"input_ids", "attention_mask"} <= set(self.inputs):
            raise ConfigError(f"{folder.path}: the tokenizer gives {list(tokenizer.model_input_names)}: dahl feeds "
                              "input_ids, attention_mask and token_type_ids")
        self._model = model.float().eval()  # float32 on the CPU, whatever dtype the weights were saved in

    def logits(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        torch = self._torch
        with torch.no_grad():  # thread-local: set in the worker thread that runs the call
            out = self._model(**{n: torch.from_numpy(v) for n, v in feeds.items()})
        return np.asarray(out.logits.float().numpy())


class NLIModel:
    """A model folder loaded: its tokenizer and backend (thread-safe).

    Args:
        folder: :func:`read_folder`'s result.

    Attributes:
        folder: the folder read.
        inputs: the input names the model takes.
        runtime: what runs it (``onnxruntime 1.17.0``; ``torch 2.4.0, transformers 4.44.0``).
        calls: inference calls worth running at once, or None for one per core.

    Raises:
        ConfigError: the folder's extra (``nli`` for onnx, ``transformers``) is not installed; the
            model or tokenizer does not load; the model's inputs or its output's shape do not fit (named).
    """

    def __init__(self, folder: ModelFolder) -> None:
        backend: _Backend = _TorchBackend(folder) if folder.backend == "transformers" else _OnnxBackend(folder)
        try:
            import tokenizers
        except ImportError as exc:
            raise ConfigError(f"--checker nli needs tokenizers ({exc}): pip install 'dahl[nli]'") from None
        self.folder, self._backend = folder, backend
        self.inputs, self.runtime, self.calls = backend.inputs, backend.runtime, backend.calls
        try:
            self._plain = tokenizers.Tokenizer.from_str(backend.tokenizer)
            self._pairs = tokenizers.Tokenizer.from_str(backend.tokenizer)
        except Exception as exc:  # noqa: BLE001 - tokenizers raises plain Exception
            raise ConfigError(f"{folder.path}: cannot load the tokenizer: {exc}") from None
        self._plain.no_truncation()
        self._plain.no_padding()
        self._pairs.enable_truncation(folder.max_length, strategy="longest_first")
        if self._pairs.padding is None:
            pad = backend.pad or next(((i, t) for t in ("[PAD]", "<pad>") if (i := self._pairs.token_to_id(t)) is not None),
                                      (0, "[PAD]"))
            self._pairs.enable_padding(pad_id=pad[0], pad_token=pad[1])
        try:
            shape = self.probabilities([("A passage.", "A claim.")]).shape
        except AdapterError as exc:
            raise ConfigError(str(exc)) from None
        if shape != (1, len(folder.labels)):
            raise ConfigError(f"{folder.path}/{backend.name} gives output of shape {shape} for one pair; config.json "
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
            AdapterError: tokenizing or inference failed (the model file named).
        """
        out = []
        for start in range(0, len(pairs), _BATCH):
            try:
                encoded = self._pairs.encode_batch(list(pairs[start:start + _BATCH]))
                feeds = {"input_ids": [e.ids for e in encoded], "attention_mask": [e.attention_mask for e in encoded],
                         "token_type_ids": [e.type_ids for e in encoded]}
                logits = self._backend.logits({n: np.asarray(feeds[n], dtype=np.int64) for n in self.inputs})
            except Exception as exc:  # noqa: BLE001 - tokenizers, onnxruntime and torch raise plain Exception subclasses
                raise AdapterError(f"{self.folder.path}/{self._backend.name}: inference failed: {exc}") from None
            out.append(np.asarray(logits, dtype=np.float64).reshape(len(encoded), -1))
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
        threads: inference calls at once, each in a worker thread (default: the model's
            :attr:`NLIModel.calls`, else the CPU count).

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
        self.threads = threads or model.calls or os.cpu_count() or 1
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
