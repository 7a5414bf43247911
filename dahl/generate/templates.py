"""Prompt templates of ``dahl generate``, and the list of every stage's shipped template.

A generation template is plain text holding ``{question}`` once or more; the question
replaces it verbatim (no other brace is special, so a template may hold JSON). In chat
mode the rendered text is the one user message; in completion mode it is the whole
prompt. The shipped completion template, ``Question: ...\\nAnswer:``, is the plain
prompt the DAHL paper gave pretrained base models (Seo et al. 2024, §3.3). A user's
template file is versioned by its content: ``file:<blake2b-64 hex>``, so editing it
changes every answer id and cache key, and renaming it changes neither.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Literal

from dahl.errors import ConfigError

__all__ = ["GENERATE_TEMPLATES", "Mode", "Template", "load_template", "shipped_templates"]

Mode = Literal["chat", "completion"]

PLACEHOLDER = "{question}"


@dataclasses.dataclass(frozen=True)
class Template:
    """One generation template.

    Attributes:
        version: ``"generate-chat/v1"``, ``"generate-completion/v1"`` or ``"file:<hex>"``.
        text: the template, holding :data:`PLACEHOLDER`.
    """

    version: str
    text: str

    def render(self, question: str) -> str:
        """The prompt for ``question`` (every ``{question}`` replaced by it)."""
        return self.text.replace(PLACEHOLDER, question)


#: The shipped generation templates by mode.
GENERATE_TEMPLATES: dict[Mode, Template] = {
    "chat": Template("generate-chat/v1", PLACEHOLDER),
    "completion": Template("generate-completion/v1", f"Question: {PLACEHOLDER}\nAnswer:"),
}


def load_template(path: Path) -> Template:
    """Read a user's generation template file (UTF-8).

    Raises:
        ConfigError: the file cannot be read, is not UTF-8, or holds no ``{question}``.
    """
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"--template {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--template {path}: not UTF-8 text") from None
    if PLACEHOLDER not in text:
        raise ConfigError(f"--template {path}: holds no {PLACEHOLDER} placeholder")
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()
    return Template(f"file:{digest}", text)


def shipped_templates() -> list[tuple[str, str, str]]:
    """Every stage's shipped prompt template: ``(stage, version, what it does)``, in pipeline order."""
    from dahl.adapters import prompts
    from dahl.adapters.coverage_llm import COVER_TEMPLATE_VERSION
    from dahl.refs import prompts as refs_prompts

    return [
        ("generate", GENERATE_TEMPLATES["completion"].version, "dahl generate --mode completion (base models)"),
        ("generate", GENERATE_TEMPLATES["chat"].version, "dahl generate --mode chat (instruct models)"),
        ("split", prompts.SPLIT_TEMPLATE_VERSION, "Splitter: answer to atomic claims"),
        ("check", prompts.CHECK_TEMPLATE_VERSION, "Checker: one claim, the model's knowledge"),
        ("check", prompts.CHECK_EVIDENCE_TEMPLATE_VERSION, "Checker: one claim against evidence passages"),
        ("cover", COVER_TEMPLATE_VERSION, "recall: which reference facts a response covers"),
        ("refs", refs_prompts.EXTRACT_TEMPLATE_VERSION, "dahl refs build: facts from a document chunk"),
        ("refs", refs_prompts.RATE_TEMPLATE_VERSION, "dahl refs build: relevance and salience of facts"),
    ]
