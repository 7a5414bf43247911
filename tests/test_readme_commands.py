"""The commands of README.md and docs/*.md print what the pages show.

An *example* is a command block followed by an output block (nothing, or one paragraph ending
in ":", between them), or a ``$ command`` line of a block followed by the lines it prints. Each
runs offline, in a fresh folder holding a copy of ``examples/``, with the venv's ``dahl`` on the
code under test, a private cache and no API key; ``../shared/data`` of that folder is the shared
data (an example that reads an absent data set is skipped, naming it). An install step (``python3
-m venv``, ``. .venv/bin/activate``, ``pip install``) is not run. The examples of one page run in
order in one folder, so a later one may use what an earlier one wrote.

An output block is compared line by line (trailing spaces dropped); a line ``...`` stands for any
number of lines, and figures that depend on time (claims/s, ETA, elapsed time, seconds) are masked
on both sides. A block that cannot run offline carries ``<!-- output not checked: REASON -->`` on
the line before it. The table of docs/inputs.md "Scoring the shared data sets" is checked too:
each row's command, and the answers, scored answers, claims and exit status it states.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO, shared_data_dir

PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
SHELLS = ("", "console", "sh", "bash", "shell")
COMMAND = re.compile(r"^(\$ |dahl |python3? |for |[A-Z_]+=\S* dahl )")
MARKER = re.compile(r"<!--\s*output not checked:\s*(.+?)\s*-->")
INSTALL = re.compile(r"^(python3? -m venv |\. \.venv/bin/activate|pip install )")
DATA = re.compile(r"\.\./shared/data/([\w.-]+)")
#: What a page's examples need that another page made: docs/report.md reports the Quickstart's run.
SETUP = {"docs/report.md": "dahl score examples/answers.jsonl --evidence examples/corpus.jsonl -o out --no-progress"}
#: The port of the bench mock in the docs' commands; each test run uses a free one.
DOC_PORT = "8765"
#: Figures that depend on the machine's speed or the clock: (pattern, what it becomes on both sides).
MASKS = [
    (re.compile(r"\d[\d,.]* claims/s"), "N claims/s"),
    (re.compile(r"ETA \S+"), "ETA N"),
    (re.compile(r"\b\d+:\d\d:\d\d\b"), "H:MM:SS"),
    (re.compile(r" in \d+(\.\d+)? s\b"), " in N s"),
    (re.compile(r"· \d+(\.\d+)?s$"), "· Ns"),
]


@dataclass
class Example:
    """One command (a shell script) of a page and the output the page shows for it."""

    page: str
    line: int
    script: str
    expected: list[str] | None  # None: the page shows no output for it (run for what it writes)
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    info: str
    lines: list[str]
    before: list[str] = field(default_factory=list)  # the text between the previous block and this one


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown page, each with the text before it."""
    out: list[Block] = []
    prose: list[str] = []
    inside: Block | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if inside is None:
            if line.startswith("```"):
                inside = Block(n, line[3:].strip(), [], prose)
                prose = []
            else:
                prose.append(line)
        elif line.startswith("```"):
            out.append(inside)
            inside = None
        else:
            inside.lines.append(line)
    return out


def is_command(block: Block) -> bool:
    first = next((line for line in block.lines if line.strip()), "")
    return block.info in SHELLS and bool(COMMAND.match(first))


def leads_to_output(prose: list[str]) -> bool:
    """Nothing, or one paragraph ending in ':', between a command block and its output block."""
    text = "\n".join(prose).strip()
    return text == "" or ("\n\n" not in text and text.endswith(":"))


def without_install(script: str) -> str:
    """The script with its install steps (venv, activate, pip install) left out."""
    lines = []
    for line in script.splitlines():
        kept = [part for part in line.split(" && ") if not INSTALL.match(part.strip())]
        if kept:
            lines.append(" && ".join(kept))
    return "\n".join(lines)


def marker(prose: list[str]) -> str | None:
    last = next((line for line in reversed(prose) if line.strip()), "")
    found = MARKER.search(last)
    return found.group(1) if found else None


def dollar_examples(page: str, block: Block, skip: str | None) -> list[Example]:
    """Each ``$ command`` of a block (continued by trailing backslashes) with the lines after it."""
    out: list[Example] = []
    lines = block.lines
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        start = i
        command = [lines[i][2:]]
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        i += 1
        shown: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        out.append(Example(page, block.line + 1 + start, "\n".join(command), shown or None, skip))
    while out and out[-1].expected is None:  # nothing shown after the last one: nothing to run it for
        out.pop()
    return out


