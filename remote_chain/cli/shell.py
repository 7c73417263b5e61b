"""``completion``: the shell completion script."""

from __future__ import annotations

import enum
import sys
from typing import Annotated

import typer

from remote_chain.cli.app import (
    app,
)


class Shell(enum.StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command()
def completion(
    shell: Annotated[Shell, typer.Argument(metavar="SHELL", help="bash, zsh or fish.")],
) -> None:
    """Print the shell completion script.

    Completes commands, options, profile names and recent run ids. bash: add
    eval "$(remote-chain completion bash)" to ~/.bashrc; zsh: the same with zsh to ~/.zshrc;
    fish: remote-chain completion fish > ~/.config/fish/completions/remote-chain.fish
    """
    from remote_chain.completion import script  # noqa: PLC0415 - start-up time

    sys.stdout.write(script(shell.value))
