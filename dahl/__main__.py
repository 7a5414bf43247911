"""The ``dahl`` command's entry point (also ``python -m dahl``).

It imports the command line inside its Ctrl-C handler, so a Ctrl-C while the CLI
loads exits 130 without a traceback, as one during a run does. SIGTERM is taken for Ctrl-C from the same
moment (a run maps it again while it lasts), so a scheduler's ``kill`` also exits 130.
A Ctrl-C inside any command exits 130 too (click alone reports it as "Aborted!" with
status 1). A reader that stops reading (``dahl inspect FILE | head -1``) ends the
command quietly with status 0, as it does for any report.
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
