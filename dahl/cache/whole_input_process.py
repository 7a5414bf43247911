"""Entry point of the whole-answer input child, run as ``__main__`` (no argument).

Started by :class:`dahl.cache.whole_input.WholeInputProcess`; not imported by the
package, so running it as ``__main__`` loads every module once.
"""

from __future__ import annotations

import sys

from dahl.cache.whole_input_child import child_main

if __name__ == "__main__":
    sys.exit(child_main())
