"""BATCHDIR/ledger.jsonl: the append-only record of a batch folder (every line fsynced)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from dahl.errors import ConfigError, InputError
from dahl.formats._appendlog import LineAppender

__all__ = ["LEDGER_NAME", "Ledger", "Shard"]

log = logging.getLogger(__name__)

LEDGER_NAME = "ledger.jsonl"

#: The events a ledger holds.
_EVENTS = frozenset(("wave", "submitting", "uploaded", "submitted", "collected", "canceled"))


@dataclass
class Shard:
    """One batch input file and what happened to it, as the ledger tells.

    Attributes:
        path: relative to BATCHDIR.
        stage: ``"split"``, ``"check"`` or ``"cover"``.
        provider: ``openai``, ``anthropic`` or ``file``.
        requests: lines in the file.
        wave: the wave event that wrote it.
        submitting: the ``submitting`` event (its key and time), once dahl set out to submit it.
        file_id: the uploaded file's id (OpenAI), once uploaded.
        batch_id: the batch's id, once submitted.
        collected: the ``collected`` event, once collected.
        resubmitted: the kinds (``failed``, ``expired``) ``resubmit`` wrote a shard of.
        canceled: True once canceled.
    """

    path: str
    stage: str
    provider: str
    requests: int
    wave: dict[str, Any]
    submitting: dict[str, Any] | None = None
    file_id: str | None = None
    batch_id: str | None = None
    collected: dict[str, Any] | None = None
    resubmitted: set[str] = field(default_factory=set)
    canceled: bool = False


@dataclass
class Ledger:
    """The ledger of ``folder`` (blocking methods: call them in a worker thread or outside a loop).

    Every file id and batch id is appended before the command moves on. Events, one JSON object a line:
    ``wave`` (provider, cache folder, stage settings, ``shards``: ``[{path, stage, requests}]``
    relative to BATCHDIR, ``resubmit_of``: path or null); ``submitting`` ``{shard, key, at}`` (before
    the first provider call of a shard: the key that marks its upload and batch at the provider, unix
    seconds; see :class:`~dahl.batch._providers.ShardTag`); ``uploaded`` ``{shard, file_id}``;
    ``submitted`` ``{shard, batch_id}``; ``collected`` ``{shard, batch_id, results, succeeded,
    errors: {class: n}, expired, prompt_tokens, completion_tokens, cached_tokens,
    cache_write_tokens}`` (``results``: the saved result file; the last two absent in a ledger
    written before they were recorded: 0); ``canceled`` ``{shard, batch_id}``.

    Attributes:
        folder: BATCHDIR.
        shards: every shard by path, in the order written.
        waves: every ``wave`` event, in order.
        torn: the number of a last line cut short (a kill mid-write; ignored), else None.
    """

    folder: Path
    shards: dict[str, Shard] = field(default_factory=dict)
    waves: list[dict[str, Any]] = field(default_factory=list)
    torn: int | None = None

    @classmethod
    def read(cls, folder: Path) -> Ledger:
        """Read ``folder/ledger.jsonl`` (absent: an empty ledger).

        A torn last line (no newline: a kill mid-write) is an event that never happened: it is
        ignored with a warning naming its line; an unknown event, or one of a shard no wave
        wrote, is ignored with a warning too.

        Raises:
            InputError: a whole line is not a JSON object (file and line named).
        """
        ledger = cls(folder)
        path = folder / LEDGER_NAME
        if not path.exists():
            return ledger
        data = path.read_bytes()
        lines = data.split(b"\n")
        if not data.endswith(b"\n"):
            lines = lines[:-1]
            ledger.torn = len(lines) + 1
            log.warning("%s line %d is truncated (a write cut short): ignored", path, ledger.torn)
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"not JSON: {exc}", file=str(path), line=number) from None
            if not isinstance(event, dict) or "event" not in event:
                raise InputError("not a ledger event", file=str(path), line=number, field="event")
            if not ledger._apply(event):
                log.warning("%s line %d: %s event %r ignored", path, number,
                            "unknown" if event["event"] not in _EVENTS else "no wave wrote the shard of this",
                            event["event"])
        return ledger

    @classmethod
    def read_prepared(cls, folder: Path) -> Ledger:
        """:meth:`read`, for a command that needs prepared batches.

        Raises:
            ConfigError: ``folder`` does not exist, or its ledger holds no wave (a torn one named).
            InputError: as :meth:`read`.
        """
        if not folder.is_dir():
            raise ConfigError(f"batch folder {folder} does not exist (run `dahl batch prepare -o {folder}` first)")
        ledger = cls.read(folder)
        if not ledger.waves:
            torn = f": {folder / LEDGER_NAME} line {ledger.torn} is truncated" if ledger.torn else ""
            raise ConfigError(f"{folder} has no prepared batches{torn} (run `dahl batch prepare` first)")
        return ledger

    def _apply(self, event: dict[str, Any]) -> bool:
        """Apply ``event``; False when it is unknown or of a shard no wave wrote (nothing applied)."""
        kind = event["event"]
        if kind == "wave":
            self.waves.append(event)
            for shard in event["shards"]:
                self.shards[shard["path"]] = Shard(shard["path"], shard["stage"], event["provider"],
                                                   shard["requests"], event)
            if event.get("resubmit_of") in self.shards:
                self.shards[event["resubmit_of"]].resubmitted.add(str(event.get("only")))
            return True
        shard = self.shards.get(event.get("shard", ""))
        if shard is None or kind not in _EVENTS:
            return False
        if kind == "submitting":
            shard.submitting = shard.submitting or event
        elif kind == "uploaded":
            shard.file_id = event["file_id"]
        elif kind == "submitted":
            shard.batch_id = event["batch_id"]
        elif kind == "collected":
            shard.collected = event
        elif kind == "canceled":
            shard.canceled = True
        return True

    def append(self, event: dict[str, Any]) -> None:
        """Append ``event`` (flushed and fsynced before this returns) and apply it.

        Raises:
            OutputWriteError: the ledger cannot be written.
        """
        appender = LineAppender(self.folder / LEDGER_NAME, trim_torn=True)
        try:
            appender.append(orjson.dumps(event))
        finally:
            appender.close()
        self._apply(event)

    @property
    def next_wave(self) -> int:
        """The number of the next wave (1 for an empty ledger)."""
        return len(self.waves) + 1
