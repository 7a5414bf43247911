"""The columnar verdict store of a run, ``OUTDIR/verdicts/``, one file per column::

    verdicts/
      meta.json          {"format": "dahl-verdicts", "version": 1, "n_answers", "n_claims",
                          "labels", "statuses", "gamma", "k"}
      model.npy          int32 (n_answers,)   code into models.json
      category.npy       int32 (n_answers,)   code into categories.json
      question.npy       int32 (n_answers,)   code into question_ids.json
      status.npy         int8  (n_answers,)   index into dahl.records.Status
      counts.npy         int32 (n_answers, 5) claims per label, dahl.records.LABELS order
      offsets.npy        int64 (n_answers + 1,) claims of answer i are labels[offsets[i]:offsets[i+1]]
      labels.npy         int8  (n_claims,)    index into dahl.records.LABELS
      models.json, categories.json, question_ids.json, ids.json   JSON lists of strings
      recall.npy, recall_facts.npy   only for runs with reference facts (dahl.analysis._recall_columns)

:class:`VerdictWriter` writes it atomically (a temporary sibling folder renamed in);
:func:`load_verdicts` memory-maps it.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import weakref
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import orjson

from dahl.errors import ConfigError, InputError
from dahl.metrics import dahl_mask, f1_values, factscore_mask, factscore_values, precision
from dahl.analysis._recall_columns import FACT_COLUMNS, RECALL_METRICS, RecallColumns
from dahl.records import LABELS, AnswerResult, Label, ResultDigest, Status

__all__ = [
    "METRICS",
    "STORE_DIR",
    "STORE_VERSION",
    "VerdictWriter",
    "Verdicts",
    "canonical_metric",
    "load_runs",
    "load_verdicts",
    "merge_verdicts",
    "rebuild",
    "save_verdicts",
]

logger = logging.getLogger(__name__)

STORE_DIR = "verdicts"
STORE_VERSION = 1
_FORMAT = "dahl-verdicts"
STATUSES: tuple[Status, ...] = tuple(Status)

#: Per-answer values :meth:`Verdicts.scores` computes (``dahl_score`` aliases ``precision``);
#: the recall ones need a run scored with reference facts.
METRICS: tuple[str, ...] = ("precision", "factscore", "factscore_init", "f1_at_k", "n_claims", *RECALL_METRICS)
_ALIASES = {"dahl_score": "precision", "dahl_score-precision": "precision"}

_LABEL_CODE = {str(label): i for i, label in enumerate(LABELS)}
_STATUS_CODE = {str(s): i for i, s in enumerate(STATUSES)}
_S = LABELS.index(Label.SUPPORTED)
_U = LABELS.index(Label.UNSUPPORTED)


def canonical_metric(name: str) -> str:
    """Map a metric name or alias to one of :data:`METRICS`; ConfigError (listing them) if unknown."""
    name = _ALIASES.get(name, name)
    if name not in METRICS:
        raise ConfigError(f"unknown metric {name!r}; choose one of dahl_score, {', '.join(METRICS)}")
    return name


@dataclass
class Verdicts:
    """The columns of one store (or of several merged runs).

    Attributes:
        model, category, question, status, counts, offsets, labels, recall, recall_facts:
            the columns of the layout above (``recall*`` None when no run had reference facts).
        models, categories, question_ids: name tables.
        root: the ``verdicts/`` folder read (None for an in-memory or merged store).
        gamma, k: FActScore γ and F1@K's K of the run, when recorded.
        source: int16 (n_answers,), the run each answer came from (None: a single run).
        roots: the run folders, in ``source`` order.
        without_recall: the run folders that have no recall columns.
    """

    model: npt.NDArray[np.int32]
    category: npt.NDArray[np.int32]
    question: npt.NDArray[np.int32]
    status: npt.NDArray[np.int8]
    counts: npt.NDArray[np.int32]
    offsets: npt.NDArray[np.int64]
    labels: npt.NDArray[np.int8]
    models: list[str]
    categories: list[str]
    question_ids: list[str]
    root: Path | None = None
    gamma: float | None = None
    k: int | None = None
    source: npt.NDArray[np.int16] | None = None
    roots: tuple[Path, ...] = ()
    recall: npt.NDArray[np.float64] | None = None
    recall_facts: npt.NDArray[np.int32] | None = None
    without_recall: tuple[Path, ...] = ()
    _ids: list[str] | None = field(default=None, repr=False)

    @property
    def n_answers(self) -> int:
        """Number of answers."""
        return int(self.model.shape[0])

    @property
    def ids(self) -> list[str]:
        """Answer ids (n_answers,), read from ``ids.json`` on first use (it is the largest table).

        Raises:
            InputError: the table is missing or has the wrong length.
        """
        if self._ids is None:
            if self.root is None:
                raise InputError("answer ids are not available for this store")
            self._ids = _read_table(self.root / "ids.json")
            if len(self._ids) != self.n_answers:
                raise InputError(f"{len(self._ids)} ids for {self.n_answers} answers", file=str(self.root / "ids.json"))
        return self._ids

    def eligible(self) -> npt.NDArray[np.bool_]:
        """bool (n_answers,): the answer responded (not abstained, split without error)."""
        bad = np.array([_STATUS_CODE[Status.ABSTAINED], _STATUS_CODE[Status.ERROR]], dtype=np.int8)
        return ~np.isin(self.status, bad)

    def scores(
        self, metric: str, *, gamma: float | None = None, k: int | None = None, partial_recall: bool = False
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """Per-answer values of ``metric`` and the mask of answers that enter its mean.

        Masks: :func:`dahl.metrics.dahl_mask` for ``precision`` and ``f1_at_k``,
        :func:`dahl.metrics.factscore_mask` for the FActScores, every responding answer for
        ``n_claims``, and for recall metrics every answer where defined (abstained: 0).

        Args:
            metric: one of :data:`METRICS` or an alias.
            gamma, k: FActScore γ in claims and F1@K's K in supported claims (None: the run's, else 10, 64).
            partial_recall: mask out the answers of runs without recall instead of refusing.

        Returns ``(values, mask)``: float64 (n_answers,), 0.0 outside the mask, and bool (n_answers,).

        Raises:
            ConfigError: unknown metric, gamma < 0, k < 1, or a recall metric for a run
                without recall (named).
        """
        name = canonical_metric(metric)
        if name in RECALL_METRICS:
            raw = self._recall_column(name, partial=partial_recall)
            mask = np.isfinite(raw)
            return np.where(mask, raw, 0.0), mask
        g = gamma if gamma is not None else (self.gamma if self.gamma is not None else 10.0)
        kk = k if k is not None else (self.k if self.k is not None else 64)
        counts = np.asarray(self.counts)
        eligible = self.eligible()
        if name == "n_claims":
            values = np.diff(np.asarray(self.offsets)).astype(np.float64)
            return np.where(eligible, values, 0.0), eligible
        if name == "precision":
            mask = dahl_mask(counts, eligible)
            raw = precision(counts[:, _S], counts[:, _U])
        elif name == "f1_at_k":
            mask = dahl_mask(counts, eligible)
            raw = f1_values(counts, kk)
        else:
            mask = factscore_mask(counts, eligible)
            raw = factscore_values(counts, g if name == "factscore" else 0.0)
        return np.where(mask, raw, 0.0), mask

    def _recall_column(self, name: str, *, partial: bool = False) -> npt.NDArray[np.float64]:
        """The ``recall.npy`` column of ``name``; ConfigError naming the runs without one."""
        if self.recall is None or (self.without_recall and not partial):
            missing = self.without_recall or self.roots[:1]
            where = ", ".join(str(p) for p in missing) or "this verdict store"
            raise ConfigError(
                f"{name} needs recall, and {where} has none (it was scored without reference facts); "
                "score it with dahl score --refs REFS.jsonl"
            )
        return np.asarray(self.recall[:, RECALL_METRICS.index(name)], dtype=np.float64)


#: Answers a :class:`VerdictWriter` holds before it appends its columns to its spool folder.
SPOOL_ANSWERS = 1 << 14

#: The per-answer and per-claim columns a :class:`VerdictWriter` spools: name -> (array code, dtype).
_SPOOLED: dict[str, tuple[str, type[np.generic]]] = {
    "model": ("i", np.int32), "category": ("i", np.int32), "question": ("i", np.int32),
    "status": ("b", np.int8), "counts": ("i", np.int32), "offsets": ("q", np.int64), "labels": ("b", np.int8),
}


class VerdictWriter:
    """Collects answer results and writes ``out_dir/verdicts/`` at :meth:`close`.

    The columns go to a spool folder beside the store (``out_dir/.verdicts.tmp-*``) every
    :data:`SPOOL_ANSWERS` answers, so memory holds one spool's worth (about 60 bytes an answer
    and one a claim), the name tables (a code per distinct model, category and question) and,
    for a run with reference facts, the recall columns (:class:`RecallColumns`). At :meth:`close`
    each spooled column becomes its ``.npy`` file and the folder is renamed into place; a writer
    dropped unclosed removes its spool.

    Args:
        out_dir: the run's output folder.
        gamma, k: the run's FActScore γ and F1@K's K, recorded as defaults for readers.
    """

    def __init__(self, out_dir: Path, *, gamma: float | None = None, k: int | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.gamma = gamma
        self.k = k
        self._buffers = {name: array(code) for name, (code, _) in _SPOOLED.items()}
        self._buffers["offsets"].append(0)
        self._ids = bytearray(b"[")  # ids.json as it will be written, each id followed by a comma
        self._n = 0
        self._claims = 0
        self._models: dict[str, int] = {}
        self._categories: dict[str, int] = {}
        self._questions: dict[str, int] = {}
        self._recall = RecallColumns()
        self._spool: Path | None = None
        self._cleanup: weakref.finalize[Any, Any] | None = None
        self._closed = False

    def __len__(self) -> int:
        """Number of answers added."""
        return self._n

    def add(self, result: AnswerResult | ResultDigest) -> None:
        """Record one answer's codes, label counts and per-claim labels (not its texts); blocking
        (every :data:`SPOOL_ANSWERS` answers it appends to the spool folder).

        Raises:
            InputError: unknown label name in ``result.counts``.
            RuntimeError: the writer is closed.
            OSError: the spool folder cannot be written.
        """
        if self._closed:
            raise RuntimeError("VerdictWriter.add after close")
        row = [0] * len(LABELS)
        for key, value in result.counts.items():
            col = _LABEL_CODE.get(key)
            if col is None:
                raise InputError(f"unknown label {key!r} in answer {result.id!r}", field="counts")
            row[col] = value
        b = self._buffers
        b["counts"].extend(row)
        b["labels"].extend(_LABEL_CODE[c.label] for c in result.claims)
        self._claims += len(result.claims)
        b["offsets"].append(self._claims)
        b["model"].append(self._models.setdefault(result.model, len(self._models)))
        b["category"].append(self._categories.setdefault(result.category, len(self._categories)))
        qid = result.question_id or result.question
        b["question"].append(self._questions.setdefault(qid, len(self._questions)))
        b["status"].append(_STATUS_CODE[result.status])
        self._ids += orjson.dumps(result.id)
        self._ids += b","
        self._n += 1
        self._recall.add(getattr(result, "recall", None))
        if len(b["model"]) >= SPOOL_ANSWERS:
            self._spill()

    def _spill(self) -> Path:
        """Append the held columns and ids to the spool folder (made on first use) and return it."""
        spool = self._spool
        if spool is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            spool = self._spool = _new_folder(self.out_dir)
            self._cleanup = weakref.finalize(self, shutil.rmtree, spool, True)
        for name, buffer in self._buffers.items():
            with (spool / f"{name}.raw").open("ab") as f:
                buffer.tofile(f)
            del buffer[:]
        with (spool / "ids.raw").open("ab") as f:
            f.write(self._ids)
        self._ids = bytearray()
        return spool

    def close(self) -> Path:
        """Write the store (idempotent; OSError when it cannot), release the columns and return the
        ``verdicts/`` folder."""
        target = self.out_dir / STORE_DIR
        if self._closed:
            return target
        self._closed = True
        n = self._n
        try:
            spool = self._spill()
            shapes = {"counts": (n, len(LABELS)), "offsets": (n + 1,), "labels": (self._claims,)}
            for name, (_, dtype) in _SPOOLED.items():
                _npy_from_raw(spool / f"{name}.raw", spool / f"{name}.npy", np.dtype(dtype), shapes.get(name, (n,)))
            with (spool / "ids.raw").open("r+b") as f:  # "[id,id," -> "[id,id]"; no id: "[" -> "[]"
                f.seek(-1, os.SEEK_END)
                if n:
                    f.truncate()
                f.write(b"]")
            os.replace(spool / "ids.raw", spool / "ids.json")
            recall = self._recall.arrays()
            columns = {} if recall is None else {"recall": recall[0], "recall_facts": recall[1]}
            _write_tables(spool, columns, models=list(self._models), categories=list(self._categories),
                          question_ids=list(self._questions), gamma=self.gamma, k=self.k, n=n, n_claims=self._claims)
            del recall, columns
            _install(spool, self.out_dir)
        finally:
            self._release()
        logger.info("wrote verdict store %s (%d answers, %d claims)", target, n, self._claims)
        return target

    def _release(self) -> None:
        """Drop the columns and the spool folder (after :meth:`close`)."""
        self._buffers = {name: array(code) for name, (code, _) in _SPOOLED.items()}
        self._ids = bytearray()
        self._recall = RecallColumns()
        if self._cleanup is not None:
            self._cleanup()  # the spool is renamed into place on success: nothing left to remove then


def _npy_from_raw(raw: Path, npy: Path, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
    """Write ``npy``: the ``.npy`` header of an array of ``dtype`` and ``shape``, then the bytes of
    ``raw`` (removed), copied a chunk at a time.

    Raises:
        InputError: ``raw`` does not hold ``shape`` of ``dtype``.
    """
    expected = int(np.prod(shape)) * dtype.itemsize
    if raw.stat().st_size != expected:
        raise InputError(f"spooled column {raw.name} holds {raw.stat().st_size} bytes, not {expected}")
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    with raw.open("rb") as src, npy.open("wb") as dst:
        np.lib.format.write_array_header_1_0(dst, header)
        shutil.copyfileobj(src, dst, 1 << 20)
    raw.unlink()


def save_verdicts(store: Verdicts, out_dir: Path, *, ids_json: bytes | None = None) -> Path:
    """Write ``store`` to ``out_dir/verdicts/``, replacing any store there by renames (readers see
    the old store or the new one), and return that folder.

    ``ids_json``: the ``ids.json`` table already encoded (a JSON list of ``n_answers`` strings,
    as ``orjson.dumps`` writes it); None: ``store.ids``, which must be available.

    Raises:
        InputError: the columns have inconsistent lengths.
        OSError: the folder cannot be written.
    """
    n = store.n_answers
    n_claims = int(store.labels.shape[0])
    ids_table = orjson.dumps(store.ids) if ids_json is None else ids_json
    shapes_ok = (
        store.category.shape == (n,)
        and store.question.shape == (n,)
        and store.status.shape == (n,)
        and store.counts.shape == (n, len(LABELS))
        and store.offsets.shape == (n + 1,)
        and (ids_json is not None or len(store.ids) == n)
        and (n_claims == int(store.offsets[-1]))
        and (store.recall is None or store.recall.shape == (n, len(RECALL_METRICS)))
        and ((store.recall is None) == (store.recall_facts is None))
        and (store.recall_facts is None or store.recall_facts.shape == (n, len(FACT_COLUMNS)))
    )
    if not shapes_ok:
        raise InputError("verdict store columns have inconsistent lengths")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / STORE_DIR
    tmp = _new_folder(out_dir)
    try:
        _write_columns(store, ids_table, tmp, n, n_claims)
        _install(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


_FOLDER_NUMBERS = itertools.count()


def _new_folder(out_dir: Path) -> Path:
    """A new empty folder ``out_dir/.verdicts.tmp-PID-N`` to build a store in (one left by an
    earlier process of this PID is removed)."""
    folder = out_dir / f".{STORE_DIR}.tmp-{os.getpid()}-{next(_FOLDER_NUMBERS)}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    return folder


def _install(folder: Path, out_dir: Path) -> None:
    """Rename the complete store ``folder`` to ``out_dir/verdicts``, replacing any store there by
    renames (readers see the old store or the new one)."""
    target = out_dir / STORE_DIR
    old = out_dir / f".{STORE_DIR}.old-{os.getpid()}"
    if target.exists():
        os.replace(target, old)
    os.replace(folder, target)
    if old.exists():
        shutil.rmtree(old)


def _write_columns(store: Verdicts, ids_json: bytes, tmp: Path, n: int, n_claims: int) -> None:
    """Write every column and table (``ids.json`` given encoded) into the temporary folder ``tmp``."""
    columns: dict[str, Any] = {name: getattr(store, name) for name in _SPOOLED}
    if store.recall is not None and store.recall_facts is not None:
        columns["recall"] = store.recall
        columns["recall_facts"] = store.recall_facts
    (tmp / "ids.json").write_bytes(ids_json)
    _write_tables(tmp, columns, models=store.models, categories=store.categories, question_ids=store.question_ids,
                  gamma=store.gamma, k=store.k, n=n, n_claims=n_claims)


def _write_tables(tmp: Path, columns: dict[str, Any], *, models: list[str], categories: list[str],
                  question_ids: list[str], gamma: float | None, k: int | None, n: int, n_claims: int) -> None:
    """Write ``columns`` (name -> array, the recall ones in their dtypes), the name tables and, last,
    ``meta.json`` into the store folder ``tmp``."""
    dtypes: dict[str, type[np.generic]] = {"recall": np.float64, "recall_facts": np.int32,
                                           **{name: t for name, (_, t) in _SPOOLED.items()}}
    for name, arr in columns.items():
        np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr, dtype=dtypes[name]), allow_pickle=False)
    for name, table in (("models", models), ("categories", categories), ("question_ids", question_ids)):
        (tmp / f"{name}.json").write_bytes(orjson.dumps(table))
    meta = {
        "format": _FORMAT,
        "version": STORE_VERSION,
        "n_answers": n,
        "n_claims": n_claims,
        "labels": [str(x) for x in LABELS],
        "statuses": [str(x) for x in STATUSES],
        "gamma": gamma,
        "k": k,
    }
    if "recall" in columns:
        meta["recall_columns"] = list(RECALL_METRICS)
        meta["recall_fact_columns"] = list(FACT_COLUMNS)
    # meta.json last: its presence marks a complete folder.
    (tmp / "meta.json").write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))


def _read_table(path: Path) -> list[str]:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InputError(f"cannot read verdict store table: {exc}", file=str(path)) from None
    if not isinstance(data, list):
        raise InputError("verdict store table is not a JSON list", file=str(path))
    return [str(x) for x in data]


def _store_dir(path: Path) -> Path:
    path = Path(path)
    return path if (path / "meta.json").is_file() and path.name == STORE_DIR else path / STORE_DIR


def load_verdicts(run_dir: Path) -> Verdicts:
    """Open the store of ``run_dir`` (a run folder or its ``verdicts/``), memory-mapping the arrays.

    Raises:
        InputError: no store, another version, or damaged files; the message says to run
            ``dahl score`` again (or :func:`rebuild`).
    """
    folder = _store_dir(run_dir)
    hint = (
        f"run dahl score again with -o {Path(run_dir)} to write it "
        "(finished answers are not re-scored), or call dahl.analysis._verdicts.rebuild()"
    )
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise InputError(f"no verdict store in {run_dir}; {hint}", file=str(folder))
    try:
        meta = orjson.loads(meta_path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InputError(f"unreadable verdict store ({exc}); {hint}", file=str(meta_path)) from None
    if meta.get("format") != _FORMAT or meta.get("version") != STORE_VERSION:
        raise InputError(
            f"verdict store version {meta.get('version')!r} is not {STORE_VERSION}; {hint}", file=str(meta_path)
        )
    if meta.get("labels") != [str(x) for x in LABELS] or meta.get("statuses") != [str(x) for x in STATUSES]:
        raise InputError(f"verdict store was written with other label codes; {hint}", file=str(meta_path))
    arrays = {
        name: _load_column(folder, name, hint)
        for name in ("model", "category", "question", "status", "counts", "offsets", "labels")
    }
    n = int(meta["n_answers"])
    if arrays["model"].shape != (n,) or arrays["offsets"].shape != (n + 1,):
        raise InputError(f"verdict store columns disagree with meta.json; {hint}", file=str(folder))
    recall_columns = meta.get("recall_columns")
    if recall_columns is not None:
        if recall_columns != list(RECALL_METRICS) or meta.get("recall_fact_columns") != list(FACT_COLUMNS):
            raise InputError(f"verdict store was written with other recall columns; {hint}", file=str(meta_path))
        for name, width in (("recall", len(RECALL_METRICS)), ("recall_facts", len(FACT_COLUMNS))):
            arrays[name] = _load_column(folder, name, hint)
            if arrays[name].shape != (n, width):
                raise InputError(f"verdict store column {name} disagrees with meta.json; {hint}", file=str(folder))
    gamma = meta.get("gamma")
    k = meta.get("k")
    return Verdicts(
        **arrays,
        models=_read_table(folder / "models.json"),
        categories=_read_table(folder / "categories.json"),
        question_ids=_read_table(folder / "question_ids.json"),
        root=folder,
        gamma=None if gamma is None else float(gamma),
        k=None if k is None else int(k),
        roots=(folder.parent,),
        without_recall=() if recall_columns is not None else (folder.parent,),
    )


def _load_column(folder: Path, name: str, hint: str) -> Any:
    try:
        return np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"damaged verdict store column {name}: {exc}; {hint}", file=str(folder)) from None


def merge_verdicts(stores: Sequence[Verdicts]) -> Verdicts:
    """One store of several runs' (each of other models; ``source`` gives each answer's run),
    questions matched by id; a single store is returned unchanged.

    Raises:
        ConfigError: no store, or the same model in two runs.
    """
    if not stores:
        raise ConfigError("no run folder given")
    if len(stores) == 1:
        return stores[0]
    owner: dict[str, int] = {}
    for i, s in enumerate(stores):
        present = np.unique(np.asarray(s.model))
        for code in present.tolist():
            name = s.models[code]
            if name in owner:
                where = [str(x.roots[0]) if x.roots else f"#{j}" for j, x in enumerate(stores)]
                raise ConfigError(
                    f"model {name!r} is in two runs ({where[owner[name]]} and {where[i]}); pass only one of them"
                )
            owner[name] = i

    def recode(tables: list[list[str]]) -> tuple[list[str], list[npt.NDArray[np.int32]]]:
        merged: dict[str, int] = {}
        maps = [np.array([merged.setdefault(x, len(merged)) for x in t], dtype=np.int32) for t in tables]
        return list(merged), maps

    models, model_maps = recode([s.models for s in stores])
    categories, cat_maps = recode([s.categories for s in stores])
    questions, q_maps = recode([s.question_ids for s in stores])
    claim_base = np.cumsum([0] + [int(s.labels.shape[0]) for s in stores])
    offsets = [np.asarray(stores[0].offsets)[:1]] + [
        np.asarray(s.offsets)[1:] + claim_base[i] for i, s in enumerate(stores)
    ]
    gammas = {s.gamma for s in stores}
    ks = {s.k for s in stores}
    if len(gammas) > 1 or len(ks) > 1:
        logger.warning("runs were scored with different gamma/k %s/%s; the first run's are the defaults", gammas, ks)
    merged = Verdicts(
        model=np.concatenate([m[np.asarray(s.model)] for m, s in zip(model_maps, stores)]),
        category=np.concatenate([m[np.asarray(s.category)] for m, s in zip(cat_maps, stores)]),
        question=np.concatenate([m[np.asarray(s.question)] for m, s in zip(q_maps, stores)]),
        status=np.concatenate([np.asarray(s.status) for s in stores]),
        counts=np.concatenate([np.asarray(s.counts) for s in stores]),
        offsets=np.concatenate(offsets).astype(np.int64),
        labels=np.concatenate([np.asarray(s.labels) for s in stores]),
        models=models,
        categories=categories,
        question_ids=questions,
        gamma=stores[0].gamma,
        k=stores[0].k,
        source=np.concatenate([np.full(s.n_answers, i, dtype=np.int16) for i, s in enumerate(stores)]),
        roots=tuple(r for s in stores for r in s.roots[:1]),
        **_merge_recall(stores),
    )
    if all(s.root is not None or s._ids is not None for s in stores):
        merged._ids = [x for s in stores for x in s.ids]
    return merged


def _merge_recall(stores: Sequence[Verdicts]) -> dict[str, Any]:
    """The merged recall columns: null rows for the answers of runs without recall."""
    lacking = tuple(r for s in stores for r in _without_recall(s))
    if all(s.recall is None for s in stores):
        return {"without_recall": lacking}
    values = [np.full((s.n_answers, len(RECALL_METRICS)), np.nan) if s.recall is None else np.asarray(s.recall)
              for s in stores]
    facts = [np.full((s.n_answers, len(FACT_COLUMNS)), -1, np.int32) if s.recall_facts is None
             else np.asarray(s.recall_facts) for s in stores]
    return {
        "recall": np.concatenate(values).astype(np.float64),
        "recall_facts": np.concatenate(facts).astype(np.int32),
        "without_recall": lacking,
    }


def _without_recall(store: Verdicts) -> tuple[Path, ...]:
    if store.recall is not None:
        return store.without_recall
    return store.without_recall or store.roots[:1] or (Path("(in-memory store)"),)


def load_runs(run_dirs: Iterable[Path]) -> Verdicts:
    """Load and merge the stores of ``run_dirs`` (errors: :func:`load_verdicts`, :func:`merge_verdicts`)."""
    return merge_verdicts([load_verdicts(Path(d)) for d in run_dirs])


def rebuild(out_dir: Path, *, gamma: float | None = None, k: int | None = None) -> Path:
    """Write the store of run folder ``out_dir`` from its ``answers.jsonl`` and return its folder.

    ``gamma`` and ``k`` are recorded as the run's (None: from ``summary.json``).

    Raises:
        InputError: ``answers.jsonl`` is missing or has an undecodable line.
    """
    out_dir = Path(out_dir)
    path = out_dir / "answers.jsonl"
    if not path.is_file():
        raise InputError("no answers.jsonl to rebuild the verdict store from", file=str(path))
    summary = out_dir / "summary.json"
    if (gamma is None or k is None) and summary.is_file():
        config = orjson.loads(summary.read_bytes()).get("config", {})
        gamma = config.get("gamma") if gamma is None else gamma
        k = config.get("k") if k is None else k
    decoder = msgspec.json.Decoder(AnswerResult)
    writer = VerdictWriter(out_dir, gamma=gamma, k=k)
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                writer.add(decoder.decode(raw))
            except msgspec.DecodeError as exc:
                raise InputError(str(exc), file=str(path), line=line_no) from None
    return writer.close()