def examples(page: str) -> list[Example]:
    """The examples of one page, in order."""
    found = blocks((REPO / page).read_text(encoding="utf-8"))
    out: list[Example] = []
    for i, block in enumerate(found):
        if not is_command(block):
            continue
        skip = marker(block.before)
        if block.lines[0].startswith("$ "):
            out.extend(dollar_examples(page, block, skip))
            continue
        nxt = found[i + 1] if i + 1 < len(found) else None
        if nxt is None or nxt.info != "" or is_command(nxt) or not leads_to_output(nxt.before):
            continue
        out.append(Example(page, block.line, without_install("\n".join(block.lines)), nxt.lines,
                           skip or marker(nxt.before)))
    return out


ALL = [e for page in PAGES for e in examples(page)]


def mask(line: str) -> str:
    line = line.rstrip()
    for pattern, replacement in MASKS:
        line = pattern.sub(replacement, line)
    return line


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` with each ``...`` line standing for any lines (none too)."""
    parts: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            parts.append([])
        else:
            parts[-1].append(line)

    def at(pos: int, part: list[str]) -> bool:
        return actual[pos:pos + len(part)] == part

    if len(parts) == 1:
        return actual == parts[0]
    head, *middle, tail = parts
    if not at(0, head) or len(actual) < len(head) + len(tail) or not at(len(actual) - len(tail), tail):
        return False
    pos, end = len(head), len(actual) - len(tail)
    for part in middle:
        while pos + len(part) <= end and not at(pos, part):
            pos += 1
        if pos + len(part) > end:
            return False
        pos += len(part)
    return True


def trimmed(lines: list[str]) -> list[str]:
    lines = [mask(line) for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Folder:
    """A fresh folder for one page's examples: examples/ copied, ../shared/data, an empty cache."""

    def __init__(self, base: Path) -> None:
        self.work = base / "work"
        shutil.copytree(REPO / "examples", self.work / "examples")
        if shared_data_dir().is_dir():
            (base / "shared").mkdir()
            (base / "shared" / "data").symlink_to(shared_data_dir().resolve())
        self.port = str(free_port())
        self.env = {k: v for k, v in os.environ.items()
                    if not k.endswith(("_API_KEY", "_TOKEN")) and k not in ("COLUMNS", "LINES")}
        self.env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                        PYTHONPATH=str(REPO), DAHL_CACHE_DIR=str(base / "cache"), PYTHONIOENCODING="utf-8",
                        HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")

    def run(self, script: str) -> list[str]:
        """Run ``script`` with bash here; its stdout and stderr lines, as one would see them."""
        script = script.replace(DOC_PORT, self.port)
        wrapped = 'trap \'kill $(jobs -p) 2>/dev/null; wait\' EXIT\n' + script
        done = subprocess.run(["bash", "-c", wrapped], cwd=self.work, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, encoding="utf-8", timeout=90, check=False)
        out = done.stdout.replace(self.port, DOC_PORT).replace(f"{self.work}/", "$PWD/")
        return out.splitlines()


def missing_data(script: str) -> str | None:
    for name in DATA.findall(script):
        if not (shared_data_dir() / name).exists():
            return f"data set {name} not found in {shared_data_dir()} (set DAHL_SHARED_DATA)"
    return None


@pytest.fixture(scope="module")
def outputs() -> dict[str, list[str] | str]:
    """Example id -> its output lines, or why it was not run (filled by :func:`output_of`)."""
    return {}


def output_of(example: Example, outputs: dict[str, list[str] | str], tmp: pytest.TempPathFactory) -> list[str] | str:
    """The example's output, running all of its page's examples in order, in one folder, on first use."""
    if example.id not in outputs:
        folder = Folder(tmp.mktemp(example.page.replace("/", "-")))
        if example.page in SETUP:
            folder.run(SETUP[example.page])
        for e in examples(example.page):
            reason = e.skip and f"marked in {e.page}: {e.skip}" or missing_data(e.script)
            outputs[e.id] = reason if reason else folder.run(e.script)
    return outputs[example.id]


class TestPagesFindTheirExamples:
    def test_the_known_examples_are_found(self) -> None:
        """The Quickstart's two commands, the offline recall example and the eval against the mock are among them."""
        assert {"README.md", "docs/recall.md", "docs/benchmark.md", "docs/report.md"} <= {e.page for e in ALL}
        readme = [e.script for e in ALL if e.page == "README.md"]
        assert readme[:2] == ["dahl score examples/answers.jsonl --evidence examples/corpus.jsonl -o out",
                              "dahl report out -o report"]

    def test_markers_are_few(self) -> None:
        """At most three blocks of the pages are marked as not checked, each with its reason."""
        reasons = [r for page in PAGES for r in MARKER.findall((REPO / page).read_text(encoding="utf-8"))]
        assert len(reasons) <= 3 and all(reasons), reasons

    def test_dots_stand_for_any_lines(self) -> None:
        """'...' matches zero or more lines, at the start, in the middle and at the end."""
        assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
        assert matches(["...", "c", "..."], ["a", "b", "c", "d"])
        assert matches(["a", "...", "b"], ["a", "b"])
        assert not matches(["a", "...", "c"], ["a", "b"])
        assert not matches(["a", "b"], ["a", "b", "c"])

    def test_time_figures_are_masked(self) -> None:
        """Claims/s, ETA, elapsed time and seconds are masked; counts are not."""
        line = "progress: 100% · 8/8 answers · 1,093 claims/s · ETA 0s · 0 errors · 0:00:01"
        assert mask(line) == "progress: 100% · 8/8 answers · N claims/s · ETA N · 0 errors · H:MM:SS"
        assert mask("8 answers scored now, 42 claims in 0.5 s -> out") == "8 answers scored now, 42 claims in N s -> out"


class TestInstall:
    def test_the_readme_install_draws_the_plots_the_pages_show(self) -> None:
        """The README's install command installs the plot extra (matplotlib), which dahl eval's board.png and
        --plot-recall of the pages' journeys need: they work after it, not exit 2 "plotting needs matplotlib"."""
        import tomllib

        readme = (REPO / "README.md").read_text(encoding="utf-8")
        installs = re.findall(r"pip install ('\.\[[\w,]+\]'|\.)(?= |$)", readme, flags=re.MULTILINE)
        assert installs and all("plot" in extras for extras in installs[:1]), installs
        assert "pip install '.[plot]'" in readme.split("## Install", 1)[1].strip().split("\n\n", 1)[0]
        extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
        assert any(d.startswith("matplotlib") for d in extras["plot"])
        pages = "".join((REPO / page).read_text(encoding="utf-8") for page in PAGES)
        assert "dahl eval examples/eval/eval.toml" in pages and "--plot-recall" in pages


class TestExamplesPrintWhatThePagesShow:
    @pytest.mark.parametrize("example", ALL, ids=[e.id for e in ALL])
    def test_output(self, example: Example, outputs: dict[str, list[str] | str],
                    tmp_path_factory: pytest.TempPathFactory) -> None:
        """The command's output is the page's output block (time figures masked, '...' any lines)."""
        got = output_of(example, outputs, tmp_path_factory)
        if isinstance(got, str):
            pytest.skip(got)
        if example.expected is None:
            return
        expected, actual = trimmed(example.expected), trimmed(got)
        assert matches(expected, actual), "\n".join(["", f"{example.id}: {example.script}", "--- page shows:",
                                                     *expected, "--- command prints:", *actual])


SHARED_SETS = "## Scoring the shared data sets"


def shared_rows() -> list[tuple[str, str, tuple[int, int, int, int]]]:
    """(set, command, (answers, scored, claims, exit)) of each row of docs/inputs.md's table."""
    text = (REPO / "docs" / "inputs.md").read_text(encoding="utf-8").split(SHARED_SETS, 1)[1]
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1].startswith("`dahl "):
            figures = tuple(int(c.replace(",", "")) for c in cells[2:])
            rows.append((cells[0], cells[1].strip("`"), (figures[0], figures[1], figures[2], figures[3])))
    return rows


