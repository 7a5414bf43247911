"""The configuration of ``dahl eval``: one TOML file for the whole benchmark.

Paths are relative to the config file's folder; every table but ``[[models]]`` is optional;
unknown tables and keys are errors. The layout is in ``docs/benchmark.md``.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from dahl.run._plan import AdapterSettings
from dahl.adapters._recall import RecallSettings
from dahl.config import CHECK_MAX_TOKENS, SPLIT_MAX_TOKENS, EndpointConfig, expand_env
from dahl.errors import ConfigError
from dahl.generate._settings import PAPER_MAX_TOKENS, PAPER_TEMPERATURE
from dahl.generate._templates import Mode
from dahl.analysis._leaderboard import BOARD_METRICS
from dahl.metrics._precision import MAX_N_BOOT

__all__ = ["EvalConfig", "LeaderboardSpec", "ModelSpec", "QuestionsSpec", "load_eval_config"]

_NUM = (int, float)
# Keys of an OpenAI-compatible endpoint and their TOML types (bool is refused: it is an int).
_ENDPOINT: dict[str, tuple[type, ...]] = {
    "base_url": (str,), "model": (str,), "api_key_env": (str,), "temperature": _NUM, "seed": (int,),
    "max_tokens": (int,), "timeout_s": _NUM, "rpm": _NUM, "tpm": _NUM, "max_in_flight": (int,),
    "response_format": (str,), "extra_body": (dict,), "max_outage_s": _NUM,
    "provider": (str,), "auth": (str,), "headers": (dict,),
}
_MODEL: dict[str, tuple[type, ...]] = {
    "name": (str,), "base_url": (str,), "mode": (str,), "temperature": _NUM, "max_tokens": (int,),
    "top_p": _NUM, "seed": (int,), "stop": (list,), "samples": (int,), "template": (str,),
    "api_key_env": (str,), "rpm": _NUM, "tpm": _NUM, "max_in_flight": (int,), "timeout_s": _NUM,
    "max_outage_s": _NUM,
}
_TABLES: dict[str, dict[str, tuple[type, ...]]] = {
    "questions": {"file": (str,), "fraction": _NUM, "seed": (int,), "stratify": (str,)},
    "generate": {k: v for k, v in _MODEL.items() if k != "name"},
    "split": {"kind": (str,), **_ENDPOINT},
    "check": {"kind": (str,), "evidence": (str,), "top_k": (int,), "nli_model": (str,), "nli_threshold": _NUM,
              "nli_contradiction": _NUM, **_ENDPOINT},
    "refs": {"file": (str,), "coverage": (str,), "partial": (str,), "fstar_k": (int,),
             "fstar_min_importance": _NUM, "alpha": _NUM, "beta": _NUM},
    "score": {"gamma": _NUM, "k": (int,)},
    "leaderboard": {"metric": (str,), "compare": (str,), "by_category": (bool,), "seed": (int,),
                    "n_boot": (int,)},
}
_SPLITTERS = ("rules", "openai")
_CHECKERS = ("evidence", "nli", "openai", "fake")


@dataclasses.dataclass(frozen=True)
class QuestionsSpec:
    """The questions to answer.

    Attributes:
        file: the questions file (absolute).
        fraction: sample fraction in (0, 1], stratified by ``stratify``; None = every question.
        seed: the sample's generator seed.
        stratify: the field holding the stratum.
    """

    file: Path
    fraction: float | None = None
    seed: int = 0
    stratify: str = "category"


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model to generate answers with.

    Attributes:
        endpoint: its server, name (``endpoint.model``), limits and sampling settings
            (``temperature``, ``max_tokens``, ``seed``).
        mode: ``"completion"`` or ``"chat"``.
        top_p: nucleus sampling mass, or None.
        stop: stop sequences.
        samples: answers per question, >= 1.
        template: the user's generation template file, or None for the shipped one.
    """

    endpoint: EndpointConfig
    mode: Mode = "completion"
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    samples: int = 1
    template: Path | None = None

    @property
    def name(self) -> str:
        """The model's name (sent to the server, ranked on the leaderboard)."""
        return self.endpoint.model


