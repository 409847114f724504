"""Every command's --help reads as plain text, and the completion scripts offer every command
and option the parser has (they are generated from it)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from mplp_lsp.cli import build_parser
from mplp_lsp.cli.completion import SHELLS, commands, script


def parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


ALL = dict(parsers(build_parser()))


@pytest.mark.parametrize("path", sorted(ALL), ids=lambda path: " ".join(path) or "mplp-lsp")
def test_help_is_plain_text(path: tuple[str, ...]) -> None:
    text = ALL[path].format_help()
    assert "``" not in text  # reStructuredText from a docstring
    assert ":func:" not in text and ":class:" not in text


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_offers_every_command_and_option(shell: str) -> None:
    generated = script(shell, build_parser())
    for command in commands(build_parser()):
        for name in command.subcommands:
            assert name in generated
        for option in command.options:
            for flag in option.flags:
                assert (flag.lstrip("-") if shell == "fish" else flag) in generated


@pytest.mark.parametrize("columns", [50, 120])
def test_help_is_laid_out_for_the_terminal_width(
    monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """The parsers build their formatters without asking the terminal's width (the check of
    each argument needs none); what is printed still fills the terminal, as argparse does
    (two columns short of it)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    description = ALL[("events",)].format_help().split("\n\n")[1].splitlines()
    assert columns - 14 <= max(map(len, description)) <= columns - 2
