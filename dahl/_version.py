"""dahl's version, read once from the installed package metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__: str = version("dahl")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
