"""P9's floor: the least any Python client built on asyncssh pays for one command, cold.

A new process that imports asyncssh, connects (the same key, known_hosts and host-key check
as remote-chain) with stock asyncssh and runs ``true``: no config, no script, no parsing.
remote-chain cannot cost less than this and still be an asyncssh client in Python (the design
card), so its ratio to a bare ``ssh host true`` is the floor under P9's cold figures, measured
side by side in the same rounds.

With ``--card`` it first imports the design card's other packages (pydantic-settings,
structlog, tenacity, anyio: what every remote-chain command loads), so the two rows together
say what the fixed stack costs before any of remote-chain's own code runs.

Run as ``python floor.py [--card] HOST PORT USER IDENTITY KNOWN_HOSTS``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # run as a script too: it imports nothing of the bench's
    from benchlib.baselines import SshTarget


def argv(target: SshTarget, *, card: bool = False) -> list[str]:
    """The floor client's command line for one target; ``card``: with the card's packages."""
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        *(["--card"] if card else []),
        target.host,
        str(target.port),
        target.user,
        str(target.identity_file),
        str(target.known_hosts),
    ]


def _main() -> int:
    import asyncio  # noqa: PLC0415 - timed as part of the process, as the CLI's are

    args = sys.argv[1:]
    card = "--card" in args
    args = [a for a in args if a != "--card"]
    if card:
        import anyio  # noqa: F401, PLC0415
        import pydantic_settings  # noqa: F401, PLC0415
        import tenacity  # noqa: F401, PLC0415

        # structlog as remote-chain's logging set-up imports it: rich and colorama hidden.
        sys.modules["rich"] = sys.modules["colorama"] = None  # type: ignore[assignment]
        import structlog  # noqa: F401, PLC0415

        del sys.modules["rich"], sys.modules["colorama"]
    import asyncssh  # noqa: PLC0415

    host, port, user, key, known = args[:5]

    async def run() -> int:
        async with asyncssh.connect(
            host,
            int(port),
            username=user,
            client_keys=[key],
            known_hosts=known,
            config=[],
            password_auth=False,  # as remote-chain's own connect
            kbdint_auth=False,
        ) as conn:
            result = await conn.run("true", check=False)
            return int(result.exit_status or 0)

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(_main())
