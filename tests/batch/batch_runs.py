"""Helpers of the batch tests: answer files, dahl commands in process, ledger reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dahl.cli import main


#: Sentences unlike each other (preprocessing drops near-repeats), one claim each for the rule Splitter.
_FACTS = ("Person {a} was born in Lisbon.", "Her brother became a chemist.",
          "The family emigrated in winter {s}.", "Archery became a lifelong hobby.",
          "Two novels about sailors followed quickly.", "Critics praised the second album warmly.",
          "A small bakery opened near the harbour.", "Doctors recommended mountain air.",
          "Volunteers rebuilt the chapel roof afterwards.", "Grandchildren inherited a stamp collection.")


def write_answers(path: Path, n_answers: int, sentences: int) -> Path:
    """``n_answers`` dahl JSONL answers, each of ``sentences`` distinct sentences."""
    with path.open("w") as handle:
        for a in range(n_answers):
            text = " ".join(_FACTS[s % len(_FACTS)].format(a=a, s=s) for s in range(sentences))
            handle.write(json.dumps({"id": f"a{a}", "question": f"Tell me a bio of person {a}.", "response": text,
                                     "model": "m"}) + "\n")
    return path


def dahl(*args: str) -> tuple[int, str]:
    """Run ``dahl ARGS`` in process; (exit status, output)."""
    result = CliRunner().invoke(main, list(args))
    if result.exit_code == 1 and result.exception is not None:  # a crash, not an exit status
        raise result.exception
    return result.exit_code, result.output


def submit_and_collect(folder: Path) -> str:
    """``dahl batch submit FOLDER`` then ``dahl batch collect FOLDER``, each exiting 0; collect's output."""
    text = ""
    for command in ("submit", "collect"):
        code, text = dahl("batch", command, str(folder))
        assert code == 0, text
    return text


def endpoint(url: str) -> list[str]:
    """The options of an openai endpoint at the keyless mock ``url``."""
    return ["--base-url", url, "--model", "mock", "--api-key-env", ""]


def ledger_events(folder: Path, kind: str) -> list[dict[str, Any]]:
    """The ledger's events of ``kind``."""
    lines = (folder / "ledger.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def shard_ids(path: Path) -> list[str]:
    """The custom_ids of a batch file, in order."""
    return [json.loads(line)["custom_id"] for line in path.read_text().splitlines()]


def batch_stats(url: str) -> dict[str, int]:
    """The mock's batch counters (``GET /stats/batches``)."""
    from urllib.request import urlopen

    with urlopen(url.removesuffix("/v1") + "/stats/batches") as reply:
        data: dict[str, int] = json.loads(reply.read())
    return data
