"""The answers of a run's input, in compact columns: where each id was first read, and each
answer's resume key and input position.

A run keeps this for every answer of its input, so it holds no Python object per answer:
ids are found by their 64-bit hash in sorted numpy runs (16 bytes an answer); keys,
positions and where each was read are three machine-word columns (24 bytes an answer).
"""

from __future__ import annotations

from array import array

import numpy as np
import numpy.typing as npt

__all__ = ["InputIndex"]

#: Ids held in a dict before they are sorted into a numpy run.
RECENT_IDS = 1 << 15


class _IdRuns:
    """An exact map of 64-bit id hash -> int64: a dict of the latest ids, then sorted numpy runs,
    each at least 4 times the next (so a few runs hold any number of ids)."""

    def __init__(self) -> None:
        self._recent: dict[int, int] = {}
        self._runs: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []

    def get(self, id_hash: int) -> int | None:
        """The value stored for ``id_hash``, None when absent."""
        value = self._recent.get(id_hash)
        if value is not None:
            return value
        for hashes, values in self._runs:
            i = int(hashes.searchsorted(id_hash))
            if i < hashes.size and hashes[i] == id_hash:
                return int(values[i])
        return None

    def put(self, id_hash: int, value: int) -> None:
        """Store ``value`` for ``id_hash`` (absent)."""
        self._recent[id_hash] = value
        if len(self._recent) >= RECENT_IDS:
            self._spill()

    def _spill(self) -> None:
        """Sort the recent ids into a run, merged into the last runs while they are under 4 times its size."""
        n = len(self._recent)
        hashes = np.fromiter(self._recent.keys(), dtype=np.int64, count=n)
        values = np.fromiter(self._recent.values(), dtype=np.int64, count=n)
        self._recent.clear()
        while self._runs and self._runs[-1][0].size < 4 * hashes.size:
            last_hashes, last_values = self._runs.pop()
            hashes, values = (
                np.concatenate((last_hashes, hashes)),
                np.concatenate((last_values, values)),
            )
        order = np.argsort(hashes, kind="stable")
        self._runs.append((hashes[order], values[order]))


class InputIndex:
    """One entry per answer admitted from the run's input (a repeated id is not admitted).

    Filled by the reader thread, then read by the finalize thread (one thread at a time).

    Attributes:
        answers: answers admitted (the input's answers, resumed ones included).
    """

    def __init__(self) -> None:
        self._ids = _IdRuns()
        self._keys = array("Q")
        self._positions = array("q")
        self._first_at = array("q")
        self.answers = 0

    def __len__(self) -> int:
        """Answers admitted."""
        return self.answers

    def admit(
        self, position: int, id_hash: int, first_at: int, key: int
    ) -> tuple[int, bool] | None:
        """Record the answer read at input ``position`` unless its id was read before.

        Args:
            position: the answer's place among the answers read (increasing).
            id_hash: 64-bit hash of its id (a collision, about one in 4e9 answers, is taken for a
                repeated id).
            first_at: where it was read (int64, opaque to the index; given back for a repeat).
            key: its resume key (unsigned 64-bit, :func:`~dahl.results._log.line_key`).

        Returns:
            None when admitted; for an id read before, ``(first_at of that answer, whether it has
            the resume key `key`)``: the same id with the same content, or with other content.
        """
        entry = self._ids.get(id_hash)
        if entry is not None:
            return self._first_at[entry], self._keys[entry] == key
        self._ids.put(id_hash, self.answers)
        self._keys.append(key)
        self._positions.append(position)
        self._first_at.append(first_at)
        self.answers += 1
        return None

    def clear(self) -> None:
        """Forget every answer (its memory is released); :attr:`answers` is kept."""
        self._ids = _IdRuns()
        self._keys, self._positions, self._first_at = array("Q"), array("q"), array("q")

    def take_positions(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """The input position of the admitted answer with each resume key of ``keys``, -1 for none;
        the index then holds no answer (as after :meth:`clear`), its columns released as they are read.

        Memory: at most 16 bytes per admitted answer beyond its keys and positions, and 17 per key.
        """
        self._ids, self._first_at = _IdRuns(), array("q")  # not needed to match keys: released first
        if not self._keys:
            self.clear()
            return np.full(keys.size, -1, dtype=np.int64)
        mine = np.frombuffer(self._keys, dtype=np.uint64)
        order = np.argsort(mine)
        sorted_keys = mine[order]
        del mine
        self._keys = array("Q")
        sorted_positions = np.frombuffer(self._positions, dtype=np.int64)[order]
        self._positions = array("q")
        del order
        at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
        found = sorted_keys[at] == keys
        del sorted_keys
        out = np.full(keys.size, -1, dtype=np.int64)
        out[found] = sorted_positions[at[found]]
        return out
