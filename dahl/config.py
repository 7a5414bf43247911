"""Endpoint settings for LLM servers (OpenAI-compatible or Anthropic), and their TOML loader.

The TOML layout (``[default]``, ``[split]``, ``[check]``, ``fields``, ``[prices."MODEL"]``,
``[templates]``) is documented in docs/checkers.md. Keys and headers never enter cache keys or logs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit, urlunsplit

from dahl.errors import ConfigError
from dahl.formats._fields import check_fields
from dahl.templates import STAGES, PromptTemplate, load_prompt_template

__all__ = [
    "AUTH_SCHEMES",
    "CHECK_MAX_TOKENS",
    "PROVIDERS",
    "SPLIT_MAX_TOKENS",
    "Auth",
    "EndpointConfig",
    "Provider",
    "ResponseFormat",
    "api_key_id",
    "default_api_key_env",
    "endpoint_configs",
    "is_local_url",
    "load_config",
    "load_fields",
    "load_nli",
    "load_templates",
    "normalize_base_url",
    "resolve_api_key",
    "resolve_headers",
]

#: How the reply format is requested. ``auto`` resolves per host, see :meth:`EndpointConfig.effective_format`.
ResponseFormat = Literal["auto", "json_schema", "json_object", "text"]

#: Default completion budget of a split call, tokens.
SPLIT_MAX_TOKENS = 1024
#: Default completion budget of a check call, tokens: a label plus a one-sentence reason.
CHECK_MAX_TOKENS = 128

# Request-body keys the adapter owns; ``extra_body`` may not override them.
_RESERVED_BODY_KEYS = frozenset(
    {"model", "messages", "temperature", "seed", "max_tokens", "response_format", "stream"}
)
_FORMATS: tuple[str, ...] = get_args(ResponseFormat)
#: Wire protocol of an endpoint: OpenAI chat-completions or Anthropic Messages.
Provider = Literal["openai", "anthropic"]
PROVIDERS: tuple[str, ...] = get_args(Provider)
#: Which header carries the API key (see the module docstring).
Auth = Literal["bearer", "api-key", "x-api-key", "none"]
AUTH_SCHEMES: tuple[str, ...] = get_args(Auth)
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# RFC 9110 §5.1 field name; a value may not hold CR, LF or NUL (§5.5), which would split the request.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE_BAD = re.compile(r"[\r\n\x00]")
_STAGES = ("split", "check")


def normalize_base_url(url: str) -> str:
    """Return ``url`` with lowercase scheme and host, no trailing slash or ``/chat/completions``.

    ``"HTTPS://API.OpenAI.com/v1/"`` -> ``"https://api.openai.com/v1"``.

    Raises:
        ConfigError: the URL has no http(s) scheme or no host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"base_url must be an http(s) URL with a host, got {url!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):
        path = path[: -len("/chat/completions")]
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def is_local_url(url: str) -> bool:
    """Whether ``url``'s host is this machine or a private network: ``localhost``, a loopback,
    private or link-local IP address (where a self-hosted server such as llama.cpp, vLLM or
    Ollama runs). A host name other than ``localhost`` is not resolved: False."""
    host = (urlsplit(url.strip()).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def default_api_key_env(base_url: str) -> str:
    """``PERPLEXITY_API_KEY``, ``ANTHROPIC_API_KEY`` (host contains that name) or ``OPENAI_API_KEY``."""
    host = urlsplit(base_url).netloc.lower()
    if "perplexity" in host:
        return "PERPLEXITY_API_KEY"
    return "ANTHROPIC_API_KEY" if "anthropic" in host else "OPENAI_API_KEY"


def _default_provider(base_url: str) -> Provider:
    """``anthropic`` for ``api.anthropic.com``, else ``openai``."""
    return "anthropic" if urlsplit(base_url).hostname == "api.anthropic.com" else "openai"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EndpointConfig:
    """Settings of one LLM endpoint (chat-completions or Anthropic Messages) for one stage.

    Attributes:
        base_url: API root, e.g. ``https://api.openai.com/v1`` (normalized on construction).
        model: model name sent in the request body.
        api_key_env: environment variable holding the key; None = per provider
            (:func:`default_api_key_env`); ``""`` = no key (``auth = "none"`` sets it so).
        temperature: sampling temperature.
        seed: sampling seed sent to the server, or None to omit it.
        max_tokens: completion budget, tokens; None = the stage default (:data:`SPLIT_MAX_TOKENS`,
            :data:`CHECK_MAX_TOKENS`).
        timeout_s: total timeout of one HTTP request, seconds.
        rpm: request budget, requests per minute; None = unlimited (or learnt from headers).
        tpm: token budget, tokens per minute; None = unlimited.
        max_in_flight: maximum concurrent requests to this endpoint.
        response_format: ``json_schema``, ``json_object``, ``text``, or ``auto``
            (:meth:`effective_format`).
        extra_body: extras merged into every request body; may not override model, messages
            or sampling keys.
        max_outage_s: seconds without a successful reply after which the run stops with
            ``FatalAPIError``.
        provider: ``openai`` or ``anthropic``; None = inferred from the host
            (``anthropic`` for ``api.anthropic.com``).
        auth: header carrying the key (``bearer``, ``api-key``, ``x-api-key``, ``none``);
            None = ``x-api-key`` for anthropic, ``bearer`` otherwise.
        headers: extra request headers; ``${NAME}`` in a value is read by :func:`resolve_headers`.
        templates: the user's prompt templates by stage; other stages use the shipped ones.

    Raises:
        ConfigError: a value out of range, a reserved ``extra_body`` key, a bad header, or a
            template filed under another stage.
    """

    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    timeout_s: float = 60.0
    rpm: float | None = None
    tpm: float | None = None
    max_in_flight: int = 64
    response_format: ResponseFormat = "auto"
    extra_body: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    max_outage_s: float = 120.0
    provider: Provider | None = None
    auth: Auth | None = None
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    templates: Mapping[str, PromptTemplate] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # Frozen dataclass: normalized values are written once, here.
        object.__setattr__(self, "base_url", normalize_base_url(self.base_url))
        if self.provider is None:
            object.__setattr__(self, "provider", _default_provider(self.base_url))
        if self.provider not in PROVIDERS:
            raise ConfigError(f"provider must be one of {', '.join(PROVIDERS)}, got {self.provider!r}")
        if self.auth is None:
            object.__setattr__(self, "auth", "x-api-key" if self.provider == "anthropic" else "bearer")
        if self.auth not in AUTH_SCHEMES:
            raise ConfigError(f"auth must be one of {', '.join(AUTH_SCHEMES)}, got {self.auth!r}")
        if self.auth == "none":
            object.__setattr__(self, "api_key_env", "")
        elif self.api_key_env is None:
            default = "ANTHROPIC_API_KEY" if self.provider == "anthropic" else default_api_key_env(self.base_url)
            object.__setattr__(self, "api_key_env", default)
        object.__setattr__(self, "headers", dict(self.headers))
        for name, value in self.headers.items():
            if not isinstance(name, str) or not name or not isinstance(value, str):
                raise ConfigError(f"headers must map names to strings; {name!r} does not")
            if not _HEADER_NAME.fullmatch(name):
                raise ConfigError(f"header {name!r}: a header name is letters, digits and !#$%&'*+-.^_`|~ only")
            if _HEADER_VALUE_BAD.search(value):
                raise ConfigError(f"header {name}: its value holds a line break or NUL")
            if "${" in _ENV_REFERENCE.sub("", value):
                raise ConfigError(f"header {name}: write an environment variable as ${{NAME}}")
        object.__setattr__(self, "extra_body", dict(self.extra_body))
        object.__setattr__(self, "templates", dict(self.templates))
        for stage, template in self.templates.items():
            if stage not in STAGES or template.stage != stage:
                raise ConfigError(f"templates[{stage!r}] holds a {template.stage!r} template")
        # TOML gives 0 for 0.0; coerce so bodies and fingerprints do not depend on spelling.
        for name in ("temperature", "timeout_s", "rpm", "tpm", "max_outage_s"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
        if not self.model:
            raise ConfigError("model must be a non-empty string")
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"temperature must be in [0, 2], got {self.temperature}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be > 0 or unset, got {value}")
        if not (isinstance(self.max_outage_s, float) and math.isfinite(self.max_outage_s) and self.max_outage_s > 0):
            raise ConfigError(f"max_outage_s must be a finite number of seconds > 0, got {self.max_outage_s!r}")
        if self.max_in_flight < 1:
            raise ConfigError(f"max_in_flight must be >= 1, got {self.max_in_flight}")
        if self.response_format not in _FORMATS:
            raise ConfigError(
                f"response_format must be one of {', '.join(_FORMATS)}, got {self.response_format!r}"
            )
        reserved = sorted(_RESERVED_BODY_KEYS & set(self.extra_body))
        if reserved:
            raise ConfigError(f"extra_body may not set {', '.join(reserved)}")

    def _route(self, path: str) -> str:
        """``base_url`` with ``path`` appended before its query (Azure's ``?api-version=``)."""
        parts = urlsplit(self.base_url)
        return urlunsplit((parts.scheme, parts.netloc, parts.path + path, parts.query, ""))

    def template(self, shipped: PromptTemplate) -> PromptTemplate:
        """The template of ``shipped.stage`` this endpoint uses: the user's, else ``shipped``."""
        return self.templates.get(shipped.stage, shipped)

    @property
    def chat_url(self) -> str:
        """Full URL of the chat-completions route (a query of ``base_url`` kept at the end)."""
        return self._route("/chat/completions")

    @property
    def request_url(self) -> str:
        """Full URL the Splitter, Checker and coverage judge POST to: ``/messages`` for anthropic."""
        return self._route("/messages") if self.provider == "anthropic" else self.chat_url

    def effective_format(self) -> Literal["json_schema", "json_object", "text"]:
        """The reply format requested: ``auto`` is ``json_schema`` for ``api.openai.com`` and
        anthropic (a forced tool), else ``text``."""
        if self.response_format != "auto":
            return self.response_format
        host = urlsplit(self.base_url).hostname or ""
        return "json_schema" if host == "api.openai.com" or self.provider == "anthropic" else "text"


def resolve_api_key(cfg: EndpointConfig) -> str:
    """Read the API key of ``cfg`` from the environment (the only place dahl reads it).

    Returns:
        The key, or ``""`` when ``cfg.api_key_env`` is empty (keyless local servers).

    Raises:
        ConfigError: the variable is unset or empty; the message names the variable, never a key.
    """
    if not cfg.api_key_env:
        return ""
    key = os.environ.get(cfg.api_key_env, "").strip()
    if not key:
        raise ConfigError(
            f"environment variable {cfg.api_key_env} is not set or empty; it must hold the API key "
            f"for {cfg.base_url} (a keyless local server such as vLLM or Ollama: pass --api-key-env '' "
            f'or set auth = "none" in the --config table)'
        )
    return key


def expand_env(text: str, what: str) -> str:
    """``text`` with every ``${NAME}`` replaced by the environment variable NAME.

    Args:
        text: a setting's value, e.g. a header or a base URL.
        what: how errors name the setting, e.g. ``"header X-Key of https://host/v1"``.

    Raises:
        ConfigError: a named variable is unset or holds a line break or NUL (never shows a value).
    """
    def lookup(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None:
            raise ConfigError(f"{what} needs environment variable {match.group(1)}, which is not set")
        if _HEADER_VALUE_BAD.search(found):
            raise ConfigError(f"{what}: environment variable {match.group(1)} holds a line break or NUL")
        return found

    return _ENV_REFERENCE.sub(lookup, text)


def resolve_headers(cfg: EndpointConfig) -> dict[str, str]:
    """``cfg.headers`` with every ``${NAME}`` replaced by the environment variable NAME (may be secrets).

    Raises:
        ConfigError: a named variable is unset or holds a line break or NUL (never shows a value).
    """
    return {name: expand_env(text, f"header {name} of {cfg.base_url}") for name, text in cfg.headers.items()}


def api_key_id(key: str) -> str:
    """Short identity of an API key for lane keys and logs: blake2b-64 hex; ``""`` -> ``"nokey"``."""
    if not key:
        return "nokey"
    return hashlib.blake2b(key.encode("utf-8"), digest_size=8).hexdigest()


_FIELDS = {f.name: f for f in dataclasses.fields(EndpointConfig)}
_NUMBER = (int, float)
# TOML value types accepted per key (bool is rejected explicitly: it is an int in Python).
_TYPES: dict[str, tuple[type, ...]] = {
    "base_url": (str,),
    "model": (str,),
    "api_key_env": (str,),
    "temperature": _NUMBER,
    "seed": (int,),
    "max_tokens": (int,),
    "timeout_s": _NUMBER,
    "rpm": _NUMBER,
    "tpm": _NUMBER,
    "max_in_flight": (int,),
    "response_format": (str,),
    "extra_body": (dict,),
    "max_outage_s": _NUMBER,
    "provider": (str,),
    "auth": (str,),
    "headers": (dict,),
}


#: The ``nli`` Checker's keys of ``[check]`` and their TOML types (read by :func:`load_nli`).
NLI_KEYS: dict[str, tuple[type, ...]] = {"nli_model": (str,), "nli_threshold": _NUMBER, "nli_contradiction": _NUMBER}


def _check_table(path: Path, section: str, table: Any, types: dict[str, tuple[type, ...]] = _TYPES) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{section}] must be a table")
    for key in table:
        if key not in types:
            raise ConfigError(
                f"{path}: unknown key {key!r} in [{section}] (known: {', '.join(sorted(types))})"
            )
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, types[key]):
            names = " or ".join(t.__name__ for t in types[key])
            raise ConfigError(f"{path}: [{section}] {key} must be {names}, got {value!r}")
    return table


