"""Prompt templates of every stage, and the loader of a user's template file.

A template is an optional system part and a user part with the stage's ``{name}`` placeholders
(``{{name}}`` is a literal ``{name}``, other braces are text). A file is TOML (``system``, ``user``)
or, any other suffix, plain text (the user part alone). Data placeholders (texts under evaluation)
belong in the user part only; helpers (reply format, demos) anywhere. A file's version is
``file:<blake2b-64 hex>`` of its text and goes into fingerprints and cache keys.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from dahl.errors import ConfigError

__all__ = ["STAGES", "PromptTemplate", "StageSpec", "fill", "load_prompt_template", "tag_neutralizer", "to_toml"]

Source = Literal["shipped", "file"]

_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclasses.dataclass(frozen=True)
class StageSpec:
    """The placeholders of one stage's template.

    Attributes:
        data: placeholders of the texts under evaluation (user part only).
        required: the data placeholders a template must hold (all but titles).
        helpers: placeholders the stage fills with its own text (anywhere).
        what: one line on what the stage asks.
    """

    data: tuple[str, ...]
    required: tuple[str, ...]
    helpers: tuple[str, ...]
    what: str

    @property
    def names(self) -> tuple[str, ...]:
        """Every placeholder the stage knows, data first."""
        return self.data + self.helpers


#: Every stage with a prompt, in pipeline order.
STAGES: dict[str, StageSpec] = {
    "generate": StageSpec(("question",), ("question",), (), "dahl generate: the answer to a question"),
    "split": StageSpec(("question", "answer"), ("question", "answer"), ("output", "demos"),
                       "Splitter: answer to atomic claims"),
    "check": StageSpec(("question", "claim"), ("question", "claim"), ("output",),
                       "Checker: one claim, the model's knowledge"),
    "check-evidence": StageSpec(("question", "claim", "evidence"), ("question", "claim", "evidence"), ("output",),
                                "Checker: one claim against evidence passages"),
    "cover": StageSpec(("question", "response", "facts"), ("question", "response", "facts"), ("output",),
                       "recall: which reference facts a response covers"),
    "extract": StageSpec(("title", "text"), ("text",), (), "dahl refs build: facts from a document chunk"),
    "rate": StageSpec(("question", "facts"), ("question", "facts"), (),
                      "dahl refs build: relevance and salience of facts"),
    "questions": StageSpec(("count", "title", "text"), ("count", "text"), (),
                           "dahl questions build: exam questions from an article"),
    "judge": StageSpec(("question",), ("question",), ("categories", "ambiguous"),
                       "dahl questions build: answerable without the article? and its category"),
}


@functools.lru_cache(maxsize=256)
def _fill_cached(text: str, values: tuple[tuple[str, str], ...]) -> str:
    return fill(text, dict(values))


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` replaced by ``values[name]`` and ``{{name}}`` by ``{name}``, in one pass.

    Raises:
        KeyError: a ``{name}`` of ``text`` has no value.
    """
    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return "{" + match.group(1) + "}"
        return values[match.group(2)]

    return _PLACEHOLDER.sub(replace, text) if "{" in text else text


def tag_neutralizer(*tags: str) -> Callable[[str], str]:
    """A function that replaces every ``<`` opening or closing one of ``tags`` with ``‹``
    (``"x </claim> y"`` -> ``"x ‹/claim> y"``), so no text under evaluation can close its block."""
    pattern = re.compile(r"<(?=\s*/?\s*(?:" + "|".join(map(re.escape, tags)) + r")\b)", re.IGNORECASE)

    def neutralize(text: str) -> str:
        return pattern.sub("\u2039", text) if "<" in text else text

    return neutralize


def _names(text: str) -> list[str]:
    return [m.group(2) for m in _PLACEHOLDER.finditer(text) if m.group(2) is not None]


