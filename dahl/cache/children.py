"""The cache's child processes: how they start, what they inherit, how they stop.

Both children (:mod:`dahl.cache.remote`'s lookup process and :mod:`dahl.cache.whole_input`'s
input process) run their module as ``__main__`` under ``python -P``, not :mod:`multiprocessing` (whose ``spawn``
re-imports the caller's main script): ``-P`` keeps a ``dahl/`` in the working folder from
shadowing the parent's package, the environment holds no API key, and a session of their
own keeps a terminal's Ctrl-C for the parent, which stops them. They exit when the parent
closes their pipes, so a killed run leaves no process behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from dahl.cache.lookup_child import package_root, read_frame

__all__ = ["await_hello", "child_environment", "cpu_seconds", "exit_status", "spawn", "stop"]

#: Environment variables a child inherits (no API key): these names, and those starting
#: with a prefix of :data:`_CHILD_ENV_PREFIXES` (the interpreter's and the loader's settings),
#: unless the name looks like a secret's (:data:`_SECRET_NAME`, e.g. ``PYTHON_API_KEY``).
_CHILD_ENV = frozenset({"PATH", "HOME", "LANG", "TMPDIR", "TZ", "SYSTEMROOT", "VIRTUAL_ENV", "CONDA_PREFIX"})
_CHILD_ENV_PREFIXES = ("PYTHON", "LC_", "LD_", "DYLD_")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH", re.IGNORECASE)

#: The child's ``-c`` program: put the parent's package folder first on ``sys.path`` (an
#: argument, not ``PYTHONPATH``, which would split a folder name holding ``os.pathsep``),
#: then run the module as ``__main__`` with the remaining arguments.
_BOOT = (
    "import runpy, sys; sys.path.insert(0, sys.argv[1]); module = sys.argv[2]; del sys.argv[1:3]; "
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def child_environment(parent: Mapping[str, str]) -> dict[str, str]:
    """A child's environment: what Python needs from ``parent``, never a secret."""
    return {
        k: v
        for k, v in parent.items()
        if (k in _CHILD_ENV or k.startswith(_CHILD_ENV_PREFIXES)) and not _SECRET_NAME.search(k)
    }


def spawn(module: str, *args: str) -> subprocess.Popen[bytes]:
    """Start ``module`` as ``__main__`` with ``args``, pipes on stdin and stdout (stderr dropped).

    The child imports the parent's ``dahl`` (its folder goes first on ``sys.path``), even
    when that is not installed; ``-P`` keeps the working folder off ``sys.path``.

    Raises:
        OSError: the process cannot be created.
    """
    return subprocess.Popen(
        [sys.executable, "-P", "-c", _BOOT, package_root(), module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_environment(os.environ),
        start_new_session=True,
    )


def await_hello(proc: subprocess.Popen[bytes], prefix: bytes, timeout_s: float) -> None:
    """Read a child's first frame: ``prefix`` and the folder of the ``dahl`` it imported (blocking).

    Raises:
        RuntimeError: it did not start (no such frame within ``timeout_s`` seconds of
            silence, or it ended), or it runs dahl from another folder than the parent's.
        TimeoutError, ValueError: from :func:`~dahl.cache.lookup_child.read_frame`.
    """
    assert proc.stdout is not None
    hello = read_frame(proc.stdout.fileno(), timeout_s)
    if hello is None or not hello.startswith(prefix):
        raise RuntimeError(f"it did not start (exit status {exit_status(proc)})")
    root = hello[len(prefix) :].decode(errors="replace")
    if root != package_root():
        raise RuntimeError(f"it runs dahl from {root}, not from {package_root()}")


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 2.0) -> None:
    """Wait up to ``timeout_s`` seconds for ``proc`` to end (its input closed), then kill it."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def exit_status(proc: subprocess.Popen[bytes]) -> int | None:
    """``proc``'s exit status, waiting up to a second for a dying child to be reaped; None if it runs on."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        return proc.wait(timeout=1.0)
    return None


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) a live process used so far; None where /proc is absent."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
