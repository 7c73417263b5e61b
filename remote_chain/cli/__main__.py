"""``python -m remote_chain.cli``: the console script without an installed entry point.

The same thin entry as ``remote-chain`` (``launch.main``): through the warm launcher when
one serves us. Python imports this package (typer) before this module runs.
"""

from remote_chain.launch import main

main()
