"""``mplp-lsp completion bash|zsh|fish``: a shell completion script, generated from the
command line's own parser, so every command, option and choice it offers is one that exists.

The script is static (nothing runs Python when the user presses Tab): bash gets a function
that finds the command path in the words typed so far and offers that command's subcommands,
options, an option's choices, or files and folders; zsh loads the same function through its
bash compatibility layer; fish gets ``complete`` lines, with each command's help as the
description.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

SHELLS = ("bash", "zsh", "fish")
_FUNCTION = "_mplp_lsp"
# Options whose value names a folder, or a file; every other value is free text.
_FOLDERS = frozenset({"--workspace", "--state-dir", "--dest"})
_FILES = frozenset({"--log-file", "--json", "--token-file", "--output"})


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL on stdout. bash: add "
        '`eval "$(mplp-lsp completion bash)"` to ~/.bashrc. zsh: add '
        '`eval "$(mplp-lsp completion zsh)"` to ~/.zshrc, after compinit. fish: '
        "`mplp-lsp completion fish > ~/.config/fish/completions/mplp-lsp.fish`.",
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from mplp_lsp.cli import build_parser

    # No command named: the parser of every command (naming one would load that one only).
    print(script(args.shell, build_parser([])), end="")
    return 0


@dataclass(frozen=True, slots=True)
class Option:
    flags: tuple[str, ...]
    help: str
    # None: a switch; "file", "dir", "text", or the choices it takes.
    value: str | tuple[str, ...] | None


@dataclass(slots=True)
class Command:
    """One command of the tree: its words so far, what may follow, and its options."""

    path: tuple[str, ...]
    help: str = ""
    subcommands: dict[str, str] = field(default_factory=dict)  # name -> help
    choices: tuple[str, ...] = ()  # a positional argument's choices (`hooks install`)
    options: list[Option] = field(default_factory=list)


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Command]:
    """Every command of ``parser``'s tree, the top one first."""
    command = Command(path, parser.description or "")
    nested: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                command.subcommands[name] = helps.get(name, "")
                nested.append((name, sub))
        elif action.option_strings:
            if action.help != argparse.SUPPRESS:
                command.options.append(_option(action))
        elif action.choices:
            command.choices += tuple(str(choice) for choice in action.choices)
    yield command
    for name, sub in nested:
        yield from commands(sub, (*path, name))


def _option(action: argparse.Action) -> Option:
    value: str | tuple[str, ...] | None
    if action.nargs == 0:
        value = None
    elif action.choices:
        value = tuple(str(choice) for choice in action.choices)
    elif _FOLDERS.intersection(action.option_strings):
        value = "dir"
    elif _FILES.intersection(action.option_strings):
        value = "file"
    else:
        value = "text"
    return Option(tuple(action.option_strings), _first_sentence(action.help or ""), value)


def _first_sentence(text: str) -> str:
    head = text.split("; ")[0].split(" (")[0].split(". ")[0]
    return head if len(head) <= 70 else head[:67] + "..."


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    tree = list(commands(parser))
    if shell == "fish":
        return _fish(tree)
    body = _bash(tree)
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body


def _case(tree: list[Command], words: Any) -> str:
    """A bash ``case`` on the command path, printing ``words(command)`` for each command."""
    lines = ['    case "$1" in']
    for command in tree:
        if found := words(command):
            path = shlex.quote(" ".join(command.path))
            lines.append(f"        {path}) echo {shlex.quote(found)} ;;")
    lines.append("    esac")
    return "\n".join(lines)


def _values(tree: list[Command]) -> str:
    """A bash ``case`` on "path|option": what the option's value is (file, dir, text, or
    ``choice:a b c``); nothing for a switch."""
    lines = ['    case "$1|$2" in']
    for command in tree:
        for option in command.options:
            if option.value is None:
                continue
            kind = option.value if isinstance(option.value, str) else _choice(option.value)
            path = " ".join(command.path)
            keys = "|".join(shlex.quote(f"{path}|{flag}") for flag in option.flags)
            lines.append(f"        {keys}) echo {shlex.quote(kind)} ;;")
    lines.append("    esac")
    return "\n".join(lines)


def _choice(choices: tuple[str, ...]) -> str:
    return "choice:" + " ".join(choices)


def _bash(tree: list[Command]) -> str:
    subcommands = _case(tree, lambda c: " ".join(c.subcommands))
    offered = _case(tree, lambda c: " ".join([*c.subcommands, *c.choices]))
    options = _case(tree, lambda c: " ".join(f for o in c.options for f in o.flags))
    return f"""# mplp-lsp completion for bash (generated by `mplp-lsp completion bash`)
{_FUNCTION}_commands() {{
{subcommands}
}}
{_FUNCTION}_words() {{
{offered}
}}
{_FUNCTION}_options() {{
{options}
}}
{_FUNCTION}_value() {{
{_values(tree)}
}}
{_FUNCTION}() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} path="" word kind i
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        if [[ $word == -- ]]; then  # the rest belongs to another program (`run -- CMD`)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
        fi
        if [[ $word == -* ]]; then
            [[ -n $({_FUNCTION}_value "$path" "$word") ]] && ((i++))
            continue
        fi
        [[ " $({_FUNCTION}_commands "$path") " == *" $word "* ]] && path=${{path:+$path }}$word
    done
    if ((COMP_CWORD > 1)) && [[ ${{COMP_WORDS[COMP_CWORD-1]}} == -* ]]; then
        kind=$({_FUNCTION}_value "$path" "${{COMP_WORDS[COMP_CWORD-1]}}")
        case $kind in
            file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
            dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
            choice:*) COMPREPLY=($(compgen -W "${{kind#choice:}}" -- "$cur")); return ;;
            text) return ;;
        esac
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$({_FUNCTION}_options "$path")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$({_FUNCTION}_words "$path")" -- "$cur"))
        ((${{#COMPREPLY[@]}})) || COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F {_FUNCTION} mplp-lsp
"""


def _fish(tree: list[Command]) -> str:
    lines = ["# mplp-lsp completion for fish (generated by `mplp-lsp completion fish`)"]
    lines.append("complete -c mplp-lsp -f")
    for command in tree:
        if command.path:
            seen = "; and ".join(f"__fish_seen_subcommand_from {w}" for w in command.path)
            where = f"-n {shlex.quote(seen)}"
        else:
            where = "-n __fish_use_subcommand"
        for name, help in command.subcommands.items():
            lines.append(f"complete -c mplp-lsp {where} -a {name} -d {_quoted(help)}")
        if command.choices:
            choices = shlex.quote(" ".join(command.choices))
            lines.append(f"complete -c mplp-lsp {where} -a {choices}")
        for option in command.options:
            flags = " ".join(
                f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}" for f in option.flags
            )
            if option.value is None:
                value = ""
            elif option.value == "file":
                value = " -r -F"
            elif option.value == "dir":
                value = " -x -a '(__fish_complete_directories)'"
            elif option.value == "text":
                value = " -x"
            else:
                value = f" -x -a {shlex.quote(' '.join(option.value))}"
            lines.append(f"complete -c mplp-lsp {where} {flags}{value} -d {_quoted(option.help)}")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return shlex.quote(_first_sentence(text))
