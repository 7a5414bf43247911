"""HTML report benchmark: a generated 100,000-answer run, ``dahl report``, opened in headless Chromium.

Generates a seeded run folder (``answers.jsonl`` + verdict store): 4 models each
answer ``--answers / 4`` questions in 5 categories; each answer has 8 sentences,
one claim per sentence with its span, labels drawn per model (supported rate
0.55–0.85, 10% irrelevant, 1% unknown), 2% abstained. Then builds the report in a
fresh process (``python -m dahl report``) and opens ``explorer.html`` from disk in
headless Chromium (:mod:`bench.chromium`), measuring:

* ``first_answers_ms``: navigation start → the first rows of the answer list drawn
  (``performance.now()`` in the page when the list first has rows; the issue's
  target is < 3,000 ms);
* ``first_answers_wall_s``: the same seen from Selenium (``driver.get`` → rows present);
* ``open_answer_ms``: click on a row → its claims shown (one chunk loaded);
* ``scroll_frame_ms_p50/p99`` and ``rows_in_dom_max``: 120 animation frames scrolling
  the list 400 px per frame; rows in the DOM stay a viewport's worth;
* ``size_bytes``: all files of the report; ``index_bytes``: ``data/index.js``.

Prints JSON. Usage: ``python -m bench.report_open [--answers 100000] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from bench.chromium import chromium, missing
from dahl.records import AnswerMetrics, AnswerResult, ClaimResult, Label, Status
from dahl.analysis._verdicts import rebuild

MODELS = ("model-a", "model-b", "model-c", "model-d")
CATEGORIES = ("biography", "medicine", "history", "science", "law")
WORDS = ("acid", "river", "protein", "court", "empire", "signal", "vaccine", "treaty", "planet", "enzyme",
         "harbour", "statute", "crystal", "dynasty", "neuron", "glacier")
SENTENCES = 8


def generate_run(out: Path, n_answers: int, seed: int = 0) -> dict[str, Any]:
    """Write ``out/answers.jsonl`` and its verdict store: ``n_answers`` answers as the module docstring says."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    enc = msgspec.json.Encoder()
    per_model = n_answers // len(MODELS)
    p_sup = np.linspace(0.55, 0.85, len(MODELS))
    n_claims = 0
    with (out / "answers.jsonl").open("wb") as f:
        for m, model in enumerate(MODELS):
            for q in range(per_model):
                words = rng.choice(WORDS, size=(SENTENCES, 5))
                topic = f"{WORDS[q % len(WORDS)]} {q}"
                abstained = rng.random() < 0.02
                sentences = [] if abstained else [f"The {topic} " + " ".join(w) + f" in {1800 + int(rng.integers(200))}."
                                                  for w in words]
                response = "I do not know." if abstained else " ".join(sentences)
                draw = rng.random(len(sentences))
                labels = [Label.IRRELEVANT if d < 0.10 else Label.UNKNOWN if d < 0.11 else
                          Label.SUPPORTED if d < 0.11 + 0.89 * p_sup[m] else Label.UNSUPPORTED for d in draw]
                claims, at = [], 0
                for i, (s, lab) in enumerate(zip(sentences, labels)):
                    claims.append(ClaimResult(text=s, index=i, label=lab, sentence=i, span=(at, at + len(s))))
                    at += len(s) + 1
                counts = {str(x): labels.count(x) for x in Label}
                rated = counts["supported"] + counts["unsupported"]
                result = AnswerResult(
                    id=f"{model}/{q}", model=model, category=CATEGORIES[q % len(CATEGORIES)],
                    status=Status.ABSTAINED if abstained else Status.SCORED, claims=tuple(claims), counts=counts,
                    metrics=AnswerMetrics(precision=counts["supported"] / rated if rated else None),
                    input_hash=f"{m}-{q}", question=f"What is known about the {topic}?", response=response,
                    question_id=f"q{q}")
                f.write(enc.encode(result) + b"\n")
                n_claims += len(claims)
    rebuild(out)
    return {"answers": per_model * len(MODELS), "claims": n_claims, "generate_s": round(time.perf_counter() - t0, 2)}


def build(run: Path, site: Path) -> float:
    """``python -m dahl report RUN -o SITE`` in a fresh process; its wall time (seconds)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dahl", "report", str(run), "-o", str(site)], check=True,
                   stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t0, 2)


_SCROLL = """
const done = arguments[arguments.length - 1];
const list = document.getElementById("list");
const frames = []; let last = performance.now(), maxRows = 0, n = 0;
function step(now) {
  frames.push(now - last); last = now;
  maxRows = Math.max(maxRows, list.querySelectorAll(".row").length);
  if (++n > 120) { done({frames: frames.slice(1), maxRows: maxRows}); return; }
  list.scrollTop += 400;
  requestAnimationFrame(step);
}
requestAnimationFrame(step);
"""


def measure(site: Path) -> dict[str, Any]:
    """Open ``site/explorer.html`` in headless Chromium and time the first answers, one answer and scrolling."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium() as driver:
        driver.get("about:blank")
        t0 = time.perf_counter()
        driver.get((site / "explorer.html").resolve().as_uri())
        WebDriverWait(driver, 60, poll_frequency=0.01).until(
            lambda d: d.execute_script("return window.DAHL && DAHL.firstRowsAt !== undefined"))
        wall = time.perf_counter() - t0
        page_ms = float(driver.execute_script("return DAHL.firstRowsAt"))
        count = driver.find_element(By.ID, "count").text
        row = driver.find_element(By.CSS_SELECTOR, "#list .row")
        t1 = time.perf_counter()
        row.click()
        WebDriverWait(driver, 30, poll_frequency=0.01).until(lambda d: d.find_elements(By.CSS_SELECTOR, "button.claim"))
        open_ms = (time.perf_counter() - t1) * 1000
        driver.set_script_timeout(60)
        scroll = driver.execute_async_script(_SCROLL)
    frames = np.array(scroll["frames"])
    return {"first_answers_ms": round(page_ms, 1), "first_answers_wall_s": round(wall, 3), "count_shown": count,
            "open_answer_ms": round(open_ms, 1), "scroll_frame_ms_p50": round(float(np.percentile(frames, 50)), 1),
            "scroll_frame_ms_p99": round(float(np.percentile(frames, 99)), 1), "rows_in_dom_max": scroll["maxRows"]}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print JSON; exit 1 when headless Chromium is unavailable."""
    parser = argparse.ArgumentParser(prog="python -m bench.report_open", description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=100_000, help="answers in the generated run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="write the run and the report here and keep them")
    args = parser.parse_args(argv)
    reason = missing()
    if reason is not None:
        print(json.dumps({"error": reason}))
        return 1
    base = args.keep or Path(tempfile.mkdtemp(prefix="dahl-report-bench-"))
    try:
        run, site = base / "run", base / "report"
        result: dict[str, Any] = generate_run(run, args.answers, seed=args.seed)
        result["build_s"] = build(run, site)
        result["size_bytes"] = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
        result["size_mb"] = round(result["size_bytes"] / 1e6, 1)
        result["index_bytes"] = (site / "data" / "index.js").stat().st_size
        result["chunks"] = len(list((site / "data").glob("answers-*.js")))
        result.update(measure(site))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
