"""``dahl cache stats`` and ``dahl cache clear``: look into or empty the verdict cache."""

from __future__ import annotations

from pathlib import Path

import click

from dahl.cache import CacheStore, default_cache_dir
from dahl.cache._table import DB_NAME
from dahl.cli._console import exit_stopped, out
from dahl.cli._options import CACHE_DIR
from dahl.errors import DahlError

__all__ = ["cache"]


@click.group()
def cache() -> None:
    """Inspect or empty the verdict cache."""


@cache.command("stats")
@CACHE_DIR
def cache_stats(cache_dir: Path | None) -> None:
    """Print the cache folder, its entries and size."""
    directory = cache_dir or default_cache_dir()
    if not (directory / DB_NAME).exists():  # nothing cached there: do not create a cache to report on
        out.print(f"directory: {directory}")
        out.print("entries: 0 (no cache there yet)")
        return
    try:
        with CacheStore(directory) as store:
            stats = store.stats()
    except DahlError as exc:
        exit_stopped(exc, "")
    out.print(f"directory: {stats['directory']}")
    out.print(f"entries: {stats['entries']}")
    out.print(f"size: {stats['size_bytes'] / 2**20:.1f} MiB")


@cache.command("clear")
@CACHE_DIR
@click.confirmation_option(prompt="Remove every cached split and verdict?")
def cache_clear(cache_dir: Path | None) -> None:
    """Remove every cached split and verdict."""
    directory = cache_dir or default_cache_dir()
    if not (directory / DB_NAME).exists():
        out.print(f"removed 0 entries (no cache in {directory})")
        return
    try:
        with CacheStore(directory) as store:
            removed = store.clear()
    except DahlError as exc:
        exit_stopped(exc, "")
    out.print(f"removed {removed} entries")
