"""The peers' virtualenv: where its interpreter is found, what a missing peer says, and a peer
worker that runs without dahl."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import peers_env
from bench.scenarios import clients, peers

REPO = Path(__file__).resolve().parents[2]


def _fake_venv(root: Path) -> Path:
    python = root / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    python.parent.mkdir(parents=True)
    python.write_text("")
    return python


class TestPeersPython:
    def test_environment_variable_wins(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """$DAHL_BENCH_PEERS_PYTHON names the interpreter even when bench/.peers-venv exists."""
        monkeypatch.setattr(peers_env, "PEERS_VENV", tmp_path / "venv")
        _fake_venv(tmp_path / "venv")
        monkeypatch.setenv("DAHL_BENCH_PEERS_PYTHON", "/opt/peers/bin/python")
        assert peers_env.peers_python() == "/opt/peers/bin/python"

    def test_made_virtualenv(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the variable, the virtualenv that peers-setup made is used."""
        monkeypatch.delenv("DAHL_BENCH_PEERS_PYTHON", raising=False)
        monkeypatch.setattr(peers_env, "PEERS_VENV", tmp_path / "venv")
        python = _fake_venv(tmp_path / "venv")
        assert peers_env.peers_python() == str(python)

    def test_none_without_either(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """No variable and no virtualenv: None (no path of some other machine)."""
        monkeypatch.delenv("DAHL_BENCH_PEERS_PYTHON", raising=False)
        monkeypatch.setattr(peers_env, "PEERS_VENV", tmp_path / "absent")
        assert peers_env.peers_python() is None


class TestMissingPeer:
    def test_row_says_how_to_install(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A peer whose module is nowhere is reported with the setup command, and dahl still runs here."""
        monkeypatch.delenv("DAHL_BENCH_PEERS_PYTHON", raising=False)
        monkeypatch.setattr(peers_env, "PEERS_VENV", tmp_path / "absent")
        monkeypatch.setitem(peers._MODULES, "litellm", "no_such_module_for_dahl_tests")
        assert peers._python_for("litellm") == (None, "not installed: run python -m bench peers-setup")
        assert peers._python_for("dahl") == (sys.executable, None)

    async def test_missing_peer_is_a_row_of_the_table(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The suite's printed table has a row per workload saying how to install a missing peer."""
        from bench import suite

        monkeypatch.delenv("DAHL_BENCH_PEERS_PYTHON", raising=False)
        monkeypatch.setattr(peers_env, "PEERS_VENV", tmp_path / "absent")
        monkeypatch.setitem(peers._MODULES, "litellm", "no_such_module_for_dahl_tests")
        result = await peers.run("tiny", tmp_path, clients=("dahl", "litellm"))
        table = suite.format_table([result.as_dict(1.0)])
        for workload in ("b1", "b2", "b3"):
            row = f"| peers | {workload} litellm claims/s: not installed: run python -m bench peers-setup | - |"
            assert row in table
        assert result.claims_in == result.claims_out == 100 + 100 + 20

    def test_worker_import_error_names_the_setup(self) -> None:
        """A peer worker that died on a missing module is reported with the setup command."""
        run = {"crashed": True, "stderr": "Traceback...\nModuleNotFoundError: No module named 'litellm'\n"}
        assert peers._why_failed(run) == peers_env.SETUP_HINT


class TestTiktokenCache:
    def test_finds_litellm_tokenizers(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The folder of encodings inside an importable litellm package is found, litellm not imported."""
        tokenizers = tmp_path / "litellm" / "litellm_core_utils" / "tokenizers"
        tokenizers.mkdir(parents=True)
        (tmp_path / "litellm" / "__init__.py").write_text("raise SystemExit('imported')\n")
        monkeypatch.setenv("PYTHONPATH", str(tmp_path))
        assert peers_env.tiktoken_cache_dir(sys.executable) == str(tokenizers)

    def test_none_without_litellm(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An interpreter without litellm gives None, and so does one that cannot start."""
        monkeypatch.setenv("PYTHONPATH", str(tmp_path))
        if importlib.util.find_spec("litellm") is not None:
            pytest.skip("litellm is installed in this environment")
        assert peers_env.tiktoken_cache_dir(sys.executable) is None
        assert peers_env.tiktoken_cache_dir(str(tmp_path / "no-python")) is None


class TestPeerWorkerWithoutDahl:
    def test_openai_worker_runs_where_dahl_cannot_be_imported(self, tmp_path: Path, mocks: Any) -> None:
        """The openai peer's worker sends the 30 bodies written for it with every dahl import blocked."""
        pytest.importorskip("openai")
        from bench.scenarios.common import write_answers

        url = mocks.start()
        write_answers(tmp_path / "answers.jsonl", 30)
        assert clients.write_bodies(tmp_path / "answers.jsonl", url, tmp_path / "bodies.json") == 30
        spec = {"kind": "openai", "answers": str(tmp_path / "answers.jsonl"), "url": url, "concurrency": 4,
                "rpm": None, "tpm": None, "limit": None, "out_dir": str(tmp_path / "out"),
                "bodies": str(tmp_path / "bodies.json")}
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        code = ("import sys; sys.modules['dahl'] = None; from bench.scenarios import clients; "
                "sys.exit(clients.main(sys.argv[1:]))")
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "spec.json"), str(tmp_path / "report.json")],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads((tmp_path / "report.json").read_text())
        assert (report["claims_in"], report["claims_out"], report["failed"]) == (30, 30, 0)
        assert mocks.stats(url)["check"] == 30
