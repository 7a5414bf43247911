"""The public surface: ``dahl.__all__`` is sorted, complete and importable."""

from __future__ import annotations

import dahl


class TestPublicAPI:
    def test_all_is_sorted_and_unique(self) -> None:
        """__all__ is sorted (case-sensitive) with no duplicates."""
        assert list(dahl.__all__) == sorted(set(dahl.__all__))

    def test_every_exported_name_exists(self) -> None:
        """Each name in __all__ is an attribute of the package."""
        missing = [name for name in dahl.__all__ if not hasattr(dahl, name)]
        assert missing == []

    def test_every_public_attribute_is_exported(self) -> None:
        """Every public class or function defined in dahl's namespace is listed in __all__."""
        public = {
            name
            for name, value in vars(dahl).items()
            if not name.startswith("_") and getattr(value, "__module__", "").startswith("dahl")
        }
        assert public - set(dahl.__all__) == set()
