"""dahl.results._index.InputIndex: repeated ids found in every run of hashes, keys looked up by position."""

from __future__ import annotations

import numpy as np
import pytest

from dahl.results import _index
from dahl.results._index import InputIndex


class TestInputIndex:
    def test_a_repeated_id_is_found_in_the_recent_ids_and_in_every_sorted_run(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With 4 recent ids, 50 ids make sorted runs of 44 and 4 ids and 2 recent ones: a repeat of
        each gives back where its first was read and whether its key is the first's, and is not admitted."""
        monkeypatch.setattr(_index, "RECENT_IDS", 4)
        index = InputIndex()
        for i in range(50):
            assert (
                index.admit(
                    position=i + 1,
                    id_hash=1000 - 7 * i,
                    first_at=100 + i,
                    key=2**64 - 1 - i,
                )
                is None
            )
        assert [run[0].size for run in index._ids._runs] == [44, 4] and len(
            index._ids._recent
        ) == 2
        assert index.admit(51, 1000, 0, 2**64 - 1) == (
            100,
            True,
        )  # the first id, same key
        assert index.admit(52, 1000 - 7 * 30, 0, 5) == (
            130,
            False,
        )  # in the run of 44, other content
        assert index.admit(52, 1000 - 7 * 45, 0, 2**64 - 46) == (
            145,
            True,
        )  # in the run of 4
        assert index.admit(53, 1000 - 7 * 49, 0, 2**64 - 50) == (
            149,
            True,
        )  # still recent
        assert len(index) == 50

    def test_positions_of_keys_known_and_unknown(self) -> None:
        """Keys of admitted answers give their positions (gaps kept), others -1, any order, repeats
        too; then the index holds no answer and keeps its count."""
        index = InputIndex()
        for position, key in [(1, 30), (3, 10), (4, 2**64 - 1), (9, 20)]:
            assert index.admit(position, position, 0, key) is None
        keys = np.array([20, 5, 2**64 - 1, 30, 10, 20, 40], dtype=np.uint64)
        assert index.take_positions(keys).tolist() == [9, -1, 4, 1, 3, 9, -1]
        assert index.take_positions(keys).tolist() == [-1] * 7
        assert len(index) == 4

    def test_an_empty_index_knows_no_key(self) -> None:
        """No answer admitted: every key is unknown."""
        assert InputIndex().take_positions(
            np.array([0, 7], dtype=np.uint64)
        ).tolist() == [-1, -1]
