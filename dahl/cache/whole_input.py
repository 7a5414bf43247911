"""Reading a large re-score's input in a child process that finds unchanged answers whole.

A re-score of answers stored whole (:mod:`dahl.cache.answers`) is bound by the
interpreter lock (GIL): per answer, parsing its record (~10 µs), hashing it, its key,
decoding its entry and building its line (~40 µs in all) take turns on one core with
the event loop, which also runs the HTTP calls of the changed answers.
:class:`WholeInputProcess` moves that work to ONE child process: it reads the input
files with the same reader, computes each answer's input hash, resume key and
whole-answer key, reads the entries from the cache database (read only, one query per
500 keys) and sends, in file order, each answer's finished ``answers.jsonl`` line
(a hit), its JSON (a miss, scored as usual) or its input error. The parent
keeps what it always does: duplicate and resume checks, the output file, the counters.

Only answers whose whole-answer key is the key material and the input hash alone are
read this way (a Splitter that is not cached; see
:meth:`~dahl.cache.answers.AnswerCache.key_material`). A child that cannot start, or
stops, is logged once; the parent reads the rest of the input itself, from where the
child's records end.

The child runs :mod:`dahl.cache.whole_input_process`, started and stopped as
:mod:`dahl.cache.children` says (no API key, its own session, it exits when the parent
closes its pipes). Its side and the wire format are in :mod:`dahl.cache.whole_input_child`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import msgspec

from dahl.cache import children
from dahl.cache.lookup_child import read_frame, write_frame
from dahl.cache.whole_input_child import FRAME_DECODER, HELLO, Bad, Batch, End, Hit, Miss, Start

__all__ = ["WholeInputFailed", "WholeInputProcess"]

log = logging.getLogger(__name__)

#: Seconds to wait for the child's hello, and then for each frame, before giving up on it.
_START_TIMEOUT_S = 60.0
_FRAME_TIMEOUT_S = 60.0
#: Pipe capacity asked for, bytes (Linux's default limit for an unprivileged process).
_PIPE_BYTES = 1 << 20


class WholeInputFailed(RuntimeError):
    """The child stopped before the end of the input; the records it sent are valid."""


class WholeInputProcess:
    """ONE child process reading the input and finding answers whole (see the module docstring).

    Started early (the child imports dahl while the run sets up), told what to read
    with :meth:`begin`, then read with :meth:`records` from one thread; :meth:`close`
    from any.

    Attributes:
        records_read: input records the child sent so far.
        found_whole: answers among them it found whole.

    Raises:
        OSError: (on construction) the child process cannot be created.
    """

    def __init__(self) -> None:
        self._proc = children.spawn("dahl.cache.whole_input_process")
        assert self._proc.stdout is not None
        with contextlib.suppress(ImportError, AttributeError, OSError):  # Linux: a whole frame fits, so the child works on
            import fcntl  # POSIX only: imported here so that dahl imports on Windows

            fcntl.fcntl(self._proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        self._began: WholeInputFailed | None = None
        self._closed = False
        self.records_read = 0
        self.found_whole = 0

    def begin(self, start: Start) -> None:
        """Tell the child what to read; it starts at once (its frames wait in the pipe).

        A child that died meanwhile, or a ``start`` that cannot be sent (a path that is
        not valid UTF-8), is reported by :meth:`records`.
        """
        assert self._proc.stdin is not None
        try:
            frame = msgspec.msgpack.encode(start)
        except (ValueError, msgspec.EncodeError) as exc:  # UnicodeEncodeError: a surrogate-escaped path
            self._began = WholeInputFailed(f"cannot send what to read ({type(exc).__name__}: {exc})")
            return
        try:
            write_frame(self._proc.stdin.fileno(), frame)
        except OSError as exc:  # the child is gone: say so when records are asked for
            self._began = WholeInputFailed(
                f"it did not start ({type(exc).__name__}; exit status {children.exit_status(self._proc)})"
            )

    def records(self) -> Iterator[Hit | Miss | Bad]:
        """Every record of the input, in file order (blocking).

        Raises:
            WholeInputFailed: the child did not start, failed, ended early, fell silent
                for a minute, or sent something undecodable.
        """
        assert self._proc.stdout is not None
        try:
            if self._began is not None:
                raise self._began
            try:
                children.await_hello(self._proc, HELLO, _START_TIMEOUT_S)
            except RuntimeError as exc:  # it did not start, or runs other code
                raise WholeInputFailed(str(exc)) from None
            while True:
                frame = read_frame(self._proc.stdout.fileno(), _FRAME_TIMEOUT_S)
                if frame is None:
                    raise WholeInputFailed(f"it ended (exit status {children.exit_status(self._proc)})")
                message = FRAME_DECODER.decode(frame)
                if isinstance(message, Batch):
                    self.records_read += len(message.records)
                    self.found_whole += sum(isinstance(r, Hit) for r in message.records)
                    yield from message.records
                elif isinstance(message, End):
                    return
                else:
                    raise WholeInputFailed(message.error)
        except (OSError, TimeoutError, ValueError, msgspec.DecodeError) as exc:
            raise WholeInputFailed(f"{type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """Stop the child (blocking, idempotent)."""
        if self._closed:
            return
        self._closed = True
        cpu_s = children.cpu_seconds(self._proc.pid)
        for pipe in (self._proc.stdin, self._proc.stdout):  # a child blocked on either gets EOF or EPIPE
            with contextlib.suppress(OSError, ValueError):
                if pipe is not None:
                    pipe.close()
        children.stop(self._proc)
        log.debug(
            "whole-answer input process: %d records read, %d answers found whole, %s s of CPU",
            self.records_read,
            self.found_whole,
            "?" if cpu_s is None else f"{cpu_s:.2f}",
        )

