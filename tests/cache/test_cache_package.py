"""The public surface of dahl.cache: sorted, complete and importable."""

from __future__ import annotations

import dahl.cache


class TestCachePackage:
    def test_all_sorted_and_present(self) -> None:
        """__all__ is sorted, unique, and every name exists."""
        names = list(dahl.cache.__all__)
        assert names == sorted(set(names))
        assert [n for n in names if not hasattr(dahl.cache, n)] == []

    def test_every_public_name_exported(self) -> None:
        """Every public class or function imported into dahl.cache is listed in __all__."""
        public = {
            name
            for name, value in vars(dahl.cache).items()
            if not name.startswith("_") and getattr(value, "__module__", "").startswith("dahl")
        }
        assert public - set(dahl.cache.__all__) == set()
