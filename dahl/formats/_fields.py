"""Field mapping: read a file whose records name dahl's fields differently.

A mapping is ``{target: source}`` (``--field question=prompt`` or ``fields = {...}`` in
``--config``): target one of :data:`TARGETS`, source the file's key or column. Readers apply it
before validation, so errors name the file's own field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import msgspec.structs

from dahl.errors import ConfigError

__all__ = ["TARGETS", "check_fields", "parse_field_options", "rename_row", "renamed_struct"]

#: dahl's record fields a mapping may target (see :mod:`dahl.formats._jsonl`).
TARGETS: tuple[str, ...] = (
    "id",
    "question",
    "response",
    "model",
    "category",
    "claims",
    "claim_labels",
    "abstained",
    "meta",
)


def check_fields(fields: Mapping[str, str]) -> dict[str, str]:
    """Validate a ``{target: source}`` mapping and return it as a plain dict, identity pairs dropped.

    Raises:
        ConfigError: a target not in :data:`TARGETS`, an empty source, or two targets from one source.
    """
    result: dict[str, str] = {}
    sources: dict[str, str] = {}
    for target, source in fields.items():
        if target not in TARGETS:
            raise ConfigError(
                f"unknown field {target!r} in the field mapping; valid fields: {', '.join(TARGETS)}"
            )
        if not isinstance(source, str) or not source.strip():
            raise ConfigError(f"the field mapping gives {target!r} no source field name")
        if source in sources:
            raise ConfigError(
                f"the field mapping reads both {sources[source]!r} and {target!r} from {source!r}"
            )
        sources[source] = target
        if source != target:
            result[target] = source
    return result


def parse_field_options(values: Iterable[str]) -> dict[str, str]:
    """Parse repeated ``--field TARGET=SOURCE`` options into a checked mapping.

    Raises:
        ConfigError: an option without ``=``, or as :func:`check_fields`.
    """
    fields: dict[str, str] = {}
    for value in values:
        target, sep, source = value.partition("=")
        if not sep:
            raise ConfigError(f"--field {value!r}: expected TARGET=SOURCE, e.g. question=prompt")
        fields[target.strip()] = source.strip()
    return check_fields(fields)


_STRUCTS: dict[tuple[type[Any], tuple[tuple[str, str], ...]], type[Any]] = {}


def renamed_struct(struct: type[msgspec.Struct], fields: Mapping[str, str]) -> type[Any]:
    """Return a copy of ``struct`` (same fields, types, defaults; cached) decoding from the mapped names.

    Raises:
        ConfigError: as :func:`check_fields`.
    """
    mapping = check_fields(fields)
    if not mapping:
        return struct
    key = (struct, tuple(sorted(mapping.items())))
    cached = _STRUCTS.get(key)
    if cached is not None:
        return cached
    spec: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for info in msgspec.structs.fields(struct):
        if info.default is not msgspec.NODEFAULT:
            spec.append((info.name, info.type, info.default))
        elif info.default_factory is not msgspec.NODEFAULT:
            spec.append((info.name, info.type, msgspec.field(default_factory=info.default_factory)))
        else:
            spec.append((info.name, info.type))
    names = {info.name for info in msgspec.structs.fields(struct)}
    copy = msgspec.defstruct(
        struct.__name__,
        spec,
        rename={target: source for target, source in mapping.items() if target in names},
    )
    _STRUCTS[key] = copy
    return copy


def rename_row(row: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """Return ``row`` with each mapped source key moved to its target; a key the mapping replaces
    is dropped, as the renamed struct would ignore it."""
    if not fields:
        return dict(row)
    moved = set(fields) | set(fields.values())
    out = {k: v for k, v in row.items() if k not in moved}
    for target, source in fields.items():
        if source in row:
            out[target] = row[source]
    return out
