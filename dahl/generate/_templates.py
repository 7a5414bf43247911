"""Prompt templates of ``dahl generate``, and the registry of every stage's shipped template.

A generation template is text holding ``{question}`` (rules of :mod:`dahl.templates`; a ``.toml``
gives its ``user`` string). The completion template is DAHL's base-model prompt (Seo et al.
2024, §3.3). A user's file is versioned ``file:<blake2b-64 hex>`` of its content.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from dahl.errors import ConfigError
from dahl.templates import STAGES, PromptTemplate, fill, load_prompt_template

__all__ = [
    "GENERATE_TEMPLATES", "Mode", "Template", "load_template", "shipped_prompt_templates",
    "shipped_templates"
]

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
        return fill(self.text, {"question": question})


#: The shipped generation templates by mode.
GENERATE_TEMPLATES: dict[Mode, Template] = {
    "chat": Template("generate-chat/v1", PLACEHOLDER),
    "completion": Template("generate-completion/v1", f"Question: {PLACEHOLDER}\nAnswer:"),
}


def load_template(path: Path) -> Template:
    """Read a user's generation template file (UTF-8 plain text, or TOML with ``user``).

    Raises:
        ConfigError: the file cannot be read, is not UTF-8, holds no ``{question}`` or an
            unknown placeholder, or has a system part (the message names the file).
    """
    template = load_prompt_template("generate", path)
    if template.system is not None:
        raise ConfigError(f"--template generate={path}: a generation template has no system part")
    return Template(template.version, template.user)


def shipped_prompt_templates() -> list[PromptTemplate]:
    """Every stage's shipped prompt template, in pipeline order (both generation modes first)."""
    from dahl.adapters import _prompts as prompts
    from dahl.adapters._coverage import COVER_TEMPLATE
    from dahl.questions import _prompts as questions_prompts
    from dahl.refs import _prompts as refs_prompts

    generate = [PromptTemplate("generate", GENERATE_TEMPLATES[m].version, GENERATE_TEMPLATES[m].text)
                for m in ("completion", "chat")]
    return [*generate, prompts.SPLIT_TEMPLATE, prompts.CHECK_TEMPLATE, prompts.CHECK_EVIDENCE_TEMPLATE,
            COVER_TEMPLATE, refs_prompts.EXTRACT_TEMPLATE, refs_prompts.RATE_TEMPLATE,
            questions_prompts.GENERATE_TEMPLATE, questions_prompts.JUDGE_TEMPLATE]


def shipped_templates() -> list[tuple[str, str, str]]:
    """Every stage's shipped prompt template: ``(stage, version, what it does)``, in pipeline order."""
    out = []
    for template in shipped_prompt_templates():
        what = STAGES[template.stage].what
        if template.stage == "generate":
            mode = "chat" if template.version == GENERATE_TEMPLATES["chat"].version else "completion"
            what += f" (--mode {mode})"
        out.append((template.stage, template.version, what))
    return out
