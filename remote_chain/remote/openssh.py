"""The openssh transport: the system ``ssh`` over the user's existing ControlMaster.

For sites that demand MFA on every login: the user opens a master once (and answers the
prompts), and every command here rides it as a multiplexed session. Nothing here prompts:
``BatchMode=yes``, and stdin carries the script. Sessions over a master count against the
server's ``MaxSessions`` like asyncssh's channels, so the same capacity limit applies.
"""

from __future__ import annotations

import math
import shlex
import subprocess
import time
from typing import Literal

import anyio
import structlog

from remote_chain.errors import AuthenticationError, ConnectError, RemoteError, RemoteTimeout
from remote_chain.remote import ClosingContext, CommandResult, result_from_output
from remote_chain.remote.endpoint import Endpoint
from remote_chain.remote.markers import REMOTE_COMMAND, inline_command, wrap

_log = structlog.get_logger()

SSH = "ssh"
# ssh exits 255 for its own errors (connection, authentication, mux); a remote command's
# status is passed through otherwise, and ours is always 0 once the end marker is printed.
SSH_FAILED = 255


def _target_options(endpoint: Endpoint) -> list[str]:
    """Options naming the target, shared by the master command and every client: ``%h``,
    ``%p`` and ``%r`` in a ControlPath expand from these, so both sides must agree."""
    options: list[str] = []
    if endpoint.control_path is not None:
        options += ["-o", f"ControlPath={endpoint.control_path}"]
    if endpoint.port is not None:
        options += ["-p", str(endpoint.port)]
    if endpoint.user is not None:
        options += ["-l", endpoint.user]
    if endpoint.identity_file is not None:
        options += ["-i", str(endpoint.identity_file)]
    if endpoint.known_hosts is not None:
        options += ["-o", f"UserKnownHostsFile={endpoint.known_hosts}"]
    if endpoint.proxy_jump is not None:
        options += ["-J", endpoint.proxy_jump]
    return options


def master_command(endpoint: Endpoint) -> str:
    """The shell command a user runs (and answers MFA in) to open the ControlMaster."""
    return shlex.join([SSH, "-fNM", *_target_options(endpoint), endpoint.host])


def _check_argv(endpoint: Endpoint) -> list[str]:
    return [
        SSH,
        "-o",
        "BatchMode=yes",
        *_target_options(endpoint),
        "-O",
        "check",
        "--",
        endpoint.host,
    ]


def _run_argv(endpoint: Endpoint, command: str = REMOTE_COMMAND) -> list[str]:
    return [
        SSH,
        "-T",  # no pty: stdout and stderr stay apart, no \r\n translation
        "-o", "BatchMode=yes",
        "-o", "ControlMaster=no",  # use the master, never become one
        "-o", f"ConnectTimeout={math.ceil(endpoint.connect_timeout)}",
        "-o", f"ServerAliveInterval={math.ceil(endpoint.keepalive_interval)}",
        *_target_options(endpoint),
        "--",
        endpoint.host,
        command,
    ]  # fmt: skip


async def _run_ssh(
    endpoint: Endpoint,
    argv: list[str],
    *,
    stdin: bytes | None,
    limit: float,
    doing: Literal["connect", "command"],
) -> subprocess.CompletedProcess[bytes]:
    try:
        with anyio.fail_after(limit):
            # On timeout run_process kills ssh, which closes the multiplexed session.
            return await anyio.run_process(argv, input=stdin, check=False)
    except TimeoutError as exc:  # before OSError: TimeoutError is an OSError
        raise RemoteTimeout(
            f"{doing} on {endpoint.host} took longer than {limit:g} s", host=endpoint.name
        ) from exc
    except FileNotFoundError as exc:
        raise RemoteError(f"`{SSH}` not found on PATH: {exc}", host=endpoint.name) from exc
    except OSError as exc:
        raise ConnectError(f"cannot run `{SSH}`: {exc}", host=endpoint.name) from exc


class OpensshRemote(ClosingContext):
    """A ``Remote`` over the system ``ssh`` and an existing ControlMaster."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._limiter = anyio.CapacityLimiter(endpoint.max_channels)

    @property
    def name(self) -> str:
        return self._endpoint.name

    @classmethod
    async def open(cls, endpoint: Endpoint) -> OpensshRemote:
        """Check that a ControlMaster is up; without one, say which command opens it."""
        started = time.monotonic()
        completed = await _run_ssh(
            endpoint,
            _check_argv(endpoint),
            stdin=None,
            limit=endpoint.connect_timeout,
            doing="connect",
        )
        if completed.returncode != 0:
            reason = completed.stderr.decode("utf-8", "replace").strip()
            raise AuthenticationError(
                f"no ssh ControlMaster is running for {endpoint.host} ({reason}). "
                f"Open one (and answer any MFA prompt) with: {master_command(endpoint)}",
                host=endpoint.name,
            )
        seconds = round(time.monotonic() - started, 3)
        _log.debug(
            "ssh_connected",
            cluster=endpoint.name,
            host=endpoint.host,
            seconds=seconds,
            transport="openssh",
        )
        return cls(endpoint)

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        """Run ``script`` in a remote login shell; a non-zero exit is in the result."""
        wrapped, nonce = wrap(script)
        command = None if sensitive else inline_command(wrapped)
        limit = self._endpoint.command_timeout if timeout is None else timeout
        async with self._limiter:
            started = time.monotonic()
            completed = await _run_ssh(
                self._endpoint,
                _run_argv(self._endpoint, command or REMOTE_COMMAND),
                stdin=b"" if command else wrapped.encode(),
                limit=limit,
                doing="command",
            )
        result = result_from_output(
            name=self.name,
            nonce=nonce,
            stdout=completed.stdout.decode("utf-8", "replace"),
            stderr=completed.stderr.decode("utf-8", "replace"),
            exit_status=completed.returncode,
            lost=completed.returncode == SSH_FAILED,
        )
        _log.debug(
            "ssh_command",
            cluster=self.name,
            seconds=round(time.monotonic() - started, 3),
            bytes=len(completed.stdout) + len(completed.stderr),
            exit_status=result.exit_status,
            transport="openssh",
        )
        return result

    async def aclose(self) -> None:
        """Nothing to close: the ControlMaster is the user's, and outlives us on purpose."""
