"""``python -m remote_chain.cli``: the console script without an installed entry point."""

from remote_chain.cli import main

main()
