"""Entry point of the cache lookup child, run as ``__main__`` with the database path as argument.

Started by :class:`dahl.cache.remote.ProcessReader`; not imported by the package, so
running it as ``__main__`` loads every module once.
"""

from __future__ import annotations

import sys

from dahl.cache.lookup_child import child_main

if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1]))
