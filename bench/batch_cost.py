"""Cost and wall time per 1M claims: online checks vs the batch API, against the mock server.

    python -m bench.batch_cost [--quick] [--claims N] [--latency-ms MS] [--batch-complete-s S]

Each step runs as its own ``python -m dahl`` process against one mock server
(``bench.mockserver``, loopback) on seeded generated answers with given claims
(``--splitter given --checker openai``), so only check requests are sent:

- online: ``dahl score`` (64 requests in flight, the mock's fixed latency per request);
- batch: ``dahl batch prepare``, ``submit``, ``collect`` (polled until the batches
  end, ``--batch-complete-s`` after creation), then ``dahl score`` from the cache.

Prices are MOCK prices, stated in the output (USD per million tokens: input 0.15,
output 0.60, batch 50 % of that: OpenAI's published gpt-4o-mini list price and batch
discount, used only as an example). Tokens are the mock's reported usage. Per 1M
claims, cost scales linearly; online wall time scales linearly (latency-bound at a
fixed number in flight); batch wall time is the local work scaled linearly plus one
provider turnaround (the batches of a wave run side by side at the provider; real
turnaround is up to 24 h, the mock's is ``--batch-complete-s``). Process start-up
(``python -m dahl --version``, measured) is taken out of every step before scaling:
it does not grow with claims. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.request import urlopen

REPO = Path(__file__).resolve().parents[1]

#: Mock prices, USD per million tokens, and the batch discount (a fraction of the online price).
PRICES = {"input_usd_per_mtok": 0.15, "output_usd_per_mtok": 0.60, "batch_price_fraction": 0.5}
CLAIMS_PER_ANSWER = 20


def _answers(path: Path, claims: int) -> None:
    """Answers with given claims, ``CLAIMS_PER_ANSWER`` distinct claims each (deterministic)."""
    with path.open("w") as handle:
        for a in range(-(-claims // CLAIMS_PER_ANSWER)):
            texts = [f"Entity {a} holds property number {c} of its kind." for c in range(CLAIMS_PER_ANSWER)]
            texts = texts[: claims - a * CLAIMS_PER_ANSWER]
            handle.write(json.dumps({"id": f"a{a}", "question": f"Tell me about entity {a}.",
                                     "response": " ".join(texts), "model": "bench", "claims": texts}) + "\n")


def _dahl(*args: str) -> tuple[int, float]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dahl", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 6):
        raise RuntimeError(f"dahl {' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-500:]}")
    return done.returncode, time.perf_counter() - start


def _get(url: str) -> dict[str, Any]:
    with urlopen(url) as reply:
        data: dict[str, Any] = json.loads(reply.read())
    return data


def _usd(prompt: int, completion: int, fraction: float = 1.0) -> float:
    return fraction * (prompt * PRICES["input_usd_per_mtok"] + completion * PRICES["output_usd_per_mtok"]) / 1e6


def run(claims: int, latency_ms: float, complete_s: float, work: Path) -> dict[str, Any]:
    """Both paths on ``claims`` generated claims; the JSON figures (see the module docstring)."""
    source = work / "answers.jsonl"
    _answers(source, claims)
    mock = subprocess.Popen([sys.executable, "-m", "bench.mockserver", "--port", "0", "--latency-ms", str(latency_ms),
                             "--batch-complete-s", str(complete_s)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert mock.stdout is not None
        root = mock.stdout.readline().split()[-1]
        url = root + "/v1"
        common = [str(source), "--splitter", "given", "--checker", "openai", "--base-url", url, "--model", "mock",
                  "--api-key-env", "", "--max-in-flight", "64"]
        startup_s = min(_dahl("--version")[1] for _ in range(2))  # process start and imports, not work
        _, online_s = _dahl("score", *common, "-o", str(work / "online"), "--no-progress",
                            "--cache-dir", str(work / "cache-online"))
        tokens = _get(root + "/stats")["tokens"]
        online_usd = _usd(tokens["prompt"], tokens["completion"])
        folder, cache = work / "batch", ["--cache-dir", str(work / "cache-batch")]
        steps: dict[str, float] = {}
        _, steps["prepare"] = _dahl("batch", "prepare", *common, "-o", str(folder), *cache)
        _, steps["submit"] = _dahl("batch", "submit", str(folder))
        waited = time.perf_counter()
        steps["collect"] = 0.0
        polls = -1  # collect calls beyond the first
        while True:
            code, seconds = _dahl("batch", "collect", str(folder))
            steps["collect"] += seconds
            polls += 1
            if code == 0:
                break
            time.sleep(0.5)
        turnaround = time.perf_counter() - waited - steps["collect"]
        _, steps["score"] = _dahl("score", *common, "-o", str(work / "scored"), "--no-progress", *cache)
        collected = [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]
        prompt = sum(e.get("prompt_tokens", 0) for e in collected if e["event"] == "collected")
        completion = sum(e.get("completion_tokens", 0) for e in collected if e["event"] == "collected")
        batch_usd = _usd(prompt, completion, PRICES["batch_price_fraction"])
        local_s = max(sum(steps.values()) - (len(steps) + polls) * startup_s, 0.0)
        online_s = max(online_s - startup_s, 0.0)
    finally:
        mock.terminate()
        mock.wait(timeout=10)
        if mock.stdout is not None:
            mock.stdout.close()
    scale = 1e6 / claims
    return {
        "claims": claims,
        "mock": {"latency_ms": latency_ms, "batch_complete_s": complete_s, "max_in_flight": 64},
        "process_start_s": round(startup_s, 2),
        "prices": PRICES,
        "online": {"work_s": round(online_s, 2), "prompt_tokens": tokens["prompt"],
                   "completion_tokens": tokens["completion"], "usd": round(online_usd, 6),
                   "per_1m_claims": {"usd": round(online_usd * scale, 2), "wall_s": round(online_s * scale, 1)}},
        "batch": {"steps_s": {k: round(v, 2) for k, v in steps.items()}, "local_work_s": round(local_s, 2),
                  "collect_waited_s": round(turnaround, 2),
                  "prompt_tokens": prompt, "completion_tokens": completion, "usd": round(batch_usd, 6),
                  "per_1m_claims": {"usd": round(batch_usd * scale, 2),
                                    "wall_s": round(local_s * scale + complete_s, 1)}},
        "ratio_batch_to_online": {"usd": round(batch_usd / online_usd, 3) if online_usd else None},
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: prints the JSON figures; exit status 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.batch_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 claims, 1 s batch turnaround")
    parser.add_argument("--claims", type=int, default=None, help="claims to check (default 20,000; quick 2,000)")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="mock latency of one online request")
    parser.add_argument("--batch-complete-s", type=float, default=None,
                        help="mock batch turnaround, seconds (default 5; quick 1)")
    args = parser.parse_args(argv)
    claims = args.claims or (2_000 if args.quick else 20_000)
    complete_s = args.batch_complete_s if args.batch_complete_s is not None else (1.0 if args.quick else 5.0)
    with tempfile.TemporaryDirectory(prefix="dahl-batch-cost-") as work:
        figures = run(claims, args.latency_ms, complete_s, Path(work))
    sys.stdout.write(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
