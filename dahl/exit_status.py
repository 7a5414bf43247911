"""Exit statuses of the ``dahl`` command: the contract a script relies on.

=====  ==========================================================================
code   meaning
=====  ==========================================================================
0      finished: every answer read was scored (or resumed, or found whole)
1      an unexpected internal error (a bug: please report the traceback)
2      usage or configuration error, or an input that cannot be read at all
3      stopped: the API quota or billing limit is exhausted, or the next call
       could pass ``--max-cost`` (re-run to continue)
4      stopped: a fatal API error (bad key, endpoint unreachable, every call
       refused, breaker tripped); re-run to continue once fixed
5      nothing scored: no input record could be scored (all skipped, or none)
6      finished, but some input records were skipped, some claims ended in
       ``error``, or a coverage judgement failed (re-running retries the errors);
       ``dahl questions lint``: some rows would be dropped (duplicates, context)
8      an output file could not be written (disk full, read-only); nothing
       finished is lost
130    interrupted (Ctrl-C or SIGTERM); re-run to continue
=====  ==========================================================================
"""

from __future__ import annotations

import enum

__all__ = ["ExitStatus"]


class ExitStatus(enum.IntEnum):
    """Process exit statuses of ``dahl`` (see the module docstring for the table)."""

    OK = 0
    INTERNAL = 1
    USAGE = 2
    QUOTA = 3
    FATAL_API = 4
    NOTHING_SCORED = 5
    PARTIAL = 6
    WRITE_FAILED = 8
    INTERRUPTED = 130
