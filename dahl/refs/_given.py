"""Given reference sets: a user's own file (dahl ``refs.jsonl`` or FactRBench's layout) checked
and written as ``refs.jsonl`` (``dahl refs build --given FILE``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dahl.errors import InputError
from dahl.formats._refs import read_refs, write_refs
from dahl.records import RefSet

__all__ = ["convert_given"]


def convert_given(source: str | Path, out: str | Path) -> int:
    """Write the reference sets of ``source`` to ``out`` in dahl's layout (streamed, replaced atomically).

    Returns:
        The number of sets written.

    Raises:
        InputError: ``source`` cannot be read or has a bad line (file, line, field), two sets for
            one question, or ``out`` is ``source`` itself.
        ConfigError: a Parquet ``source`` without pyarrow.
        OSError: ``out`` cannot be written.
    """
    source, out = Path(source), Path(out)
    if out.exists() and source.exists() and out.resolve() == source.resolve():
        raise InputError("the output would overwrite the given reference sets", file=str(out))
    seen: dict[str, int] = {}

    def checked() -> Iterator[RefSet]:
        for n, ref_set in enumerate(read_refs(source), 1):
            first = seen.setdefault(ref_set.question_id, n)
            if first != n:
                raise InputError(f"sets {first} and {n} are both for question {ref_set.question_id!r}",
                                 file=str(source), field="question_id")
            yield ref_set

    return write_refs(out, checked())
