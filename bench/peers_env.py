"""The peers' virtualenv: the other clients the suite measures, kept out of dahl's environment.

LiteLLM pins exact aiohttp and click versions and curator pins others, which would
downgrade dahl's own environment, so the peers live in a virtualenv of their own under
``bench/.peers-venv`` (ignored by git), made by ``python -m bench peers-setup`` from the
interpreter that runs the suite. The peer workers never import dahl: the orchestrator
writes the request bodies they send (:mod:`bench.scenarios.clients`).

curator builds a tiktoken encoding (``cl100k_base``) when it starts, and tiktoken downloads
it unless it finds the file in ``$TIKTOKEN_CACHE_DIR``. LiteLLM ships that file in its
wheel (``litellm/litellm_core_utils/tokenizers``, named as tiktoken's cache names it), so
:func:`tiktoken_cache_dir` points the workers there and nothing is fetched at run time.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["PEER_PACKAGES", "PEERS_VENV", "SETUP_HINT", "peers_python", "setup_peers", "tiktoken_cache_dir"]

log = logging.getLogger(__name__)

#: Where ``python -m bench peers-setup`` makes the peers' virtualenv.
PEERS_VENV = Path(__file__).resolve().parent / ".peers-venv"
#: What the peers' virtualenv holds: the official SDK, LiteLLM, curator, and the
#: worker's own needs (aiohttp for the bench helpers).
PEER_PACKAGES = ("openai>=1.40", "litellm>=1.50", "bespokelabs-curator>=0.1.20", "aiohttp>=3.9")
#: What a peer row says when its client cannot be found.
SETUP_HINT = "not installed: run python -m bench peers-setup"


def _venv_python(root: Path) -> Path:
    """The interpreter of the virtualenv at ``root`` (``Scripts\\python.exe`` on Windows)."""
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def peers_python() -> str | None:
    """Interpreter of the peers' virtualenv, or None when there is none.

    ``$DAHL_BENCH_PEERS_PYTHON`` when set, else ``bench/.peers-venv``'s interpreter when
    ``python -m bench peers-setup`` made it.
    """
    env = os.environ.get("DAHL_BENCH_PEERS_PYTHON")
    if env:
        return env
    python = _venv_python(PEERS_VENV)
    return str(python) if python.exists() else None


def tiktoken_cache_dir(python: str) -> str | None:
    """The folder of tiktoken encodings LiteLLM ships in ``python``'s environment, or None.

    Asked of that interpreter (it may be another virtualenv) without importing LiteLLM.
    """
    code = (
        "import importlib.util, pathlib; s = importlib.util.find_spec('litellm'); "
        "print(pathlib.Path(s.origin).parent / 'litellm_core_utils' / 'tokenizers' if s and s.origin else '')"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    folder = out.strip()
    return folder if folder and Path(folder).is_dir() else None


def setup_peers(root: Path = PEERS_VENV, packages: tuple[str, ...] = PEER_PACKAGES) -> Path:
    """Make (or bring up to date) the peers' virtualenv at ``root``; return its interpreter.

    Args:
        root: the virtualenv's folder; made with this interpreter's ``venv`` if absent,
            reused (and its packages upgraded to ``packages``) if present.
        packages: pip requirement specifiers to install.

    Raises:
        subprocess.CalledProcessError: pip failed (its output went to stderr).
    """
    python = _venv_python(root)
    if not python.exists():
        log.info("creating %s", root)
        venv.EnvBuilder(with_pip=True, clear=False).create(root)
    log.info("installing %s into %s", " ".join(packages), root)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True, stdout=sys.stderr)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *packages], check=True, stdout=sys.stderr)
    return python
