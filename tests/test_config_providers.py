"""Endpoint providers, auth schemes and custom headers: defaults, TOML, env references, fingerprints, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.adapters._bodies import endpoint_fingerprint
from dahl.adapters._route import ChatRoute
from dahl.cli import main
from dahl.config import EndpointConfig, endpoint_configs, load_config, resolve_api_key, resolve_headers
from dahl.errors import ConfigError


class TestProvider:
    def test_inferred_from_the_anthropic_host(self) -> None:
        """api.anthropic.com: provider anthropic, key in x-api-key from ANTHROPIC_API_KEY, POST /messages, tool JSON."""
        cfg = EndpointConfig(base_url="https://api.anthropic.com/v1", model="claude-3-5-haiku-latest")
        assert (cfg.provider, cfg.auth, cfg.api_key_env, cfg.request_url, cfg.effective_format()) == (
            "anthropic", "x-api-key", "ANTHROPIC_API_KEY", "https://api.anthropic.com/v1/messages", "json_schema")

    def test_explicit_anthropic_on_another_host_reads_anthropic_api_key(self) -> None:
        """provider anthropic on a proxy or mock host: key from ANTHROPIC_API_KEY, in x-api-key, POST /messages."""
        cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", provider="anthropic")
        assert (cfg.auth, cfg.api_key_env, cfg.request_url) == ("x-api-key", "ANTHROPIC_API_KEY",
                                                                "http://127.0.0.1:9/v1/messages")

    def test_other_hosts_stay_openai(self) -> None:
        """Any other host: provider openai, bearer auth, POST /chat/completions."""
        cfg = EndpointConfig(base_url="http://localhost:8000/v1", model="m")
        assert (cfg.provider, cfg.auth, cfg.api_key_env, cfg.request_url) == (
            "openai", "bearer", "OPENAI_API_KEY", "http://localhost:8000/v1/chat/completions")

    def test_unknown_values_are_refused(self) -> None:
        """An unknown provider or auth scheme is a ConfigError listing the choices."""
        with pytest.raises(ConfigError, match="provider must be one of openai, anthropic, got 'gemini'"):
            EndpointConfig(base_url="http://x/v1", model="m", provider="gemini")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="auth must be one of bearer, api-key, x-api-key, none, got 'basic'"):
            EndpointConfig(base_url="http://x/v1", model="m", auth="basic")  # type: ignore[arg-type]

    def test_fingerprint_names_a_non_openai_provider_and_never_headers(self) -> None:
        """The fingerprint ends |provider=anthropic for anthropic, is unchanged for openai, and holds no header or auth."""
        plain = EndpointConfig(base_url="http://x/v1", model="m")
        dressed = EndpointConfig(base_url="http://x/v1", model="m", auth="api-key", headers={"X-T": "secret-value"})
        claude = EndpointConfig(base_url="http://x/v1", model="m", provider="anthropic", response_format="text")
        assert endpoint_fingerprint(dressed, "check") == endpoint_fingerprint(plain, "check")
        assert endpoint_fingerprint(claude, "check") == endpoint_fingerprint(plain, "check") + "|provider=anthropic"


class TestRouteUrl:
    def test_query_stays_at_the_end(self) -> None:
        """An Azure deployment URL with ?api-version=: the route path goes before the query."""
        cfg = EndpointConfig(base_url="https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
                             model="gpt-4o-mini", auth="api-key")
        assert cfg.chat_url == "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"


class TestAuthAndKeys:
    def test_auth_none_reads_no_key(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """auth none overrides api_key_env: no variable read, key ''."""
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        cfg = EndpointConfig(base_url="http://x/v1", model="m", auth="none", api_key_env="OPENAI_API_KEY")
        assert (cfg.api_key_env, resolve_api_key(cfg)) == ("", "")

    def test_missing_key_says_how_to_go_keyless(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The unset-key error names the variable and both keyless spellings."""
        monkeypatch.delenv("DAHL_UNSET_KEY", raising=False)
        cfg = EndpointConfig(base_url="http://localhost:8000/v1", model="m", api_key_env="DAHL_UNSET_KEY")
        with pytest.raises(ConfigError) as info:
            resolve_api_key(cfg)
        assert str(info.value) == (
            "environment variable DAHL_UNSET_KEY is not set or empty; it must hold the API key for "
            "http://localhost:8000/v1 (a keyless local server such as vLLM or Ollama: pass --api-key-env '' "
            'or set auth = "none" in the --config table)')

    @pytest.mark.parametrize(("auth", "expected"), [
        ("bearer", {"Authorization": "Bearer k-1"}), ("api-key", {"api-key": "k-1"}),
        ("x-api-key", {"x-api-key": "k-1"}), ("none", {}),
    ], ids=["bearer", "azure", "anthropic-style", "none"])
    def test_key_header_per_scheme(self, monkeypatch: pytest.MonkeyPatch, auth: str, expected: dict[str, str]) -> None:
        """Each auth scheme puts the key in its own header (none: no key header)."""
        monkeypatch.setenv("DAHL_K", "k-1")
        cfg = EndpointConfig(base_url="http://x/v1", model="m", auth=auth, api_key_env="DAHL_K")  # type: ignore[arg-type]
        headers = dict(ChatRoute(cfg).headers)
        assert headers == {"Content-Type": "application/json", "Accept": "application/json", **expected}


