"""``python -m dahl.cli``: the ``dahl`` command, through its entry point (:mod:`dahl.__main__`)."""

from dahl.__main__ import main

main()
