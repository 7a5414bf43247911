"""Tests for dahl.config: endpoint settings, TOML loading, the API key in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.config import (
    EndpointConfig,
    api_key_id,
    load_config,
    normalize_base_url,
    resolve_api_key,
)
from dahl.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dahl.toml"
    path.write_text(text, encoding="utf-8")
    return path


class TestEndpointConfig:
    def test_defaults(self) -> None:
        """Defaults: temperature 0, 60 s timeout, 64 in flight, format auto, OpenAI key variable."""
        cfg = EndpointConfig(base_url="https://api.openai.com/v1/", model="gpt-4o-mini")
        assert cfg.base_url == "https://api.openai.com/v1"
        assert cfg.chat_url == "https://api.openai.com/v1/chat/completions"
        assert (cfg.temperature, cfg.timeout_s, cfg.max_in_flight) == (0.0, 60.0, 64)
        assert cfg.api_key_env == "OPENAI_API_KEY"
        assert cfg.effective_format() == "json_schema"

    def test_integer_numbers_coerced(self) -> None:
        """TOML-style integers become floats, so 0 and 0.0 give the same body and fingerprint."""
        cfg = EndpointConfig(base_url="http://x/v1", model="m", temperature=0, timeout_s=30, rpm=60)  # type: ignore[arg-type]
        assert (repr(cfg.temperature), repr(cfg.timeout_s), repr(cfg.rpm)) == ("0.0", "30.0", "60.0")

    def test_perplexity_key_and_text_mode(self) -> None:
        """A Perplexity host defaults to PERPLEXITY_API_KEY and auto resolves to text."""
        cfg = EndpointConfig(base_url="https://api.perplexity.ai", model="sonar")
        assert cfg.api_key_env == "PERPLEXITY_API_KEY"
        assert cfg.effective_format() == "text"

    @pytest.mark.parametrize(
        ("url", "expected"),
        [
            ("HTTPS://API.OpenAI.com/v1/", "https://api.openai.com/v1"),
            ("http://localhost:8000/v1/chat/completions", "http://localhost:8000/v1"),
            ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
        ],
        ids=["case-and-slash", "full-route", "ollama"],
    )
    def test_normalize_base_url(self, url: str, expected: str) -> None:
        """Scheme and host are lowercased; a trailing slash or chat route is removed."""
        assert normalize_base_url(url) == expected

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"base_url": "ftp://x/v1"},
            {"model": ""},
            {"temperature": 3.0},
            {"max_tokens": 0},
            {"timeout_s": 0.0},
            {"rpm": -1.0},
            {"max_in_flight": 0},
            {"response_format": "yaml"},
            {"extra_body": {"model": "other"}},
        ],
        ids=["scheme", "model", "temperature", "max_tokens", "timeout", "rpm", "in-flight", "format",
             "reserved-extra"],
    )
    def test_invalid(self, kwargs: dict[str, object]) -> None:
        """Out-of-range settings raise ConfigError at construction."""
        args: dict[str, object] = {"base_url": "http://localhost:8000/v1", "model": "m", **kwargs}
        with pytest.raises(ConfigError):
            EndpointConfig(**args)  # type: ignore[arg-type]


class TestApiKey:
    def test_resolve(self, monkeypatch) -> None:
        """The key is read from the configured variable, stripped."""
        monkeypatch.setenv("DAHL_TEST_KEY", " sk-abc \n")
        cfg = EndpointConfig(base_url="http://localhost/v1", model="m", api_key_env="DAHL_TEST_KEY")
        assert resolve_api_key(cfg) == "sk-abc"

    def test_missing_names_variable(self, monkeypatch) -> None:
        """A missing key raises ConfigError naming the variable."""
        monkeypatch.delenv("DAHL_TEST_KEY", raising=False)
        cfg = EndpointConfig(base_url="http://localhost/v1", model="m", api_key_env="DAHL_TEST_KEY")
        with pytest.raises(ConfigError, match="DAHL_TEST_KEY"):
            resolve_api_key(cfg)

    def test_keyless_server(self) -> None:
        """An empty api_key_env (local server) resolves to no key."""
        cfg = EndpointConfig(base_url="http://localhost/v1", model="m", api_key_env="")
        assert resolve_api_key(cfg) == ""

    def test_key_id(self) -> None:
        """The key id is 16 hex chars, stable, distinct per key and not the key itself."""
        first = api_key_id("sk-one")
        assert len(first) == 16 and int(first, 16) >= 0
        assert first == api_key_id("sk-one")
        assert first != api_key_id("sk-two")
        assert "sk-one" not in first
        assert api_key_id("") == "nokey"


class TestLoadConfig:
    def test_split_and_check(self, tmp_path: Path) -> None:
        """[default] is merged into both stages; stage keys and extra_body keys win."""
        path = write(tmp_path, """
