"""The ``dahl`` command's entry point (also ``python -m dahl``).

The CLI is imported inside the Ctrl-C/SIGTERM handler, so an interrupt at any moment exits 130
with one line; a reader that stops reading (``| head -1``) ends the command with status 0.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

from dahl.exit_status import ExitStatus

__all__ = ["main"]


def _terminate(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Run the ``dahl`` command; Ctrl-C or SIGTERM at any moment exits with status 130 and one line."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        import click

        from dahl.cli import main as cli

        try:
            status = cli.main(standalone_mode=False)
        except click.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                raise exc.__cause__ from None
            click.echo("Aborted!", err=True)  # a declined confirmation, as click says it
            sys.exit(1)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        sys.exit(status if isinstance(status, int) else 0)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(ExitStatus.INTERRUPTED)
    except BrokenPipeError:
        # Python flushes stdout again at exit, which would fail the same way: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(ExitStatus.OK)


if __name__ == "__main__":  # pragma: no cover
    main()
