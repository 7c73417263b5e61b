"""The ``Remote`` seam: the only way the rest of remote-chain runs anything on a cluster.

Two transports implement it: ``ssh.SshRemote`` (asyncssh, the default) and
``openssh.OpensshRemote`` (the system ``ssh`` over the user's ControlMaster, for MFA sites);
``connect.open_remote`` opens the one a profile names (through its agent when one runs).
This module holds what they share: the protocol, the result, and reading a wrapped script's
output. Use::

    async with await open_remote(endpoint) as remote:
        result = await remote.run("squeue --me --noheader")
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from remote_chain.errors import ConnectError, RemoteError
from remote_chain.protocol.markers import MarkerError, split_stderr, unwrap

__all__ = ["ClosingContext", "CommandResult", "Remote", "output_too_large", "result_from_output"]


@dataclass(frozen=True)
class CommandResult:
    """What a script printed and how it exited; a non-zero exit is data, not an exception.

    ``noise`` is what the login shell printed before the script started (stdout, then
    stderr): MOTD, ``module`` init and the like, kept for ``doctor`` and debug logs.
    """

    exit_status: int
    stdout: str
    stderr: str
    noise: str


class Remote(Protocol):
    """One cluster, reached over one connection for the whole invocation."""

    @property
    def name(self) -> str:
        """The cluster's name, as every error from this remote names it."""
        ...

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        """Run a bash script in a login shell; ``timeout`` defaults to the endpoint's.

        ``sensitive``: the script carries secrets, so it travels on stdin only, never in the
        env request that saves the asyncssh transport a round trip otherwise (sshd logs env
        values at DEBUG2; ``markers.script_env``). No script is ever in a command line.
        """
        ...

    async def aclose(self) -> None:
        """Close the connection; bounded, and safe to call twice."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None: ...


class ClosingContext:
    """``async with`` support shared by both transports: leaving the block calls ``aclose``."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def output_too_large(name: str, limit: int) -> RemoteError:
    """The error for a command whose output passed ``limit`` bytes (shared by both transports).

    Not transient: a login shell that floods (an rc file printing endless output) floods again.
    """
    return RemoteError(
        f"{name} printed more than {limit} bytes (REMOTE_CHAIN_MAX_OUTPUT_BYTES); the command "
        "was stopped. A login shell printing endless output (.bashrc, .profile, MOTD) is the "
        "usual cause: check with `ssh <host> true | wc -c`",
        host=name,
    )


def result_from_output(
    *, name: str, nonce: str, stdout: str, stderr: str, exit_status: int | None, lost: bool
) -> CommandResult:
    """Unwrap a wrapped script's output; shared by both transports.

    ``lost`` says the transport itself failed (channel closed without an exit status, or
    ``ssh`` exiting 255): missing markers then mean a cut connection, a transient error.
    Otherwise the login shell exited before running the script (``.bash_profile`` calling
    ``exit``, no bash on the host), which retrying will not fix.
    """
    stderr_payload, stderr_noise = split_stderr(stderr, nonce)
    try:
        payload, status, noise = unwrap(stdout, nonce)
    except MarkerError as exc:
        detail = f"{exc}; exit status {exit_status}; stderr: {stderr_payload.strip()[-500:]!r}"
        if lost:
            raise ConnectError(
                f"connection lost while running a command: {detail}", host=name
            ) from exc
        raise RemoteError(f"the login shell did not run the command: {detail}", host=name) from exc
    return CommandResult(status, payload, stderr_payload, noise + stderr_noise)