class TestHeaders:
    def test_env_references_are_resolved(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """${NAME} is replaced by the variable, several per value; literal text is kept."""
        monkeypatch.setenv("DAHL_TOKEN", "t0k")
        cfg = EndpointConfig(base_url="http://x/v1", model="m",
                             headers={"X-Proxy-Token": "${DAHL_TOKEN}", "X-Pair": "a-${DAHL_TOKEN}-${DAHL_TOKEN}",
                                      "X-Title": "dahl"})
        assert resolve_headers(cfg) == {"X-Proxy-Token": "t0k", "X-Pair": "a-t0k-t0k", "X-Title": "dahl"}

    def test_unset_reference_names_header_and_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An unset variable: ConfigError naming the header, the endpoint and the variable."""
        monkeypatch.delenv("DAHL_NOPE", raising=False)
        cfg = EndpointConfig(base_url="http://x/v1", model="m", headers={"X-T": "${DAHL_NOPE}"})
        with pytest.raises(ConfigError, match=r"^header X-T of http://x/v1 needs environment variable DAHL_NOPE, "
                                              r"which is not set$"):
            resolve_headers(cfg)

    def test_bad_header_values_are_refused(self) -> None:
        """A non-string value, or an unclosed ${, is refused when the config is built."""
        with pytest.raises(ConfigError, match="headers must map names to strings; 'X-N' does not"):
            EndpointConfig(base_url="http://x/v1", model="m", headers={"X-N": 3})  # type: ignore[dict-item]
        with pytest.raises(ConfigError, match=r"header X-T: write an environment variable as \$\{NAME\}"):
            EndpointConfig(base_url="http://x/v1", model="m", headers={"X-T": "${OOPS"})

    @pytest.mark.parametrize(("headers", "message"), [
        ({"X A": "1"}, "header 'X A': a header name is letters, digits and !#$%&'*+-.^_`|~ only"),
        ({"X-A:": "1"}, "header 'X-A:': a header name is"),
        ({"X-A": "a\nb"}, "header X-A: its value holds a line break or NUL"),
        ({"X-A": "a\rb"}, "header X-A: its value holds a line break or NUL"),
    ], ids=["space-in-name", "colon-in-name", "newline-in-value", "cr-in-value"])
    def test_names_and_values_that_would_split_the_request_are_refused(
            self, headers: dict[str, str], message: str) -> None:
        """A name that is not an HTTP token, or a value with CR/LF, is refused when the config is built."""
        with pytest.raises(ConfigError) as info:
            EndpointConfig(base_url="http://x/v1", model="m", headers=headers)
        assert str(info.value).startswith(message)

    def test_variable_holding_a_line_break_names_header_and_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A ${NAME} whose value holds a newline: ConfigError naming header and variable, not the value."""
        monkeypatch.setenv("DAHL_TWO_LINES", "sec\nret")
        cfg = EndpointConfig(base_url="http://x/v1", model="m", headers={"X-T": "${DAHL_TWO_LINES}"})
        with pytest.raises(ConfigError, match=r"^header X-T of http://x/v1: environment variable DAHL_TWO_LINES "
                                              r"holds a line break or NUL$"):
            resolve_headers(cfg)

    def test_toml_tables_merge_key_by_key(self, tmp_path: Path) -> None:
        """[default] headers merge under a stage's own; provider and auth are read."""
        path = tmp_path / "dahl.toml"
        path.write_text(
            '[default]\nbase_url = "https://r.openai.azure.com/openai/deployments/d"\nmodel = "gpt-4o-mini"\n'
            'auth = "api-key"\nheaders = { "X-A" = "1", "X-B" = "2" }\n'
            '[check]\nheaders = { "X-B" = "3" }\n'
            '[split]\nbase_url = "http://localhost:9/v1"\nprovider = "anthropic"\n')
        stages = load_config(path)
        assert (stages["check"].auth, stages["check"].headers) == ("api-key", {"X-A": "1", "X-B": "3"})
        assert (stages["split"].provider, stages["split"].request_url) == ("anthropic", "http://localhost:9/v1/messages")

    def test_command_line_headers_add_to_the_file(self, tmp_path: Path) -> None:
        """--header values join the file's headers (the command line wins per name)."""
        path = tmp_path / "dahl.toml"
        path.write_text('[check]\nbase_url = "http://x/v1"\nmodel = "m"\nheaders = { "X-A" = "1", "X-B" = "2" }\n')
        cfg = endpoint_configs(path, {"headers": {"X-B": "9", "X-C": "3"}}, stages=("check",))["check"]
        assert cfg.headers == {"X-A": "1", "X-B": "9", "X-C": "3"}


class TestCommandLine:
    def test_provider_auth_and_header_flags_reach_the_endpoint(
        self, tmp_path: Path, mocks: Any, monkeypatch: pytest.MonkeyPatch, private_cache_dir: Path
    ) -> None:
        """dahl score --provider anthropic --header: requests go to /v1/messages; neither secret in any output or cache file."""
        monkeypatch.setenv("DAHL_CLI_KEY", "sk-ant-cli-0123456789")
        monkeypatch.setenv("DAHL_CLI_PROXY", "proxy-cli-secret-0123")
        answers = tmp_path / "answers.jsonl"
        answers.write_text(json.dumps({"id": "a", "question": "Q?", "response": "R.", "claims": [{"text": "R."}]}) + "\n")
        url = mocks.start("--echo-auth")
        result = CliRunner().invoke(main, [
            "score", str(answers), "--splitter", "given", "--checker", "openai", "--base-url", url, "--model", "m",
            "--provider", "anthropic", "--api-key-env", "DAHL_CLI_KEY", "--header", "X-Proxy=${DAHL_CLI_PROXY}",
            "-o", str(tmp_path / "out"), "--no-progress"])
        assert result.exit_code == 0, result.output
        claim = json.loads((tmp_path / "out" / "answers.jsonl").read_text())["claims"][0]
        assert json.loads(claim["raw"])["echo"] == {"x-api-key": "***", "anthropic-version": "2023-06-01",
                                                     "x-proxy": "***"}
        stats = mocks.stats(url)
        assert (stats["check"], stats["status"]) == (1, {"200": 1})
        files = [p for root in (tmp_path / "out", private_cache_dir) for p in root.rglob("*") if p.is_file()]
        assert any(p.name.startswith("cache.db") for p in files)
        assert [p.name for p in files if b"proxy-cli-secret" in p.read_bytes() or b"sk-ant-cli" in p.read_bytes()] == []

    def test_bad_header_flag_is_a_usage_error(self, tmp_path: Path) -> None:
        """--header without '=' exits 2 naming the value."""
        result = CliRunner().invoke(main, ["score", "x.jsonl", "-o", str(tmp_path / "o"), "--header", "X-A"])
        assert result.exit_code == 2 and "'X-A' is not NAME=VALUE" in result.output

    def test_header_value_with_a_newline_exits_2_before_any_request(
            self, tmp_path: Path, mocks: Any, private_cache_dir: Path) -> None:
        """--header 'X-A=a<LF>b' exits 2 with one line naming the header and sends nothing (was a traceback, exit 1)."""
        answers = tmp_path / "answers.jsonl"
        answers.write_text(json.dumps({"id": "a", "question": "Q?", "response": "R.", "claims": [{"text": "R."}]}) + "\n")
        url = mocks.start()
        result = CliRunner().invoke(main, [
            "score", str(answers), "--splitter", "given", "--checker", "openai", "--base-url", url, "--model", "m",
            "--api-key-env", "", "--header", "X-A=a\nb", "-o", str(tmp_path / "out"), "--no-progress"])
        assert result.exit_code == 2, result.output
        assert "header X-A: its value holds a line break or NUL" in result.output
        assert mocks.stats(url)["check"] == 0
