"""The ``dahl`` command's entry point (also ``python -m dahl``).

It imports the command line inside its Ctrl-C handler: importing the CLI and
what it loads takes ~0.4 s, and a Ctrl-C then must exit 130 without a
traceback like one during a run.
"""

from __future__ import annotations

import sys

from dahl.exit_status import ExitStatus

__all__ = ["main"]


def main() -> None:
    """Run the ``dahl`` command; Ctrl-C at any moment exits with status 130 and one line."""
    try:
        from dahl.cli import main as cli

        cli()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(ExitStatus.INTERRUPTED)


if __name__ == "__main__":  # pragma: no cover
    main()
