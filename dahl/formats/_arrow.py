"""Columnar inputs through pyarrow: Parquet files and Hugging Face ``datasets``.

``parquet`` is read with ``ParquetFile.iter_batches``; ``hf`` is a ``save_to_disk`` folder (a
Dataset or every split of a DatasetDict) or a hub name already in the local cache, opened offline.
Rows stream in batches of :data:`BATCH_ROWS` as dict rows (:mod:`dahl.formats._rows`); a row's
1-based position is its line. Needs ``dahl[arrow]`` (hub names ``dahl[hf]``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from dahl.errors import ConfigError, InputError
from dahl.formats._needs import Needs
from dahl.formats._rows import RowOptions, stream_rows
from dahl.formats._stream import AnswerStream

__all__ = ["BATCH_ROWS", "hf_tables", "is_saved_dataset", "read_hf", "read_parquet"]

#: Rows decoded to Python per batch.
BATCH_ROWS = 1024


def _pyarrow(path: str | Path, extra: str = "arrow") -> Any:
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError as exc:
        raise ConfigError(
            f"reading {path} needs pyarrow, which is not installed; pip install 'dahl[{extra}]'"
        ) from exc
    return pyarrow


def _rows(batches: Iterable[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Number the rows of record batches from 1, decoding one batch at a time."""
    line = 0
    for batch in batches:
        for start in range(0, batch.num_rows, BATCH_ROWS):  # save_to_disk batches can be large
            for row in batch.slice(start, BATCH_ROWS).to_pylist():
                line += 1
                yield line, row


def read_parquet(
    path: Path,
    *,
    options: RowOptions = RowOptions(),
    on_error: Callable[[InputError], None] | None = None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream the Answers of a Parquet file, :data:`BATCH_ROWS` rows at a time (arguments as :func:`read_hf`).

    Raises:
        ConfigError: pyarrow missing, or the file is not Parquet.
        InputError: a bad row, when ``on_error`` is None.
    """
    pa = _pyarrow(path)
    try:
        parquet = pa.parquet.ParquetFile(str(path))
    except (pa.ArrowException, OSError) as exc:
        raise ConfigError(f"cannot read {path} as Parquet: {exc}") from exc
    return stream_rows(_rows(parquet.iter_batches(batch_size=BATCH_ROWS)), options, file=str(path), on_error=on_error,
                       needs=needs)


def is_saved_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder written by ``datasets``' ``save_to_disk`` (a Dataset or a DatasetDict)."""
    return path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file())


def _saved_files(folder: Path) -> list[Path]:
    """The Arrow stream files of a ``save_to_disk`` folder, in split then shard order.

    Raises:
        ConfigError: neither ``state.json`` nor ``dataset_dict.json``, or unreadable.
    """
    try:
        if (folder / "dataset_dict.json").is_file():
            splits = json.loads((folder / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
            return [file for split in splits for file in _saved_files(folder / split)]
        if (folder / "state.json").is_file():
            state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
            return [folder / entry["filename"] for entry in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the datasets folder {folder}: {exc}") from exc
    raise ConfigError(
        f"{folder} is not a folder saved by datasets' save_to_disk "
        "(no state.json or dataset_dict.json)"
    )


def _stream_batches(files: list[Path]) -> Iterator[Any]:
    pa = _pyarrow(files[0] if files else "")
    for file in files:
        with pa.memory_map(str(file)) as source:
            yield from pa.ipc.open_stream(source)


def hf_tables(name: str) -> list[Any]:
    """The Arrow tables (memory-mapped, one per split) of a hub dataset in the local cache.

    ``name`` is ``owner/name[:config]``. ``datasets`` is switched offline for the rest of the process.

    Raises:
        ConfigError: datasets missing, or the dataset is not in the local cache.
    """
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    _pyarrow(name, "hf")
    try:
        import datasets
    except ImportError as exc:
        raise ConfigError(
            f"reading the hub dataset {name} needs datasets, which is not installed; "
            "pip install 'dahl[hf]'"
        ) from exc
    import huggingface_hub.constants

    # both libraries read the switch at import time; set it where they look now
    datasets.config.HF_HUB_OFFLINE = True
    datasets.config.HF_DATASETS_OFFLINE = True
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    repo, _, config = name.partition(":")
    try:
        loaded = datasets.load_dataset(repo, config or None)
    except Exception as exc:  # datasets raises many types for "not cached"; none is public
        raise ConfigError(
            f"{name} is not a file, a save_to_disk folder or a dataset in the local datasets "
            f"cache (dahl reads offline, it never downloads): {exc}"
        ) from exc
    splits = loaded.values() if isinstance(loaded, dict) else [loaded]
    return [split.data.table for split in splits]


def read_hf(
    source: str | Path,
    *,
    options: RowOptions = RowOptions(),
    on_error: Callable[[InputError], None] | None = None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream the Answers of a ``save_to_disk`` folder or a locally cached hub dataset.

    Args:
        source: the folder, or a hub name (``owner/name[:config]``) when no such path exists.
        options: field mapping and response columns.
        on_error, needs: as in :func:`dahl.formats.read_answers`.

    Returns:
        The answers, each numbered by its 1-based row across the splits.

    Raises:
        ConfigError: pyarrow (or datasets) missing, not a saved folder, or not cached.
        InputError: a bad row, when ``on_error`` is None.
    """
    folder = Path(source)
    if folder.is_dir():
        files = _saved_files(folder)
        _pyarrow(folder)
        batches: Iterable[Any] = _stream_batches(files)
    else:
        tables = hf_tables(str(source))
        batches = (batch for table in tables for batch in table.to_batches(max_chunksize=BATCH_ROWS))
    return stream_rows(_rows(batches), options, file=str(source), on_error=on_error, needs=needs)
