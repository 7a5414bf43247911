"""``dahl score --help``: the common options first, the rest grouped under headings."""

from __future__ import annotations

import re

import click
from click.testing import CliRunner

from dahl.cli import main


def _help(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"], catch_exceptions=False, terminal_width=200)
    assert result.exit_code == 0
    return result.output


class TestScoreHelp:
    def test_sections_in_order(self) -> None:
        """The headings come in the order common → input → endpoint → scores → recall → cache."""
        headings = re.findall(r"^([A-Z][A-Za-z ]+):$", _help("score"), re.M)
        assert headings == ["Options", "Input", "Endpoint and limits", "Scores", "Recall", "Cache and progress"]

    def test_common_options_first(self) -> None:
        """The first section opens with -o/--out, then the Splitter and the Checker."""
        first = _help("score").split("Input:")[0]
        flags = re.findall(r"^  (-[a-z], )?(--[a-z-]+)", first, re.M)
        assert [flag for _, flag in flags][:4] == ["--out", "--splitter", "--checker", "--evidence"]

    def test_every_option_listed_once(self) -> None:
        """Each of the command's options appears exactly once across the sections."""
        text = _help("score")
        command = main.commands["score"]
        options = [p for p in command.params if isinstance(p, click.Option)]
        for option in options:
            flag = max(option.opts, key=len)
            assert len(re.findall(rf"^  (?:-[a-z], )?{re.escape(flag)}(?![a-z-])", text, re.M)) == 1, flag
