"""The ``dahl`` command's entry point (also ``python -m dahl``).

It imports the command line inside its Ctrl-C handler: importing the CLI and
what it loads takes ~0.4 s, and a Ctrl-C then must exit 130 without a
traceback like one during a run. A Ctrl-C inside any command exits 130 too
(click alone reports it as "Aborted!" with status 1).
"""

from __future__ import annotations

import sys

from dahl.exit_status import ExitStatus

__all__ = ["main"]


def main() -> None:
    """Run the ``dahl`` command; Ctrl-C at any moment exits with status 130 and one line."""
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


if __name__ == "__main__":  # pragma: no cover
    main()