def _read_toml(path: Path) -> dict[str, Any]:
    """Parse ``path`` as TOML; raises ConfigError (naming the file) if unreadable or invalid."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


def load_fields(path: str | Path) -> dict[str, str]:
    """Read the input field mapping (``fields = {question = "prompt"}``) of a TOML file.

    Returns:
        ``{dahl field: the input's field}``; empty when the file has no ``fields``.

    Raises:
        ConfigError: unreadable file, bad TOML, ``fields`` not a table of strings, or
            an unknown target field (named, with the valid ones).
    """
    path = Path(path)
    table = _read_toml(path).get("fields", {})
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise ConfigError(f"{path}: fields must be a table of strings, e.g. fields = {{question = \"prompt\"}}")
    try:
        return check_fields(table)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def load_nli(path: str | Path) -> dict[str, Any]:
    """The ``nli`` Checker's settings in ``[check]`` of a TOML file, the keys present only:
    ``nli_model`` (a Path, relative to the file's folder), ``nli_threshold``, ``nli_contradiction``.

    Raises:
        ConfigError: unreadable file, bad TOML, a value of the wrong type (file and key named).
    """
    path = Path(path)
    table = _read_toml(path).get("check", {})
    found = _check_table(path, "check", {k: v for k, v in table.items() if k in NLI_KEYS} if isinstance(table, dict)
                         else table, NLI_KEYS)
    if "nli_model" in found:
        found["nli_model"] = path.parent / found["nli_model"]
    return found


def load_templates(path: str | Path) -> dict[str, PromptTemplate]:
    """Read the prompt templates a TOML file's ``[templates]`` names (paths relative to the file).

    Returns:
        ``{stage: PromptTemplate}``; empty when the file has no ``[templates]``.

    Raises:
        ConfigError: ``templates`` not a table of strings, an unknown stage, or a bad
            template file (the file and placeholder named).
    """
    path = Path(path)
    table = _read_toml(path).get("templates", {})
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise ConfigError(f"{path}: [templates] must map stages to file paths, e.g. split = \"split.toml\"")
    return {stage: load_prompt_template(stage, path.parent / file, flag=f"{path}: [templates]")
            for stage, file in table.items()}


def load_kinds(path: str | Path, choices: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """Read which adapter each stage uses: ``kind`` of the ``[split]`` and ``[check]`` tables.

    Args:
        path: the TOML file (as :func:`load_config` reads it).
        choices: ``{stage: the kinds it accepts}``, e.g. the Splitter and Checker names.

    Returns:
        ``{stage: kind}`` for the stages whose table names one.

    Raises:
        ConfigError: unreadable file, bad TOML, or a kind that is not a string of ``choices``
            (file, table and the choices named).
    """
    path = Path(path)
    data = _read_toml(path)
    kinds: dict[str, str] = {}
    for stage in _STAGES:
        table = data.get(stage, {})
        if not isinstance(table, dict) or "kind" not in table:
            continue
        kind = table["kind"]
        if kind not in choices[stage]:
            raise ConfigError(f"{path}: [{stage}] kind must be one of {', '.join(choices[stage])}, got {kind!r}")
        kinds[stage] = kind
    return kinds


def load_config(path: str | Path) -> dict[str, EndpointConfig]:
    """Read endpoint settings for the ``split`` and ``check`` stages from a TOML file.

    ``[default]`` is merged under both stages (stage keys win; ``extra_body`` and ``headers``
    key by key); a stage with neither table is left out; ``max_tokens`` defaults per stage.
    A stage table may name its adapter (``kind``, read by :func:`load_kinds`); one that names
    an offline adapter has no endpoint and is left out.

    Returns:
        ``{"split": EndpointConfig, "check": EndpointConfig}`` (stages present only).

    Raises:
        ConfigError: unreadable file, bad TOML, unknown table or key (file and key named),
            wrong value type, or a missing ``base_url``/``model``.
    """
    path = Path(path)
    data = _read_toml(path)
    for section in data:
        # prices: read by dahl.pricing; templates: by load_templates
        if section not in ("default", "fields", "prices", "templates", *_STAGES):
            raise ConfigError(f"{path}: unknown table [{section}] "
                              "(known: default, fields, prices, templates, split, check)")
    default = _check_table(path, "default", data.get("default", {}))
    result: dict[str, EndpointConfig] = {}
    for stage in _STAGES:
        table = data.get(stage, {})
        if isinstance(table, dict):  # the nli Checker's keys are load_nli's
            table = {k: v for k, v in table.items() if k not in NLI_KEYS}
        if not table and "default" not in data:
            continue
        kind = table.pop("kind", "openai") if isinstance(table, dict) else "openai"
        own = _check_table(path, stage, table)
        if kind != "openai":
            if own:
                raise ConfigError(f"{path}: [{stage}] {', '.join(sorted(own))}: endpoint keys need kind = \"openai\"")
            continue
        merged = {**default, **own}
        for table in ("extra_body", "headers"):  # merged key by key
            both = {**default.get(table, {}), **own.get(table, {})}
            if both:
                merged[table] = both
        for key in ("base_url", "model"):
            if key not in merged:
                raise ConfigError(f"{path}: [{stage}] needs {key!r} (or set it in [default])")
        merged.setdefault("max_tokens", SPLIT_MAX_TOKENS if stage == "split" else CHECK_MAX_TOKENS)
        try:
            result[stage] = EndpointConfig(**merged)
        except ConfigError as exc:
            raise ConfigError(f"{path}: [{stage}] {exc}") from exc
    return result


def endpoint_configs(
    path: str | Path | None, overrides: Mapping[str, Any], *, stages: tuple[str, ...]
) -> dict[str, EndpointConfig]:
    """Endpoint settings for ``stages``: the TOML file (if any), then command-line ``overrides``.

    Args:
        path: TOML file as read by :func:`load_config`, or None.
        overrides: settings given on the command line (only those set); they win.
        stages: the stages that use an ``openai`` adapter (``"split"``, ``"check"``).

    Returns:
        ``{stage: EndpointConfig}`` for each of ``stages``.

    Raises:
        ConfigError: a stage has no ``base_url``/``model`` from either source, or a bad value.
    """
    from_file = load_config(path) if path is not None else {}
    result: dict[str, EndpointConfig] = {}
    for stage in stages:
        base: dict[str, Any] = {}
        if stage in from_file:
            base = {f: getattr(from_file[stage], f) for f in _FIELDS}
        merged = {**base, **overrides}
        if "headers" in base and "headers" in overrides:  # --header adds to the file's headers
            merged["headers"] = {**base["headers"], **overrides["headers"]}
        for key in ("base_url", "model"):
            if not merged.get(key):
                flag = "--" + key.replace("_", "-")
                raise ConfigError(f"the openai {'Splitter' if stage == 'split' else 'Checker'} needs {flag}"
                                  " (or a [{stage}] table in --config)".replace("{stage}", stage))
        merged.setdefault("max_tokens", None)
        if merged["max_tokens"] is None:
            merged["max_tokens"] = SPLIT_MAX_TOKENS if stage == "split" else CHECK_MAX_TOKENS
        result[stage] = EndpointConfig(**merged)
    return result
