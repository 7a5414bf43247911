"""The ``dahl`` command's entry point (also ``python -m dahl``).

Importing this module installs its interrupt handling before anything else: until the command
starts, Ctrl-C or SIGTERM prints ``interrupted`` and exits 130 at once (nothing has been done
yet); once it runs they raise KeyboardInterrupt, which the command turns into a clean stop, and
which exits 130 with one line too. A reader that stops reading (``| head -1``) ends the command
with status 0.
"""

import os
import signal
import sys


def _interrupted_at_start(_signum: int, _frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)  # ExitStatus.INTERRUPTED: importing it here would widen the window


# SIGINT ignored (a background job of a script: the terminal's Ctrl-C is not for it) stays ignored.
_SIGINT_IGNORED = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
if not _SIGINT_IGNORED:
    signal.signal(signal.SIGINT, _interrupted_at_start)
signal.signal(signal.SIGTERM, _interrupted_at_start)

from types import FrameType

from dahl.exit_status import ExitStatus

__all__ = ["main"]


def _terminate(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Run the ``dahl`` command; Ctrl-C or SIGTERM at any moment exits with status 130 and one line."""
    try:
        import click

        from dahl.cli import main as cli

        if not _SIGINT_IGNORED:  # from here the command stops cleanly
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _terminate)
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
