"""``python -m dahl.cli``: the ``dahl`` command."""

from dahl.cli import main

main()
