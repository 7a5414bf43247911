"""B5 crash/resume: ``kill -9`` a running ``dahl score`` N times, Ctrl-C it once, finish it.

Against one mock process (20 ms fixed latency, zero faults) the scenario runs the CLI
as a subprocess::

    dahl score answers.jsonl -o OUT --splitter given --checker openai \\
        --base-url MOCK --model mock --api-key-env '' --cache-dir CACHE --no-progress

1. Crash chain: N times (quick 3, full 20) it starts the command, waits for the run's
   first request at the mock, sleeps a seeded random 0.05-1.0 s and sends SIGKILL. Per
   crash it records the requests the mock received during that run (``/stats``) and the
   verdicts that reached the cache (rows holding a Verdict: one row per verdict, its raw
   reply included; answers stored whole are not counted). Requests lost by a crash = sent - stored; those
   claims are asked again by a later run.
2. Ctrl-C: once more the same command, SIGINT a random 0.05-0.3 s after its first request; exit status must
   be 130 with the "interrupted" message, and the requests lost by it counted the same way.
3. The same command once more, to completion (exit 0).
4. Reference: the same input, uninterrupted, into a FRESH output folder and a FRESH
   cache. A fresh cache makes the reference independent of the chain (nothing it
   produced is reused), so equal outputs show that crashing and resuming changes no
   result. ``answers.jsonl`` must be byte-identical (dahl rewrites it in input order at
   the end) and ``summary.json`` equal except ``run``, ``changes`` and ``config.inputs``.

Bound on requests lost per crash: one flush batch as issue 4 sets it (≤ 500 results or
≤ 0.25 s). dahl's cache writer closes a batch at 500 results or when its first result is
0.15 s old, so that with the commit's own duration a result is on disk within 0.25 s:
a kill loses at most min(500, 0.25 s × rate) results at a rate of ``rate`` claims/s
(the reference run's), plus the requests in flight at the kill (answered later or never: up to
``--max-in-flight`` = 64), plus results handed to a commit that the kill interrupted
(the same batch). Bound used: min(500, 0.25·rate) + 64 requests.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.scenarios.common import REPO, Figure, MockProcess, ScenarioResult, rounded, scenario_main, write_answers

NAME = "b5_crash"
#: (claims, SIGKILLs) per size.
SIZES = {"tiny": (2500, 1), "quick": (10000, 3), "full": (30000, 20)}
LATENCY_MS = 20
IN_FLIGHT = 64
FLUSH_ITEMS = 500
FLUSH_INTERVAL_S = 0.25
KILL_DELAY_S = (0.05, 1.0)
CTRL_C_DELAY_S = (0.05, 0.3)
SEED = 5
#: summary.json fields allowed to differ between the resumed and the reference run.
VOLATILE = ("run", "changes")


def dahl_command(answers: Path, out: Path, cache: Path, url: str) -> list[str]:
    """argv of ``dahl score`` (given Splitter, openai Checker on the mock, explicit cache folder)."""
    return [
        sys.executable, "-c", "import sys; from dahl.cli import main; sys.exit(main())",
        "score", str(answers), "-o", str(out), "--splitter", "given", "--checker", "openai",
        "--base-url", url, "--model", "mock", "--api-key-env", "", "--cache-dir", str(cache),
        "--max-in-flight", str(IN_FLIGHT), "--no-progress",
    ]


def cached_verdicts(cache: Path) -> int:
    """Verdicts stored in the cache folder (rows holding a Verdict; answers stored whole are not counted); 0 if absent."""
    import sqlite3

    from dahl.cache._table import DB_NAME, ENVELOPE_DECODER
    from dahl.records import Verdict

    path = cache / DB_NAME
    if not path.exists():
        return 0
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT value FROM entries")
        return sum(isinstance(ENVELOPE_DECODER.decode(value).value, Verdict) for (value,) in rows)
    finally:
        con.close()


async def _start(argv: list[str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )


async def _requests(mock: MockProcess) -> int:
    return int((await mock.stats())["requests"])


async def interrupted_run(
    argv: list[str], mock: MockProcess, cache: Path, sig: signal.Signals, delay_s: float
) -> dict[str, Any]:
    """Start ``argv``; ``delay_s`` after its first request reaches the mock, send ``sig``.

    Returns:
        ``{"signal", "delay_s", "sent", "stored", "lost", "returncode", "output", "finished"}``;
        ``finished`` is True when the run ended before the signal (nothing was interrupted).
    """
    sent0 = await _requests(mock)
    stored0 = await asyncio.to_thread(cached_verdicts, cache)
    proc = await _start(argv)
    deadline = time.monotonic() + 30.0
    while proc.returncode is None and await _requests(mock) == sent0 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(delay_s)
    finished = proc.returncode is not None
    if not finished:
        proc.send_signal(sig)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 30.0)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
    await asyncio.sleep(0.05)  # let the mock finish counting requests cut by the kill
    sent = await _requests(mock) - sent0
    stored = await asyncio.to_thread(cached_verdicts, cache) - stored0
    return {
        "signal": sig.name, "delay_s": delay_s, "sent": sent, "stored": stored, "lost": sent - stored,
        "returncode": proc.returncode, "finished": finished,
        "output": (out + err).decode(errors="replace")[-600:],
    }


async def complete_run(argv: list[str], mock: MockProcess, out_dir: Path) -> dict[str, Any]:
    """Run ``argv`` to the end; its requests at the mock, exit status and summary ``run`` block."""
    sent0 = await _requests(mock)
    t0 = time.monotonic()
    proc = await _start(argv)
    out, err = await proc.communicate()
    wall = time.monotonic() - t0
    summary_path = out_dir / "summary.json"
    run = json.loads(summary_path.read_text())["run"] if summary_path.exists() else {}
    return {
        "sent": await _requests(mock) - sent0, "returncode": proc.returncode, "wall_s": wall, "run": run,
        "output": (out + err).decode(errors="replace")[-600:],
    }


def _comparable_summary(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    for key in VOLATILE:
        data.pop(key, None)
    data.get("config", {}).pop("inputs", None)
    return data


def _count_labels(path: Path) -> int:
    with path.open(encoding="utf-8") as fh:
        return sum(1 for line in fh for c in json.loads(line)["claims"] if c.get("label"))


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B5 at ``size``; see the module docstring for the steps and the bound."""
    result = ScenarioResult(NAME, size)
    n_claims, n_kills = SIZES[size]
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background by a shell (SIGINT ignored, and inherited as ignored by
        # every dahl run): restore it, or the Ctrl-C step would measure the shell, not dahl.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    answers = workdir / "answers.jsonl"
    write_answers(answers, n_claims, seed=SEED)
    rng = random.Random(SEED)
    out, cache = workdir / "out", workdir / "cache"
    ref_out, ref_cache = workdir / "ref-out", workdir / "ref-cache"
    async with MockProcess(["--latency-ms", str(LATENCY_MS), "--seed", str(SEED)]) as mock:
        argv = dahl_command(answers, out, cache, mock.url)
        crashes = []
        for _ in range(n_kills):
            crashes.append(await interrupted_run(argv, mock, cache, signal.SIGKILL, rng.uniform(*KILL_DELAY_S)))
        ctrl_c = await interrupted_run(argv, mock, cache, signal.SIGINT, rng.uniform(*CTRL_C_DELAY_S))
        final = await complete_run(argv, mock, out)
        chain_requests = sum(c["sent"] for c in crashes) + ctrl_c["sent"] + final["sent"]
        reference = await complete_run(dahl_command(answers, ref_out, ref_cache, mock.url), mock, ref_out)

    killed = [c for c in crashes if not c["finished"]]
    answers_equal = (out / "answers.jsonl").read_bytes() == (ref_out / "answers.jsonl").read_bytes()
    summary_equal = _comparable_summary(out / "summary.json") == _comparable_summary(ref_out / "summary.json")
    rate = reference["run"].get("claims_done", 0) / max(reference["run"].get("elapsed_s", 0.0), 1e-9)
    bound = min(FLUSH_ITEMS, FLUSH_INTERVAL_S * rate) + IN_FLIGHT
    lost = [c["lost"] for c in killed]
    mean_lost = sum(lost) / len(lost) if lost else None
    result.claims_in = n_claims
    result.claims_out = _count_labels(out / "answers.jsonl") if final["returncode"] == 0 else 0
    sigint_ok = ctrl_c["returncode"] == 130 and "interrupted" in ctrl_c["output"] and not ctrl_c["finished"]
    result.figures += [
        Figure.make("SIGKILLs that hit a running scoring run", float(len(killed)), float(n_kills), ">= 1.0"),
        Figure.make("requests lost per kill (mean) vs one flush batch + in flight", mean_lost, bound, "<= 1.0"),
        Figure.make("requests lost per kill (max) vs one flush batch + in flight", max(lost, default=None), bound),
        Figure.make("requests re-sent in total (chain requests - unique claims)", float(chain_requests - n_claims)),
        Figure.make("answers.jsonl byte-identical to an uninterrupted run (1 = yes)", float(answers_equal), None, ">= 1"),
        Figure.make("summary.json equal except run/changes/config.inputs (1 = yes)", float(summary_equal), None, ">= 1"),
        Figure.make("Ctrl-C: exit 130 with the 'interrupted' message (1 = yes)", float(sigint_ok), None, ">= 1"),
        Figure.make("Ctrl-C: requests lost (sent - stored) vs in flight", float(ctrl_c["lost"]), float(IN_FLIGHT), "<= 1.0"),
        Figure.make("uninterrupted run: requests vs unique claims", float(reference["sent"]), float(n_claims), "<= 1.0"),
        Figure.make("uninterrupted run claims/s (20 ms latency, C=64)", rate),
    ]
    result.runs = rounded({
        "crashes": crashes, "ctrl_c": ctrl_c, "final": final, "reference": reference,
        "bound_requests": bound, "chain_requests": chain_requests,
    })
    result.notes.append(
        f"bound = min({FLUSH_ITEMS}, {FLUSH_INTERVAL_S} s × {rate:.0f} claims/s) + {IN_FLIGHT} in flight = {bound:.0f} requests."
    )
    if final["returncode"] != 0:
        result.notes.append(f"final run exited {final['returncode']}: {final['output'][-300:]}")
    return result


def main() -> int:
    """``python -m bench.scenarios.b5_crash --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
