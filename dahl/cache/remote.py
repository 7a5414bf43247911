"""Cache lookups in a child process: check keys and SQLite reads off the interpreter lock.

A re-score of cached claims is bound by the interpreter lock (GIL): per claim, its key
(~2 µs), the reader thread's decoding and the event loop's bookkeeping all take turns
on one core. :class:`ProcessReader` hands groups of answers to ONE child process that
builds their check keys from a :class:`~dahl.cache.keys.CheckKeyRecipe` and reads
their rows from the cache database (read only: the parent's writer thread stays the
only writer, under the parent's directory lock), one query per 500 keys. One I/O
thread of the parent sends a batch, waits for its reply (blocking pipe I/O, the lock
released) and decodes the rows' :class:`~dahl.cache.envelope.Stored` envelopes; the
event loop resolves each for the recipe's parser version and hands the verdicts out.

Only committed rows are seen: a claim put but not committed yet comes back as not
found; a row of another parser version comes back as its raw reply (re-parsed by the
caller). A child that fails or
cannot start is logged once and turns this path off for the rest of the run; lookups
then go through the reader thread.

The child runs :mod:`dahl.cache.lookup_process` (argument: the database), started and stopped as
:mod:`dahl.cache.children` says (no API key, its own session, it exits when its input
closes). Its side and the wire format are in :mod:`dahl.cache.lookup_child`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
from collections.abc import Sequence
from pathlib import Path

import msgspec

from dahl.cache import children
from dahl.cache.envelope import ENVELOPES_DECODER, Stored, entry_of
from dahl.cache.keys import CheckKeyRecipe
from dahl.cache.lookup_child import HELLO, Reply, Request, read_frame, write_frame
from dahl.records import Verdict

__all__ = ["Found", "ProcessReader"]

log = logging.getLogger(__name__)

#: Pending claims sent to the child at once, without waiting for the loop to go idle.
_BATCH_CLAIMS = 1024
#: Seconds to wait for the child's hello before giving up on this path.
_START_TIMEOUT_S = 60.0
#: Seconds of silence from the child, mid-batch, before giving up on this path (a batch
#: takes milliseconds; this only bounds the stall a wedged child causes).
_REPLY_TIMEOUT_S = 10.0


#: What the child found for one claim: its verdict (stored by the recipe's parser
#: version); the raw reply of a row of another version (str); nothing usable (None:
#: nothing committed, or a row without a verdict or raw reply; check the values put
#: and not committed yet).
Found = Verdict | str | None


def _resolve(envelope: Stored, parser_version: str) -> Found:
    """What a stored envelope gives a check lookup by ``parser_version`` (see :data:`Found`)."""
    if envelope.parser_version == parser_version:
        value = envelope.value
        return value if isinstance(value, Verdict) else None
    entry = entry_of(envelope, parser_version)
    return None if entry is None else entry.raw


# A group waiting for the child: (question, claim texts, its future).
_Group = tuple[str, Sequence[str], "asyncio.Future[tuple[list[str], list[Found]] | None]"]


class ProcessReader:
    """ONE child process that computes check keys and reads verdicts (see the module docstring).

    Use :meth:`look_up` from the event loop thread only; :meth:`close` from any thread.

    Args:
        db_path: the cache database file.
        directory: the cache directory (named in warnings).

    Attributes:
        batches: batches the child served.
        claims_found: claims the child found a parsed verdict for.

    Raises:
        OSError: (on construction) the child process cannot be created.
    """

    def __init__(self, db_path: Path, directory: Path) -> None:
        self._directory = directory
        self._proc = children.spawn("dahl.cache.lookup_process", str(db_path))
        # One thread does the blocking pipe I/O, in order: first the hello, then batches.
        self._io = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="dahl-cache-child")
        self._started = self._io.submit(self._await_hello)
        self._encoder = msgspec.msgpack.Encoder()
        self._reply_decoder = msgspec.msgpack.Decoder(Reply)
        self._off = False
        self._running = False
        self._pending: list[_Group] = []
        self._pending_claims = 0
        self._recipe: CheckKeyRecipe | None = None
        self._in_flight = 0
        self._scheduled = False
        self.batches = 0
        self.claims_found = 0

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._proc.pid

    @property
    def ready(self) -> bool:
        """Whether lookups go to the child now (started, not failed, not closed)."""
        if self._running:
            return not self._off
        if self._off or not self._started.done():
            return False
        exc = self._started.exception()
        if exc is not None:
            self._fail(exc)
            return False
        self._running = True  # known from now on: no lock taken per lookup
        return not self._off

    async def look_up(
        self, recipe: CheckKeyRecipe, question: str, texts: Sequence[str]
    ) -> tuple[list[str], list[Found]] | None:
        """Keys and stored verdicts of the claim ``texts`` of an answer to ``question``.

        Groups from concurrent callers share one round trip to the child.

        Args:
            recipe: the Checker's key recipe (a batch holds groups of one recipe).
            question: the answer's question, as given (normalized in the child).
            texts: the claims' texts, as given.

        Returns:
            One key per claim and what was found per claim (see :data:`Found`); None
            when this path is off (not :attr:`ready`, failed meanwhile, or closed).
        """
        if not self.ready:
            return None
        loop = asyncio.get_running_loop()
        if self._pending and recipe is not self._recipe and recipe != self._recipe:
            self._dispatch(loop)  # a batch holds one recipe
        future: asyncio.Future[tuple[list[str], list[Found]] | None] = loop.create_future()
        self._recipe = recipe
        self._pending.append((question, texts, future))
        self._pending_claims += len(texts)
        if self._pending_claims >= _BATCH_CLAIMS:
            self._dispatch(loop)  # full: send it now, the child works while we go on
        elif not self._scheduled:
            # Go once the tasks that are ready have run (they may add groups).
            self._scheduled = True
            loop.call_soon(self._dispatch_soon, loop)
        return await future

    def close(self) -> None:
        """Stop the child and the I/O thread (blocking, idempotent); pending lookups get None."""
        self._off = True
        cpu_s = children.cpu_seconds(self._proc.pid)
        with contextlib.suppress(OSError, ValueError):  # already closed
            if self._proc.stdin is not None:
                self._proc.stdin.close()  # the child exits at the end of its input
        children.stop(self._proc)
        self._io.shutdown(wait=True, cancel_futures=True)
        with contextlib.suppress(OSError, ValueError):  # already closed
            if self._proc.stdout is not None:
                self._proc.stdout.close()
        log.debug(
            "cache lookup process: %d batches, %d claims found, %s s of CPU",
            self.batches,
            self.claims_found,
            "?" if cpu_s is None else f"{cpu_s:.2f}",
        )

    # -- I/O thread ---------------------------------------------------------------------

    def _await_hello(self) -> None:
        try:
            children.await_hello(self._proc, HELLO, _START_TIMEOUT_S)
        except RuntimeError as exc:
            raise RuntimeError(f"the lookup process: {exc}") from None

    def _round_trip(self, recipe: CheckKeyRecipe, groups: list[tuple[str, list[str]]]) -> tuple[Reply, list[Found]]:
        """I/O thread: send one batch, wait for its reply, decode and resolve the found envelopes."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        request = Request(recipe.before, recipe.after, recipe.parts, recipe.parser_version, groups)
        write_frame(self._proc.stdin.fileno(), self._encoder.encode(request))
        frame = read_frame(self._proc.stdout.fileno(), _REPLY_TIMEOUT_S)
        if frame is None:
            raise RuntimeError(f"the lookup process ended (exit status {children.exit_status(self._proc)})")
        reply = self._reply_decoder.decode(frame)
        if reply.error:
            raise RuntimeError(f"the lookup process failed: {reply.error}")
        envelopes = (
            ENVELOPES_DECODER.decode(b"\xdd" + reply.found.to_bytes(4, "big") + reply.packed) if reply.found else []
        )
        version = recipe.parser_version
        # Inline for the common case (a verdict of this version); the rest goes through _resolve.
        return reply, [
            e.value if e.parser_version == version and type(e.value) is Verdict else _resolve(e, version)
            for e in envelopes
        ]

    # -- event loop -----------------------------------------------------------------------

    def _dispatch_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = False
        if self._pending and not self._in_flight:
            self._dispatch(loop)

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._pending = self._pending, []
        self._pending_claims = 0
        if self._off:
            self._answer_none(batch)
            return
        assert self._recipe is not None
        groups = [(question, list(texts)) for question, texts, _ in batch]
        self._in_flight += 1
        try:
            done = loop.run_in_executor(self._io, self._round_trip, self._recipe, groups)
        except RuntimeError as exc:  # the I/O thread is shut down
            self._in_flight -= 1
            self._fail(exc)
            self._answer_none(batch)
            return
        done.add_done_callback(functools.partial(self._deliver, batch, loop))

    def _deliver(
        self,
        batch: list[_Group],
        loop: asyncio.AbstractEventLoop,
        done: asyncio.Future[tuple[Reply, list[Found]]],
    ) -> None:
        """Resolve a batch's futures (on the event loop) with what the child found."""
        self._in_flight -= 1
        if self._pending and not self._scheduled:
            self._scheduled = True  # what gathered meanwhile goes next
            loop.call_soon(self._dispatch_soon, loop)
        if done.cancelled():
            self._answer_none(batch)
            return
        exc = done.exception()
        if exc is not None:  # the child died, failed, or sent something undecodable
            self._fail(exc)
            self._answer_none(batch)
            return
        reply, values = done.result()
        self.batches += 1
        keys, slots = reply.keys, reply.slots
        start = 0
        for _, texts, future in batch:
            end = start + len(texts)
            found: list[Found] = [values[s] if s >= 0 else None for s in slots[start:end]]
            self.claims_found += sum(isinstance(got, Verdict) for got in found)
            if not future.done():
                future.set_result((keys[start:end], found))
            start = end

    @staticmethod
    def _answer_none(batch: list[_Group]) -> None:
        for _, _, future in batch:
            if not future.done():
                future.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if self._off:
            return
        self._off = True
        log.warning(
            "cache lookup process for %s stopped (%s: %s); looking claims up in this process",
            self._directory,
            type(exc).__name__,
            exc,
        )