@dataclasses.dataclass(frozen=True)
class LeaderboardSpec:
    """How the leaderboard ranks and compares the models.

    Attributes:
        metric: a key of :data:`dahl.analysis._leaderboard.BOARD_METRICS`.
        compare: paired tests between ``"all"`` pairs or rank-``"adjacent"`` models.
        by_category: add the model x category table (and heatmap).
        seed: bootstrap seed (the score step's too).
        n_boot: bootstrap resamples.
    """

    metric: str = "dahl_score"
    compare: Literal["adjacent", "all"] = "all"
    by_category: bool = False
    seed: int = 0
    n_boot: int = 1000


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """A whole ``dahl eval`` run, read by :func:`load_eval_config`.

    Attributes:
        path: the config file.
        out_dir: OUT, holding ``questions/``, ``answers/``, ``score/`` and ``leaderboard/``.
        questions: the questions (and sample).
        models: the models, in config order (names unique).
        adapters: the Splitter and Checker of the score step.
        recall: reference facts for recall, or None.
        gamma: FActScore length-penalty γ, claims.
        k: K of F1@K, claims.
        leaderboard: ranking and paired-test settings.
        cache_dir: cache folder; None = the default.
        use_cache: read and write the cache.
    """

    path: Path
    out_dir: Path
    questions: QuestionsSpec
    models: tuple[ModelSpec, ...]
    adapters: AdapterSettings
    recall: RecallSettings | None = None
    gamma: float = 10.0
    k: int = 64
    leaderboard: LeaderboardSpec = dataclasses.field(default_factory=LeaderboardSpec)
    cache_dir: Path | None = None
    use_cache: bool = True


