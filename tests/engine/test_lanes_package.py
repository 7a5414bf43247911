"""dahl.lanes' face: a sorted, complete __all__, and no submodule that imports the package back."""

from __future__ import annotations

import ast
from pathlib import Path

import dahl.lanes

PACKAGE = Path(dahl.lanes.__file__).parent


class TestFace:
    def test_all_is_sorted_and_every_name_resolves(self) -> None:
        """__all__ is sorted and each name in it is an attribute of the package."""
        names = dahl.lanes.__all__
        assert names == sorted(names)
        assert [name for name in names if not hasattr(dahl.lanes, name)] == []

    def test_names_other_modules_import_are_on_the_face(self) -> None:
        """What the rest of dahl imports from the lanes' modules is re-exported."""
        used = {"BreakerSettings", "Lane", "LaneLimits", "LanePool", "LaneStatistics", "RetryPolicy", "Spend",
                "classify", "parse_duration_s"}
        assert used <= set(dahl.lanes.__all__)

    def test_every_public_name_of_a_submodule_is_on_the_face(self) -> None:
        """Each submodule's __all__ is re-exported, except what the face leaves to dahl.config."""
        missing = []
        for path in sorted(PACKAGE.glob("_*.py")):
            if path.name == "__init__.py":
                continue
            module = getattr(dahl.lanes, path.stem, None)
            assert module is not None, path.name
            missing += [f"{path.stem}.{name}" for name in module.__all__
                        if name not in dahl.lanes.__all__ and name not in {"normalize_base_url", "endpoint_name"}]
        assert missing == []

    def test_no_submodule_imports_the_package(self) -> None:
        """Submodules import their siblings by full name, never `dahl.lanes` itself (an import cycle)."""
        offenders = []
        for path in sorted(PACKAGE.glob("_*.py")):
            if path.name == "__init__.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [node.module] if isinstance(node, ast.ImportFrom) else (
                    [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
                if "dahl.lanes" in names:
                    offenders.append(path.name)
        assert offenders == []
