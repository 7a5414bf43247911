"""Reading a document corpus and keeping its BM25 index between runs.

A corpus is a JSON Lines file, one ``{"id", "title"?, "text", "url"?}`` document per line, or a
folder of ``.txt``/``.md`` files (recursive, hidden names skipped; ``id`` = the relative path,
``title`` = the first Markdown heading, else the stem). A saved index lives in
``index_dir/<fingerprint>-a<ANALYZER_VERSION>/``, written to a temporary folder then renamed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import bm25s  # type: ignore[import-untyped]
import msgspec

from dahl.adapters._corpus import ANALYZER_VERSION, Corpus, Passage, check_window, cut_passages
from dahl.errors import ConfigError, InputError
from dahl.formats._jsonpath import decode_json

__all__ = ["Document", "open_corpus", "read_documents"]

logger = logging.getLogger(__name__)

_SUFFIXES = (".md", ".txt")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_SAVED = "passages.msgpack"


class Document(msgspec.Struct, frozen=True):
    """One corpus document: ``id`` (JSONL ``id``; a folder's relative file path), ``text``, and
    ``title`` and ``url`` or None."""

    id: str | int
    text: str
    title: str | None = None
    url: str | None = None


class _Saved(msgspec.Struct, frozen=True, array_like=True):
    """What a saved index keeps beside ``bm25s``'s own files."""

    passages: tuple[Passage, ...]
    df: dict[str, int]
    n_documents: int
    indexed: bool


def read_documents(path: str | Path) -> tuple[list[Document], bytes]:
    """Read every document of a corpus file or folder, and the bytes its fingerprint hashes.

    Returns:
        ``(documents, content)``: documents in file order (JSONL) or sorted by path (folder);
        ``content`` = the file's bytes, or the msgpack of ``[[relative path, file bytes], ...]``.

    Raises:
        ConfigError: the path does not exist or cannot be read.
        InputError: a bad JSONL line (file, line and field named), or a file of a folder
            that is not UTF-8 (file named).
    """
    p = Path(path)
    if p.is_dir():
        return _read_folder(p)
    data = _read_bytes(p)
    return _parse_jsonl(p, data), data


def open_corpus(
    path: str | Path, *, window: int = 3, stride: int = 2, index_dir: str | Path | None = None
) -> Corpus:
    """Read a corpus and index it, or load the index saved by an earlier run.

    Args:
        path: a JSONL file or a folder of .txt/.md files.
        window, stride: sentences per passage (>= 1), and between passage starts (1 <= stride
            <= window).
        index_dir: folder holding saved indexes, one subfolder per corpus fingerprint (created
            when missing); None = index in memory, save nothing.

    Returns:
        The corpus (``built`` False when its index was loaded), fingerprinted by blake2b-128 of
        the content bytes and the window settings.

    Raises:
        ConfigError: the path does not exist or cannot be read, or holds no document; bad
            window/stride.
        InputError: a malformed document (file, line and field named).
    """
    check_window(window, stride)
    p = Path(path)
    if p.is_dir():
        documents, content = _read_folder(p)
    else:
        content = _read_bytes(p)
        documents = None  # parsed only when no saved index is found
    digest = hashlib.blake2b(content, digest_size=16)
    digest.update(f"w{window}s{stride}".encode())
    fingerprint = digest.hexdigest()
    folder = Path(index_dir) / f"{fingerprint}-a{ANALYZER_VERSION}" if index_dir is not None else None
    if folder is not None:
        saved = _load(folder, fingerprint)
        if saved is not None:
            logger.info("loaded the index of %d passages of %s from %s", len(saved), p, folder)
            return saved
    if documents is None:
        documents = _parse_jsonl(p, content)
    passages: list[Passage] = []
    for doc in documents:  # ids are distinct: _parse_jsonl refuses a repeated one, a folder's are paths
        passages.extend(cut_passages(str(doc.id), doc.title or "", doc.text, window, stride, doc.url))
    if not documents:  # a wrong path, not evidence: every claim would be judged without a passage
        raise ConfigError(f"the corpus {p} has no documents (a JSONL file of {{id, text}} lines, or a folder "
                          "of .txt/.md files)")
    corpus = Corpus(passages, content_hash=fingerprint, n_documents=len(documents))
    if folder is not None:
        _save(corpus, folder)
    return corpus


def _read_bytes(p: Path) -> bytes:
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"corpus file not found: {p}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read corpus file {p}: {exc}") from exc


def _parse_jsonl(p: Path, data: bytes) -> list[Document]:
    decoder = msgspec.json.Decoder(Document)
    documents: list[Document] = []
    lines: dict[str, int] = {}  # document id -> its first line
    # A UTF-8 byte-order mark (an editor's) is skipped, as the answers readers do.
    for number, line in enumerate(data.removeprefix(b"\xef\xbb\xbf").splitlines(), start=1):
        if not line.strip():
            continue
        document = decode_json(decoder, line, file=str(p), line=number)
        first = lines.setdefault(str(document.id), number)
        if first != number:
            raise InputError(f"duplicate document id {str(document.id)!r} (first on line {first})", file=str(p),
                             line=number, field="id")
        documents.append(document)
    return documents


def _read_folder(root: Path) -> tuple[list[Document], bytes]:
    files = sorted(
        (f for f in root.rglob("*") if f.suffix.lower() in _SUFFIXES and f.is_file()),
        key=lambda f: f.relative_to(root).as_posix(),
    )
    documents: list[Document] = []
    content: list[tuple[str, bytes]] = []
    for f in files:
        rel = f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        data = _read_bytes(f)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text: {exc}", file=str(f)) from None
        heading = _HEADING.search(text)
        documents.append(Document(id=rel, text=text, title=heading.group(1) if heading else f.stem))
        content.append((rel, data))
    if not documents:
        logger.warning("corpus folder %s holds no .txt or .md file", root)
    return documents, msgspec.msgpack.encode(content)


def _load(folder: Path, fingerprint: str) -> Corpus | None:
    """The corpus saved in ``folder``, or None (absent, or unreadable: logged)."""
    meta = folder / _SAVED
    if not meta.is_file():
        return None
    try:
        saved = msgspec.msgpack.decode(meta.read_bytes(), type=_Saved)
        bm25: Any = bm25s.BM25.load(str(folder), show_progress=False) if saved.indexed else None
    except (OSError, ValueError, KeyError, msgspec.DecodeError) as exc:
        logger.warning("saved index %s cannot be read (%s); indexing again", folder, exc)
        return None
    return Corpus(saved.passages, content_hash=fingerprint, n_documents=saved.n_documents, index=(bm25, saved.df))


def _save(corpus: Corpus, folder: Path) -> None:
    """Save ``corpus``'s passages and index to ``folder`` (atomically); a failure is logged only."""
    bm25, df = corpus.index_state
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    except OSError as exc:
        logger.warning("cannot save the corpus index under %s: %s", folder.parent, exc)
        return
    try:
        if bm25 is not None:
            bm25.save(str(tmp), show_progress=False)
        saved = _Saved(corpus.passages, df, corpus.n_documents, bm25 is not None)
        (tmp / _SAVED).write_bytes(msgspec.msgpack.encode(saved))
        os.rename(tmp, folder)
    except OSError as exc:  # another run saved it first (folder exists), or the disk is full
        if not (folder / _SAVED).is_file():
            logger.warning("cannot save the corpus index to %s: %s", folder, exc)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    logger.info("saved the index of %d passages to %s", len(corpus), folder)