class _Reader:
    """Type-checked access to one config file's tables; every error names the file and key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.base = path.parent

    def fail(self, where: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path}: {where}: {message}")

    def table(self, data: Mapping[str, Any], name: str, schema: Mapping[str, tuple[type, ...]],
              where: str | None = None) -> dict[str, Any]:
        where = where or f"[{name}]"
        table = data.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{self.path}: {where} must be a table")
        for key, value in table.items():
            if key not in schema:
                raise self.fail(where, f"unknown key {key!r} (known: {', '.join(sorted(schema))})")
            types = schema[key]
            if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
                kind = "a number" if types == _NUM else {"str": "a string", "int": "an integer", "list": "a list",
                                                         "dict": "a table", "bool": "true or false"}[types[0].__name__]
                raise self.fail(where, f"{key} must be {kind}, got {value!r}")
        return dict(table)

    def file(self, where: str, key: str, value: str, *, must_exist: bool = True) -> Path:
        path = (self.base / value).resolve()
        if must_exist and not path.exists():
            raise self.fail(where, f"{key}: {path} not found")
        return path

    def choice(self, where: str, key: str, value: str, allowed: tuple[str, ...]) -> str:
        if value not in allowed:
            raise self.fail(where, f"{key} must be one of {', '.join(allowed)}, got {value!r}")
        return value


def _questions(r: _Reader, data: Mapping[str, Any]) -> QuestionsSpec:
    t = r.table(data, "questions", _TABLES["questions"])
    if "file" not in t:
        raise r.fail("[questions]", "needs file (the questions CSV/TSV or JSONL)")
    file = r.file("[questions]", "file", t["file"])
    fraction = t.get("fraction")
    if t.get("seed", 0) < 0:
        raise r.fail("[questions]", f"seed must be >= 0, got {t['seed']}")
    if fraction is not None:
        if not 0.0 < fraction <= 1.0:
            raise r.fail("[questions]", f"fraction must be in (0, 1], got {fraction}")
        if file.suffix.lower() not in (".csv", ".jsonl"):
            raise r.fail("[questions]", f"fraction samples .csv or .jsonl files, not {file.name}")
    return QuestionsSpec(file, None if fraction is None else float(fraction), t.get("seed", 0),
                         t.get("stratify", "category"))


def _model(r: _Reader, raw: Any, n: int, defaults: Mapping[str, Any]) -> ModelSpec:
    where = f"[[models]] #{n}"
    t = {**defaults, **r.table({"m": raw}, "m", _MODEL, where)}
    for key in ("name", "base_url"):
        if not t.get(key):
            raise r.fail(where, f"needs {key}")
    where = f"[[models]] {t['name']!r}"
    mode = r.choice(where, "mode", t.get("mode", "completion"), ("completion", "chat"))
    stop = t.get("stop", [])
    if not all(isinstance(s, str) and s for s in stop):
        raise r.fail(where, f"stop must be a list of non-empty strings, got {stop!r}")
    samples = t.get("samples", 1)
    if samples < 1:
        raise r.fail(where, f"samples must be >= 1, got {samples}")
    top_p = t.get("top_p")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise r.fail(where, f"top_p must be in (0, 1], got {top_p}")
    template = r.file(where, "template", t["template"]) if "template" in t else None
    fields = {k: t[k] for k in ("api_key_env", "seed", "rpm", "tpm", "max_in_flight", "timeout_s", "max_outage_s")
              if k in t}
    try:
        base_url = expand_env(t["base_url"], "base_url")
        endpoint = EndpointConfig(base_url=base_url, model=t["name"],
                                  temperature=t.get("temperature", PAPER_TEMPERATURE),
                                  max_tokens=t.get("max_tokens", PAPER_MAX_TOKENS), **fields)
    except ConfigError as exc:
        raise r.fail(where, str(exc)) from None
    return ModelSpec(endpoint, mode, None if top_p is None else float(top_p),  # type: ignore[arg-type]
                     tuple(stop), samples, template)


def _endpoint(r: _Reader, where: str, t: Mapping[str, Any], max_tokens: int) -> EndpointConfig:
    fields = {k: v for k, v in t.items() if k in _ENDPOINT}
    for key in ("base_url", "model"):
        if key not in fields:
            raise r.fail(where, f"kind = \"openai\" needs {key}")
    fields.setdefault("max_tokens", max_tokens)
    try:
        fields["base_url"] = expand_env(fields["base_url"], "base_url")
        return EndpointConfig(**fields)
    except ConfigError as exc:
        raise r.fail(where, str(exc)) from None


def _adapters(r: _Reader, data: Mapping[str, Any]) -> AdapterSettings:
    split = r.table(data, "split", _TABLES["split"])
    check = r.table(data, "check", _TABLES["check"])
    splitter = r.choice("[split]", "kind", split.get("kind", "rules"), _SPLITTERS)
    checker = r.choice("[check]", "kind", check.get("kind", "evidence"), _CHECKERS)
    for name, kind, t in (("split", splitter, split), ("check", checker, check)):
        extra = sorted(k for k in t if k in _ENDPOINT)
        if kind != "openai" and extra:
            raise r.fail(f"[{name}]", f"{', '.join(extra)}: endpoint keys need kind = \"openai\"")
    evidence = r.file("[check]", "evidence", check["evidence"]) if "evidence" in check else None
    if checker in ("evidence", "nli") and evidence is None:
        raise r.fail("[check]", f"kind = \"{checker}\" needs evidence (the corpus JSONL or folder)")
    if checker != "nli" and any(k.startswith("nli_") for k in check):
        raise r.fail("[check]", "nli_model, nli_threshold and nli_contradiction need kind = \"nli\"")
    if checker == "nli" and "nli_model" not in check:
        raise r.fail("[check]", "kind = \"nli\" needs nli_model (the model folder)")
    nli_model = r.file("[check]", "nli_model", check["nli_model"]) if "nli_model" in check else None
    try:
        return AdapterSettings(
            splitter=splitter, checker=checker, evidence=evidence, top_k=check.get("top_k", 5), nli_model=nli_model,
            nli_threshold=check.get("nli_threshold", 0.5), nli_contradiction=check.get("nli_contradiction", 0.5),
            split_endpoint=_endpoint(r, "[split]", split, SPLIT_MAX_TOKENS) if splitter == "openai" else None,
            check_endpoint=_endpoint(r, "[check]", check, CHECK_MAX_TOKENS) if checker == "openai" else None,
        )
    except ConfigError as exc:
        raise ConfigError(f"{r.path}: {exc}") from None


def _recall(r: _Reader, data: Mapping[str, Any], adapters: AdapterSettings) -> RecallSettings | None:
    if "refs" not in data:
        return None
    t = r.table(data, "refs", _TABLES["refs"])
    if "file" not in t:
        raise r.fail("[refs]", "needs file (refs.jsonl)")
    values = {k: v for k, v in t.items() if k != "file"}
    try:
        settings = RecallSettings(refs=r.file("[refs]", "file", t["file"]), **values)
    except ConfigError as exc:
        raise r.fail("[refs]", str(exc)) from None
    if settings.judge_name(adapters.checker) == "openai":
        if adapters.check_endpoint is None:
            raise r.fail("[refs]", "coverage = \"openai\" judges on the Checker's endpoint: needs [check] "
                                   "kind = \"openai\"")
        settings = dataclasses.replace(settings, endpoint=dataclasses.replace(adapters.check_endpoint,
                                                                              max_tokens=None))
    return settings


def _leaderboard(r: _Reader, data: Mapping[str, Any]) -> LeaderboardSpec:
    t = r.table(data, "leaderboard", _TABLES["leaderboard"])
    metric = r.choice("[leaderboard]", "metric", t.get("metric", "dahl_score"), tuple(BOARD_METRICS))
    compare = r.choice("[leaderboard]", "compare", t.get("compare", "all"), ("all", "adjacent"))
    if not 1 <= t.get("n_boot", 1000) <= MAX_N_BOOT:
        raise r.fail("[leaderboard]", f"n_boot must be in [1, {MAX_N_BOOT:,}], got {t['n_boot']:,}")
    if t.get("seed", 0) < 0:
        raise r.fail("[leaderboard]", f"seed must be >= 0, got {t['seed']}")
    return LeaderboardSpec(metric, compare, t.get("by_category", False),  # type: ignore[arg-type]
                           t.get("seed", 0), t.get("n_boot", 1000))


def load_eval_config(path: Path, *, out_dir: Path | None = None, cache_dir: Path | None = None,
                     use_cache: bool = True) -> EvalConfig:
    """Read and check a ``dahl eval`` config file (blocking).

    Args:
        path: the TOML file.
        out_dir: OUT, instead of the file's ``output`` (relative to the current folder).
        cache_dir: cache folder; None = the default.
        use_cache: read and write the cache.

    Returns:
        The checked configuration, every path absolute.

    Raises:
        ConfigError: unreadable file, bad TOML, an unknown table or key, a bad value, a missing
            file; the message names the file and key.
    """
    path = Path(path).resolve()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    r = _Reader(path)
    known = ("output", "models", *_TABLES)
    for key in data:
        if key not in known:
            raise ConfigError(f"{path}: unknown key or table {key!r} (known: {', '.join(sorted(known))})")
    output = data.get("output", "eval-out")
    if not isinstance(output, str) or not output:
        raise ConfigError(f"{path}: output must be a folder name, got {output!r}")
    if "questions" not in data:
        raise ConfigError(f"{path}: needs a [questions] table with file = \"...\"")
    models_raw = data.get("models")
    if not isinstance(models_raw, list) or not models_raw:
        raise ConfigError(f"{path}: needs at least one [[models]] table (name, base_url)")
    defaults = r.table(data, "generate", _TABLES["generate"])
    models = tuple(_model(r, raw, n, defaults) for n, raw in enumerate(models_raw, 1))
    names = [m.name for m in models]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{path}: [[models]] name given twice: {', '.join(twice)}")
    score = r.table(data, "score", _TABLES["score"])
    if not 0 <= score.get("gamma", 10.0) < math.inf or not 1 <= score.get("k", 64) < 2**63:
        raise r.fail("[score]", "gamma must be a finite number >= 0 and k in [1, 2**63)")
    adapters = _adapters(r, data)
    return EvalConfig(
        path=path,
        out_dir=out_dir.resolve() if out_dir is not None else r.file("output", "output", output, must_exist=False),
        questions=_questions(r, data),
        models=models,
        adapters=adapters,
        recall=_recall(r, data, adapters),
        gamma=float(score.get("gamma", 10.0)),
        k=score.get("k", 64),
        leaderboard=_leaderboard(r, data),
        cache_dir=cache_dir,
        use_cache=use_cache,
    )
