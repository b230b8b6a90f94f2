"""``flotilla completion bash|zsh``: a shell completion script generated from the argparse parser itself: the
sub-commands (and theirs), each one's flags, the choices of a positional argument, and the resource words of
``get`` and ``describe``."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Iterator
from typing import Any

from flotilla.cli.flags import add_command

__all__ = ["add_completion_parser", "command_words", "render_bash", "render_zsh"]

#: words completed after ``flotilla get`` (the kinds :mod:`flotilla.cli.get_command` shows)
GET_RESOURCES = ("clusters", "bindings", "works", "failovers")
#: words completed after ``flotilla describe`` (the kinds :mod:`flotilla.cli.describe_command` shows)
DESCRIBE_RESOURCES = ("cluster", "binding")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_words(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, list[str]]]:
    """(the command's words joined by spaces, the words that may follow it) for the top level and every
    sub-command: its sub-commands, its flags, and the choices of its positional arguments."""
    subs = {name: p for name, p in _subparsers(parser).items() if not name.startswith("_")}
    words = list(subs)
    for action in parser._actions:
        if action.option_strings:
            words += [o for o in action.option_strings if o.startswith("--") or len(o) == 2]
        elif action.choices and not isinstance(action, argparse._SubParsersAction):
            words += [str(c) for c in action.choices]
    if path == ("get",):
        words = [*GET_RESOURCES, *words]
    elif path == ("describe",):
        words = [*DESCRIBE_RESOURCES, *words]
    yield " ".join(path), list(dict.fromkeys(words))
    for name, sub in subs.items():
        yield from command_words(sub, (*path, name))


def render_bash(parser: argparse.ArgumentParser) -> str:
    cases = "\n".join(f"        {shlex.quote(path or '')}) words={shlex.quote(' '.join(words))} ;;"
                      for path, words in command_words(parser))
    return f"""# bash completion for flotilla; load with: source <(flotilla completion bash)
_flotilla() {{
    local cur path="" w words="" i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        [[ "$w" == -* ]] && continue
        case "${{path:+$path }}$w" in
{chr(10).join(f"            {shlex.quote(p)}) path={shlex.quote(p)} ;;" for p, _ in command_words(parser) if p)}
        esac
    done
    case "$path" in
{cases}
    esac
    local offered=""  # flags only once a dash is typed, as kubectl's completion
    for w in $words; do [[ "$cur" == -* || "$w" != -* ]] && offered+=" $w"; done
    COMPREPLY=($(compgen -W "$offered" -- "$cur"))
}}
complete -o default -F _flotilla flotilla
"""


def render_zsh(parser: argparse.ArgumentParser) -> str:
    return ("#compdef flotilla\n# zsh completion for flotilla; load with: source <(flotilla completion zsh)\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + render_bash(parser))


RENDERERS: dict[str, Callable[[argparse.ArgumentParser], str]] = {"bash": render_bash, "zsh": render_zsh}


def run_completion_command(args: argparse.Namespace) -> int:
    sys.stdout.write(RENDERERS[args.shell](args.root_parser))
    return 0


def add_completion_parser(sub: Any, root: argparse.ArgumentParser) -> None:
    """``flotilla completion``, completing the commands of ``root`` (the ``flotilla`` parser)."""
    p = add_command(sub, "completion", help="print a bash or zsh completion script",
                    description="Print a shell completion script for flotilla's commands, flags and the resource "
                                "words of get.",
                    examples=["source <(flotilla completion bash)",
                              'flotilla completion zsh > "${fpath[1]}/_flotilla"'])
    p.add_argument("shell", choices=tuple(RENDERERS), help="bash or zsh")
    p.set_defaults(fn=run_completion_command, root_parser=root)