[default]
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
rpm = 500
extra_body = { user = "dahl" }

[split]
max_tokens = 2048

[check]
base_url = "https://api.perplexity.ai"
model = "sonar"
extra_body = { search_context_size = "low" }
""")
        cfgs = load_config(path)
        split, check = cfgs["split"], cfgs["check"]
        assert (split.model, split.max_tokens, split.rpm) == ("gpt-4o-mini", 2048, 500)
        assert (check.model, check.max_tokens, check.rpm) == ("sonar", 128, 500)
        assert check.api_key_env == "PERPLEXITY_API_KEY"
        assert check.extra_body == {"user": "dahl", "search_context_size": "low"}

    def test_only_check(self, tmp_path: Path) -> None:
        """Without [default], a stage without a table is left out."""
        path = write(tmp_path, '[check]\nbase_url = "http://localhost:8000/v1"\nmodel = "qwen"\n')
        assert list(load_config(path)) == ["check"]

    def test_unknown_key(self, tmp_path: Path) -> None:
        """An unknown key raises ConfigError naming the file, the table and the key."""
        path = write(tmp_path, '[check]\nbase_url = "http://x/v1"\nmodel = "m"\ntemprature = 0\n')
        with pytest.raises(ConfigError, match=r"dahl\.toml: unknown key 'temprature' in \[check\]"):
            load_config(path)

    def test_unknown_table(self, tmp_path: Path) -> None:
        """An unknown table raises ConfigError."""
        with pytest.raises(ConfigError, match=r"unknown table \[splitter\]"):
            load_config(write(tmp_path, "[splitter]\nmodel = 'm'\n"))

    def test_wrong_type(self, tmp_path: Path) -> None:
        """A value of the wrong type raises ConfigError naming the key."""
        path = write(tmp_path, '[check]\nbase_url = "http://x/v1"\nmodel = "m"\nrpm = "fast"\n')
        with pytest.raises(ConfigError, match="rpm must be int or float"):
            load_config(path)

    def test_missing_model(self, tmp_path: Path) -> None:
        """A stage without a model raises ConfigError."""
        with pytest.raises(ConfigError, match=r"\[split\] needs 'model'"):
            load_config(write(tmp_path, '[split]\nbase_url = "http://x/v1"\n'))

    def test_bad_value(self, tmp_path: Path) -> None:
        """A value out of range is reported with file and table."""
        path = write(tmp_path, '[check]\nbase_url = "http://x/v1"\nmodel = "m"\ntemperature = 9.0\n')
        with pytest.raises(ConfigError, match=r"dahl\.toml: \[check\] temperature"):
            load_config(path)

    def test_kind_chooses_the_adapter(self, tmp_path: Path) -> None:
        """kind in [split]/[check] names the adapter; an offline one has no endpoint, and takes no endpoint key."""
        from dahl.config import load_kinds

        path = write(tmp_path, '[default]\nbase_url = "http://x/v1"\nmodel = "m"\n[split]\nkind = "rules"\n'
                               '[check]\nkind = "openai"\nrpm = 5\n')
        assert load_kinds(path, {"split": ("rules", "openai"), "check": ("fake", "openai")}) == {
            "split": "rules", "check": "openai"}
        assert [(stage, cfg.rpm) for stage, cfg in load_config(path).items()] == [("check", 5.0)]
        bad = write(tmp_path, '[check]\nkind = "fake"\nmodel = "m"\n')
        with pytest.raises(ConfigError, match=r'dahl\.toml: \[check\] model: endpoint keys need kind = "openai"'):
            load_config(bad)
        with pytest.raises(ConfigError, match=r"dahl\.toml: \[check\] kind must be one of fake, openai, got 'replay'"):
            load_kinds(write(tmp_path, '[check]\nkind = "replay"\n'), {"split": (), "check": ("fake", "openai")})

    def test_bad_toml_and_missing_file(self, tmp_path: Path) -> None:
        """Invalid TOML and a missing file raise ConfigError."""
        with pytest.raises(ConfigError, match="invalid TOML"):
            load_config(write(tmp_path, "[check\n"))
        with pytest.raises(ConfigError, match="cannot read"):
            load_config(tmp_path / "absent.toml")
