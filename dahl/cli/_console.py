"""The consoles every command prints to (``console``: stderr; ``out``: stdout, 160 columns and
unwrapped off a terminal), and how a command that stopped early exits."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import anyio
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from dahl.errors import (
    CostCapReached,
    DahlError,
    FatalAPIError,
    OutputWriteError,
    QuotaExhausted,
)
from dahl.exit_status import ExitStatus
from dahl.pricing import Price, load_price_overrides, parse_price_option

__all__ = ["EXIT_INTERRUPTED", "EXIT_QUOTA", "EXIT_USAGE", "console", "exit_finished", "exit_stopped", "out", "price_overrides",
           "run_stoppable", "setup_logging", "stop_status"]

class _Console(Console):
    """A rich Console whose reader going away (``| head -1``) ends the command with status 0."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(ExitStatus.OK)


console = _Console(stderr=True, width=None if sys.stderr.isatty() else 160, soft_wrap=not sys.stderr.isatty())
out = _Console(width=None if sys.stdout.isatty() else 160)

T = TypeVar("T")

# Kept for scripts and tests that import them.
EXIT_USAGE = ExitStatus.USAGE
EXIT_QUOTA = ExitStatus.QUOTA
EXIT_INTERRUPTED = ExitStatus.INTERRUPTED


def setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, _Handler)), None)
    if handler is None and root.handlers:  # the embedding program set up logging: keep it, unless -v
        if verbose:
            root.setLevel(level)
        return
    if handler is None:
        handler = _Handler(console=console, show_path=False, show_time=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    # The handler's level also filters libraries that set their own logger to DEBUG (bm25s).
    handler.setLevel(level)
    root.setLevel(level)


class _Handler(RichHandler):
    """dahl's own log handler: rich's columns on a terminal, else one plain ``LEVEL message`` line."""

    def emit(self, record: logging.LogRecord) -> None:
        if self.console.is_terminal:
            super().emit(record)
            return
        try:
            line = f"{record.levelname} {self.format(record)}"
        except Exception:  # as logging.Handler does: a bad record must not stop the run
            self.handleError(record)
            return
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)



def run_stoppable(func: Callable[..., Awaitable[T]], *args: object) -> T:
    """``anyio.run(func, *args)``, where SIGTERM cancels the main task once (its cleanup writes the
    finished work) as Ctrl-C does; SIGINT is left as it was. Off the main thread: plain ``anyio.run``.

    Raises:
        KeyboardInterrupt: SIGTERM (or Ctrl-C) stopped the run.
    """

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        stopped: list[bool] = []

        def stop() -> None:
            if task is not None and not stopped:  # a second SIGTERM must not cut the cleanup short
                stopped.append(True)
                task.cancel()

        try:
            loop.add_signal_handler(signal.SIGTERM, stop)
            handled = True
        except (RuntimeError, ValueError, NotImplementedError):  # not the main thread, or no signals
            handled = False
        try:
            return await func(*args)
        except asyncio.CancelledError:
            if stopped:
                raise KeyboardInterrupt from None
            raise
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGTERM)

    return anyio.run(main)


def price_overrides(config_file: Path | None, options: tuple[str, ...]) -> dict[str, Price]:
    """Prices of ``[prices."MODEL"]`` in ``config_file``, then of ``--price`` options (which win).

    Raises:
        ConfigError: a malformed table or option.
    """
    prices = load_price_overrides(config_file) if config_file is not None else {}
    for text in options:
        price = parse_price_option(text)
        prices[price.model] = price
    return prices


def exit_finished(status: ExitStatus, nothing: str, partly: Callable[[], str]) -> None:
    """Return when a finished command's ``status`` is 0; else print why and exit with it.

    ``status`` is 0, ``NOTHING_SCORED`` (5; prints ``nothing``) or ``PARTIAL`` (6; prints ``partly()``).
    """
    if status == ExitStatus.NOTHING_SCORED:
        console.print(nothing)
    elif status == ExitStatus.PARTIAL:
        console.print(partly())
    if status != ExitStatus.OK:
        sys.exit(status)


def exit_stopped(exc: BaseException, again: str, interrupted: str | None = None) -> NoReturn:
    """Print why a command stopped early in one line and exit with its :class:`ExitStatus`.

    Args:
        exc: what stopped it: QuotaExhausted or CostCapReached (3), FatalAPIError (4), OutputWriteError (8),
            KeyboardInterrupt (130), any other DahlError (2).
        again: the sentence telling how to continue (where finished work is).
        interrupted: the line for an interrupt instead of ``interrupted. {again}``.
    """
    text = escape(str(exc))
    if isinstance(exc, CostCapReached):
        line = f"[red]stopped:[/] {text}. {again}"
    elif isinstance(exc, QuotaExhausted):
        line = f"[red]stopped:[/] API quota exhausted ({text}). {again}"
    elif isinstance(exc, FatalAPIError):
        line = f"[red]stopped:[/] {escape(str(exc).rstrip('.'))}. {again}"
    elif isinstance(exc, KeyboardInterrupt):
        line = interrupted or f"[yellow]interrupted.[/] {again}"
    else:
        line = f"[red]error:[/] {text}"
    console.print(line, emoji=False)  # a message's "file:100:" must not become an emoji
    sys.exit(stop_status(exc))


def stop_status(exc: BaseException) -> ExitStatus:
    """The exit status of a command that ``exc`` stopped: QuotaExhausted or CostCapReached 3, FatalAPIError 4,
    OutputWriteError 8, KeyboardInterrupt 130, any other DahlError 2, anything else 1 (INTERNAL)."""
    if isinstance(exc, QuotaExhausted):  # CostCapReached is one
        return ExitStatus.QUOTA
    if isinstance(exc, FatalAPIError):
        return ExitStatus.FATAL_API
    if isinstance(exc, KeyboardInterrupt):
        return ExitStatus.INTERRUPTED
    if isinstance(exc, OutputWriteError):
        return ExitStatus.WRITE_FAILED
    return ExitStatus.USAGE if isinstance(exc, DahlError) else ExitStatus.INTERNAL
