"""P9's floor: the least any Python client built on asyncssh pays for one command, cold.

A new process that imports asyncssh, connects (the same key, known_hosts and host-key check
as remote-chain) and runs ``true``, then leaves with ``os._exit`` as the CLI does: no config,
no script, no parsing. remote-chain cannot cost less than this and still be an asyncssh
client in Python (the design card), so its ratio to a bare ``ssh host true`` is the floor under
P9's <= 1.4x, measured side by side in the same rounds (issue 13: a miss that hits a physical
limit is explained by the measurement that shows it).

With ``--card`` it first imports the design card's other packages (pydantic-settings,
structlog, tenacity, anyio: what every remote-chain command loads), so the two rows together
say what the fixed stack costs before any of remote-chain's own code runs. With ``--fast`` it
connects, imports asyncssh and authenticates as remote-chain does (``remote/early.py``: the
TCP connect and version line begun before the import; ``remote/liblookup.py``: no gcc for the
liboqs lookup; ``remote/fastauth.py``: the first key's signature in the first request),
so stock asyncssh's rows stay the fixed stack's price and this one says what remote-chain's
own connection pays.

Run as ``python floor.py [--card] [--fast] HOST PORT USER IDENTITY KNOWN_HOSTS``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # run as a script too: it imports nothing of the bench's
    from benchlib.baselines import SshTarget


def argv(target: SshTarget, *, card: bool = False, fast: bool = False) -> list[str]:
    """The floor client's command line for one target; ``card``: with the card's packages;
    ``fast``: remote-chain's authentication."""
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        *(["--card"] if card else []),
        *(["--fast"] if fast else []),
        target.host,
        str(target.port),
        target.user,
        str(target.identity_file),
        str(target.known_hosts),
    ]


def _main() -> None:
    import asyncio  # noqa: PLC0415 - timed as part of the process, as the CLI's are
    import os  # noqa: PLC0415

    args = sys.argv[1:]
    card, fast = "--card" in args, "--fast" in args
    args = [a for a in args if a not in ("--card", "--fast")]
    if card:
        import anyio  # noqa: F401, PLC0415
        import pydantic_settings  # noqa: F401, PLC0415
        import tenacity  # noqa: F401, PLC0415

        # structlog as remote_chain.logconfig imports it: rich and colorama hidden.
        sys.modules["rich"] = sys.modules["colorama"] = None  # type: ignore[assignment]
        import structlog  # noqa: F401, PLC0415

        del sys.modules["rich"], sys.modules["colorama"]
    host, port, user, key, known = args[:5]

    async def run() -> int:
        factory: Any = None  # asyncssh's own SSHClient
        sock, version = None, ""
        if fast:
            # remote-chain's own connection: begun before the import (remote/early.py), then
            # asyncssh imported without the gcc probe and authenticating in one flight.
            from remote_chain.remote import early  # noqa: PLC0415
            from remote_chain.remote.endpoint import Endpoint  # noqa: PLC0415
            from remote_chain.remote.liblookup import without_compiler  # noqa: PLC0415

            # No ssh config, as asyncssh is given none below (an empty file: begin reads it).
            empty = Path(known).with_name("floor_ssh_config")
            empty.touch()
            endpoint = Endpoint(
                name="floor",
                host=host,
                port=int(port),
                user=user,
                identity_file=Path(key),
                known_hosts=Path(known),
                ssh_config=empty,
            )
            guess = early.begin(endpoint)
            with without_compiler():
                import asyncssh  # noqa: PLC0415
            from remote_chain.remote import fastauth  # noqa: PLC0415

            if guess is not None and fastauth.VERSION_AHEAD:
                sock = await guess.connected()
                version = guess.software if sock is not None else ""
            factory = fastauth.client_factory(prefer_first_key=True, version_sent=bool(version))
        else:
            import asyncssh  # noqa: PLC0415

        async with asyncssh.connect(
            host,
            int(port),
            username=user,
            client_keys=[key],
            known_hosts=known,
            config=[],
            password_auth=False,  # as remote-chain's own connect (remote/ssh.py)
            kbdint_auth=False,
            client_factory=factory,
            sock=sock,
            client_version=version or (),
        ) as conn:
            result = await conn.run("true", check=False)
            return int(result.exit_status or 0)

    code = asyncio.run(run())
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    _main()
