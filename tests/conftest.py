"""Shared test fixtures: where the real, human-labelled data sets live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Return ../shared/data beside the repository, or $DAHL_SHARED_DATA when set."""
    env = os.environ.get("DAHL_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """Path of the shared data folder; skips the test when it is absent."""
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set DAHL_SHARED_DATA)")
    return path


def require_data(relative: str) -> Path:
    """Return shared_data_dir()/relative, skipping the calling test when the file is absent."""
    path = shared_data_dir() / relative
    if not path.exists():
        pytest.skip(f"data file {path} not found (set DAHL_SHARED_DATA to the shared data folder)")
    return path


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty verdict cache, never the user's real one."""
    path = tmp_path_factory.mktemp("dahl-cache")
    monkeypatch.setenv("DAHL_CACHE_DIR", str(path))
    return path