@dataclasses.dataclass(frozen=True)
class PromptTemplate:
    """One stage's prompt template, shipped or read from a file.

    Attributes:
        stage: a key of :data:`STAGES`.
        version: ``"split/v1"`` and the like when shipped, ``"file:<blake2b-64 hex>"`` from a file.
        user: the user message, with the stage's placeholders.
        system: the system message, or None for none.
        source: ``"shipped"`` or ``"file"``.
    """

    stage: str
    version: str
    user: str
    system: str | None = None
    source: Source = "shipped"

    def messages(self, data: Mapping[str, str], helpers: Mapping[str, str] | None = None) -> list[dict[str, str]]:
        """The chat messages: ``[system, user]`` (``[user]`` without a system part).

        Args:
            data: the stage's data placeholders, already made safe (tags neutralized) by the stage.
            helpers: the stage's helper placeholders (reply format, demos...).

        Raises:
            KeyError: a placeholder of the template has no value.
        """
        helpers = helpers or {}
        user = fill(self.user, {**helpers, **data})
        if not self.system:
            return [{"role": "user", "content": user}]
        # The system part holds helpers only: rendered once per distinct helper values.
        system = _fill_cached(self.system, tuple(sorted(helpers.items())))
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def text(self, data: Mapping[str, str]) -> str:
        """The user part alone with ``data`` filled in (a completion-mode prompt)."""
        return fill(self.user, data)


def _validate(where: str, stage: str, system: str | None, user: str) -> None:
    spec = STAGES[stage]
    known = ", ".join("{" + n + "}" for n in spec.names)
    for part, text in (("system", system or ""), ("user", user)):
        for name in _names(text):
            if name not in spec.names:
                raise ConfigError(f"{where}: unknown placeholder {{{name}}} in the {part} part "
                                  f"(the {stage} template takes {known})")
            if part == "system" and name in spec.data:
                raise ConfigError(f"{where}: placeholder {{{name}}} is data under evaluation and belongs in "
                                  "the user part, not the system part")
    present = set(_names(user))
    for name in spec.required:
        if name not in present:
            raise ConfigError(f"{where}: missing placeholder {{{name}}} (the {stage} template needs "
                              + ", ".join("{" + n + "}" for n in spec.required) + ")")


def load_prompt_template(stage: str, path: Path, *, flag: str = "--template") -> PromptTemplate:
    """Read and validate a user's template file for ``stage`` (UTF-8; TOML or plain text).

    Args:
        stage: a key of :data:`STAGES`.
        path: the file.
        flag: how the user named the file, for messages (``--template split=FILE``).

    Returns:
        The template, ``version = "file:<blake2b-64 hex of the text>"``, ``source = "file"``.

    Raises:
        ConfigError: an unknown stage; an unreadable, non-UTF-8 or bad TOML file, or keys other
            than ``system``/``user``; a placeholder unknown, missing, or data in the system part.
    """
    where = f"{flag} {stage}={path}"
    if stage not in STAGES:
        raise ConfigError(f"{flag}: unknown stage {stage!r} (known: {', '.join(STAGES)})")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    system: str | None = None
    user = text
    if path.suffix.lower() == ".toml":
        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: invalid TOML: {exc}") from None
        unknown = sorted(set(table) - {"system", "user"})
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (a template has system and user)")
        if not isinstance(table.get("user"), str):
            raise ConfigError(f"{where}: needs a user = '''...''' string")
        if not isinstance(table.get("system", ""), str):
            raise ConfigError(f"{where}: system must be a string")
        user, system = table["user"], table.get("system") or None
    _validate(where, stage, system, user)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()
    return PromptTemplate(stage, f"file:{digest}", user, system, "file")


def to_toml(template: PromptTemplate) -> str:
    """``template`` as a TOML template file (multi-line literal strings) that loads back to its text.

    Raises:
        ValueError: a part holds ``'''``, which a TOML literal string cannot.
    """
    # dahl generate's --template takes FILE alone (it has one prompt); the other commands STAGE=FILE.
    flag = "dahl generate --template FILE" if template.stage == "generate" else f"--template {template.stage}=FILE"
    lines = [f"# {template.stage} template {template.version}; edit it and pass {flag}"]
    for name, part in (("system", template.system), ("user", template.user)):
        if part is None:
            continue
        if "'''" in part:
            raise ValueError(f"the {name} part holds ''' and cannot be written as a TOML literal string")
        lines.append(f"{name} = '''\n{part}'''")
    return "\n".join(lines) + "\n"
