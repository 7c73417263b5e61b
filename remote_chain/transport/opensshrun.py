"""Running the system ``ssh`` for the openssh transport: one process per command, its
output capped, its own failures (exit 255, its stderr) mapped to ``remote_chain.errors``."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from typing import Literal

import anyio
import anyio.abc

from remote_chain.errors import (
    AuthenticationError,
    ConnectError,
    HostKeyError,
    HostNotFoundError,
    RefusedError,
    RemoteError,
    RemoteTimeout,
)
from remote_chain.transport.base import output_too_large
from remote_chain.transport.endpoint import Endpoint

SSH = "ssh"
# ssh exits 255 for its own errors (connection, authentication, mux); a remote command's
# status is passed through otherwise, and ours is always 0 once the end marker is printed.
SSH_FAILED = 255


# ssh's exit and stderr when it failed itself, mapped to our classes (ssh has no structured
# errors; these are its own messages, stable across OpenSSH 7-9).
_STDERR_CLASSES: tuple[tuple[str, type[RemoteError]], ...] = (
    ("Could not resolve hostname", HostNotFoundError),
    ("Host key verification failed", HostKeyError),
    ("host key for", HostKeyError),
    ("Permission denied", AuthenticationError),
    ("timed out", RemoteTimeout),
    ("Connection refused", RefusedError),
)


async def run_ssh(
    endpoint: Endpoint,
    argv: list[str],
    *,
    stdin: bytes | None,
    limit: float,
    doing: Literal["connect", "command"],
) -> subprocess.CompletedProcess[bytes]:
    with mapped(endpoint, doing, limit), anyio.fail_after(limit):
        # On timeout run_process kills ssh, which closes the multiplexed session.
        return await anyio.run_process(argv, input=stdin, check=False)


@contextlib.contextmanager
def mapped(
    endpoint: Endpoint, doing: Literal["connect", "command"], limit: float
) -> Iterator[None]:
    """Running ``ssh`` itself failed: our errors, naming the cluster (one mapping for both)."""
    try:
        yield
    except TimeoutError as exc:  # before OSError: TimeoutError is an OSError
        raise RemoteTimeout(
            f"{doing} on {endpoint.host} took longer than {limit:g} s", host=endpoint.name
        ) from exc
    except FileNotFoundError as exc:
        raise RemoteError(f"`{SSH}` not found on PATH: {exc}", host=endpoint.name) from exc
    except OSError as exc:
        raise ConnectError(f"cannot run `{SSH}`: {exc}", host=endpoint.name) from exc


async def _drain(
    stream: anyio.abc.ByteReceiveStream,
    sink: bytearray,
    budget: list[int],
    process: anyio.abc.Process,
) -> None:
    """Read ``stream`` to its end into ``sink``; past the budget, kill ssh instead."""
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
        while True:
            chunk = await stream.receive()
            budget[0] -= len(chunk)
            if budget[0] < 0:
                process.kill()  # the other stream then ends too
                return
            sink += chunk


async def run_capped(
    endpoint: Endpoint, argv: list[str], stdin: bytes, limit: float
) -> tuple[bytes, bytes, int]:
    """``ssh`` with ``stdin``, its output capped at the endpoint's ``max_output_bytes``."""
    cap = endpoint.max_output_bytes
    with mapped(endpoint, "command", limit):
        with anyio.fail_after(limit):
            # On timeout the process is killed on leaving the block, closing the session.
            async with await anyio.open_process(argv) as process:
                stdin_pipe, stdout, stderr = process.stdin, process.stdout, process.stderr
                if stdin_pipe is None or stdout is None or stderr is None:  # pipes by default
                    raise RemoteError("ssh started without pipes", host=endpoint.name)
                budget = [cap]
                out, err = bytearray(), bytearray()
                async with anyio.create_task_group() as group:
                    group.start_soon(_drain, stdout, out, budget, process)
                    group.start_soon(_drain, stderr, err, budget, process)
                    with contextlib.suppress(anyio.BrokenResourceError):
                        await stdin_pipe.send(stdin)
                    await stdin_pipe.aclose()
                returncode = await process.wait()
                if budget[0] < 0:
                    raise output_too_large(endpoint.name, cap)
                return bytes(out), bytes(err), returncode


def ssh_failed(endpoint: Endpoint, stderr: bytes) -> RemoteError:
    """ssh's own failure (exit 255) as one of our classes, its message kept."""
    reason = stderr.decode("utf-8", "replace").strip()[-500:]
    for needle, kind in _STDERR_CLASSES:
        if needle.lower() in reason.lower():
            return kind(f"ssh to {endpoint.host} failed: {reason}", host=endpoint.name)
    return ConnectError(f"ssh to {endpoint.host} failed: {reason}", host=endpoint.name)
