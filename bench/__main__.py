"""``python -m bench run [SCENARIO...] [--quick]``: run the benchmark suite, print one table.

``python -m bench peers-setup``: make or update the peers' virtualenv (``bench/.peers-venv``)
with the other clients the ``peers`` scenario measures (see :mod:`bench.peers_env`).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.peers_env import PEER_PACKAGES, PEERS_VENV, setup_peers
from bench.suite import SCENARIOS, run_suite


def _parser() -> argparse.ArgumentParser:
    quick = sum(s.quick_s for s in SCENARIOS)
    full = sum(s.full_s for s in SCENARIOS)
    listing = "\n".join(f"  {s.name:6} {s.summary} (quick ~{s.quick_s:.0f} s, full ~{s.full_s / 60:.0f} min)" for s in SCENARIOS)
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="dahl benchmark suite against the mock OpenAI-compatible server.",
        epilog=(
            f"scenarios:\n{listing}\n\nExpected duration on a 2-core machine: --quick ~{quick / 60:.0f} min "
            f"(CI smoke), full ~{full / 60:.0f} min.\nExit status 1 only when a scenario crashes "
            "or dahl loses claims (claims in != claims out), never on throughput."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run scenarios (all by default)", description=parser.epilog,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="b1 b2 b3 b4 peers (default: all)")
    run.add_argument("--quick", action="store_true", help="small sizes: the whole suite in minutes (CI smoke)")
    run.add_argument("--size", choices=("tiny", "quick", "full"), help="explicit size (overrides --quick)")
    setup = sub.add_parser(
        "peers-setup", help="make or update the peers' virtualenv (openai, LiteLLM, curator)",
        description=f"Install {', '.join(PEER_PACKAGES)} into a virtualenv of their own "
                    f"(default {PEERS_VENV}); the peers scenario then runs them from there.",
    )
    setup.add_argument("--path", type=Path, default=PEERS_VENV, help="the virtualenv's folder")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module docstring of ``bench.suite``)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    if args.command == "peers-setup":
        try:
            python = setup_peers(args.path)
        except (OSError, subprocess.CalledProcessError) as exc:
            sys.stderr.write(f"error: peers' virtualenv not made: {exc}\n")
            return 1
        sys.stdout.write(f"peers' interpreter: {python}\n")
        if args.path.resolve() != PEERS_VENV:
            sys.stdout.write(f"use it with: export DAHL_BENCH_PEERS_PYTHON={python}\n")
        return 0
    size = args.size or ("quick" if args.quick else "full")
    try:
        status, table, out = run_suite(args.scenarios, size=size)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(table + "\n")
    sys.stderr.write(f"results: {out}\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