ROWS = shared_rows()


class TestSharedSetsTable:
    def test_every_set_has_a_row(self) -> None:
        """FELM, FactBench, MedHallu, VeriScore and FActScore each have a row with a command and four figures."""
        assert [name for name, _, _ in ROWS] == ["FELM", "FactBench", "MedHallu", "VeriScore", "FActScore"]

    @pytest.mark.data
    @pytest.mark.parametrize(("name", "command", "figures"), ROWS, ids=[r[0] for r in ROWS])
    def test_row(self, name: str, command: str, figures: tuple[int, int, int, int], tmp_path: Path) -> None:
        """The row's command gives the answers, scored answers, claims and exit status the row states."""
        data = shared_data_dir()
        if not data.is_dir():
            pytest.skip(f"shared data not found at {data} (set DAHL_SHARED_DATA)")
        env = dict(os.environ, D=str(data), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                   PYTHONPATH=str(REPO), DAHL_CACHE_DIR=str(tmp_path / "cache"))
        done = subprocess.run(["bash", "-c", command + " --no-progress"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=90, check=False)
        if "needs pyarrow, which is not installed" in done.stderr:
            pytest.skip(f"{name} needs pyarrow (the arrow extra)")
        args = shlex.split(command)
        out = tmp_path / args[args.index("-o") + 1]
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        models = summary["models"].values()
        got = (sum(m["n_answers"] for m in models), sum(m["n_scored"] for m in models),
               sum(sum(m["labels"].values()) for m in models), done.returncode)
        assert got == figures, done.stderr[-2000:]
