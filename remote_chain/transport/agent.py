"""The persistent connection: an agent process keeps one cluster's SSH
connection and runs later commands' scripts over it, like OpenSSH's ControlPersist.

Opt-in (profile ``persist = "10m"`` or ``REMOTE_CHAIN_PERSIST``); the direct path stays the
default and is what every failure here falls back to. The agent is ``python -m
remote_chain.transport.agentd``, started by the first command that wants it (or by
``remote-chain agent start``), and reached over a Unix socket:

- in ``$XDG_RUNTIME_DIR/remote-chain/``, else the per-user ``<state dir>/agent/``: a folder of
  mode 700 owned by the user, checked (``lstat``: no symlink, our uid, no group or other
  bits) before every use, and the socket itself bound under umask 177 (mode 600);
- every accepted peer's uid is read with ``SO_PEERCRED`` and must be ours; any other peer is
  closed unanswered;
- the socket's name is a hash of the endpoint, of the bytes of the known_hosts file, the
  ssh config and the profile, and of the host (an NFS home shared by several machines), and
  the agent exits as soon as one of them changes (checked
  every second), or after
  ``persist`` seconds without a request: it never outlives a changed profile or host key;
- it connects with ``SshRemote.open``, the direct path's own code: the same host-key checks,
  and its errors travel back by class name, so exit codes and JSON are the same.
- it runs the scripts over one persistent shell channel (``shell.py``: 1 RTT a
  command instead of an exec's channel open and exec request), and as execs whenever that
  channel is busy or broken; ``ping`` answers name the channel's remote PID (``shell_pid``).

Protocol: one JSON line each way per Unix connection; ``op`` is ``run``, ``ping`` or
``stop``. A connection refused or a socket without an agent is stale: the client removes it
and falls back to the direct path with one log line (``agent_unavailable``). An agent that
dies mid-command is a ``ConnectError`` (transient, like a cut SSH connection: the command
may have run), and the session goes direct from then on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import SocketStream

from remote_chain import errors
from remote_chain.errors import (
    ConfigError,
    ConnectError,
    RemoteError,
    RemoteTimeout,
)
from remote_chain.transport.base import ClosingContext, CommandResult, Remote
from remote_chain.transport.endpoint import DEFAULT_CONNECT_TIMEOUT, Endpoint
from remote_chain.transport.privsock import private_folder
from remote_chain.transport.ssh import SshRemote

_log = structlog.get_logger()

PROTOCOL = 1
READY = "READY"
MAX_MESSAGE = 64 << 20  # bytes of one reply at most: room for a status of 10,000 chains
START_TIMEOUT_EXTRA = 5.0  # seconds beyond connect_timeout for the agent to say READY
WATCH_PERIOD = 1.0
# Exceptions whose class travels by name; anything else arrives as a RemoteError.
_ERRORS: dict[str, type[RemoteError]] = {
    cls.__name__: cls
    for cls in (
        errors.RemoteError,
        errors.ConnectError,
        errors.RemoteTimeout,
        errors.AuthenticationError,
        errors.HostKeyError,
    )
}


# --- where the socket lives ------------------------------------------------------------------
def agent_folder(endpoint: Endpoint, environ: dict[str, str] | None = None) -> Path:
    """``$XDG_RUNTIME_DIR/remote-chain``, else the endpoint's per-user state folder."""
    env = os.environ if environ is None else environ
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime and Path(runtime).is_absolute():
        return Path(runtime) / "remote-chain"
    if endpoint.agent_dir is None:
        raise ConfigError("no folder for the agent's socket", field="persist")
    return endpoint.agent_dir


def fingerprint(endpoint: Endpoint) -> str:
    """What an agent is for: the endpoint, the bytes of known_hosts and watched files, and
    this host."""
    # Not `persist`: an agent started by `agent start` serves commands whatever they ask.
    fields = {k: str(v) for k, v in sorted(dataclasses.asdict(endpoint).items()) if k != "persist"}
    digest = hashlib.sha256(json.dumps(fields).encode())
    # The host, so the socket's name too: without XDG_RUNTIME_DIR the socket is in the state
    # folder, which an NFS home shares between machines; there another host's socket is
    # refused, read as stale, unlinked, and a second agent started (as `launch.socket_name`).
    digest.update(os.uname().nodename.encode() + b"\0")
    for path in _watched(endpoint):
        digest.update(str(path).encode() + b"\0" + _read(path) + b"\0")
    return digest.hexdigest()


def socket_path(endpoint: Endpoint, *, create: bool = True) -> Path:
    """The agent's socket; ``create``: make and check the folder (else only name it)."""
    folder = agent_folder(endpoint)
    if create:
        private_folder(folder)
    # Short: a Unix socket path is at most 107 bytes.
    return folder / f"{fingerprint(endpoint)[:24]}.sock"


def _watched(endpoint: Endpoint) -> list[Path]:
    known_hosts = (endpoint.known_hosts or Path("~/.ssh/known_hosts")).expanduser()
    ssh_config = (endpoint.ssh_config or Path("~/.ssh/config")).expanduser()
    return [known_hosts, ssh_config, *endpoint.watch]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b"(unreadable)"


# --- the wire --------------------------------------------------------------------------------
async def send_message(stream: SocketStream, message: dict[str, Any]) -> None:
    await stream.send((json.dumps(message) + "\n").encode())


async def receive_message(stream: SocketStream) -> dict[str, Any] | None:
    """One JSON line, or None if the other end closed first."""
    data = bytearray()
    while not data.endswith(b"\n"):
        try:
            data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return None
        if len(data) > MAX_MESSAGE:
            return None
    message = json.loads(data)
    return message if isinstance(message, dict) else None


def endpoint_json(endpoint: Endpoint) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in dataclasses.asdict(endpoint).items():
        if isinstance(value, Path):
            out[key] = str(value)
        elif isinstance(value, tuple):
            out[key] = [str(v) for v in value]
        else:
            out[key] = value
    return out


def endpoint_from_json(doc: dict[str, Any]) -> Endpoint:
    paths = {"identity_file", "known_hosts", "agent_dir", "ssh_config"}
    kwargs: dict[str, Any] = {
        k: (Path(v) if k in paths and v is not None else v) for k, v in doc.items()
    }
    kwargs["watch"] = tuple(Path(p) for p in doc.get("watch", ()))
    return Endpoint(**kwargs)


# --- the client side -------------------------------------------------------------------------
class AgentRemote(ClosingContext):
    """A ``Remote`` whose commands run in the agent; goes direct once the agent is gone."""

    def __init__(self, endpoint: Endpoint, path: Path) -> None:
        self._endpoint = endpoint
        self._path = path
        self._direct: Remote | None = None
        self._lock = anyio.Lock()

    @property
    def name(self) -> str:
        return self._endpoint.name

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        if self._direct is not None:
            return await self._direct.run(script, timeout=timeout, sensitive=sensitive)
        request = {"op": "run", "script": script, "timeout": timeout, "sensitive": sensitive}
        limit = (self._endpoint.command_timeout if timeout is None else timeout) + 10
        try:
            stream = await anyio.connect_unix(self._path)
        except OSError as exc:  # the agent exited between commands: go direct
            return await (await self._go_direct(f"connect: {exc}")).run(
                script, timeout=timeout, sensitive=sensitive
            )
        async with stream:
            request.update(v=PROTOCOL, fingerprint=fingerprint(self._endpoint))
            try:
                await send_message(stream, request)
                with anyio.fail_after(limit):
                    reply = await receive_message(stream)
            except TimeoutError:
                # The agent enforces the command's own timeout; this is a hung agent.
                raise RemoteTimeout(
                    f"command through the agent got no answer in {limit:g} s", host=self.name
                ) from None
            except (OSError, anyio.BrokenResourceError, ValueError):
                reply = None  # reset, or a torn reply: the agent died while answering
        if reply is not None and "stale" in reply:  # refused before running: safe to go direct
            direct = await self._go_direct("the agent serves a changed profile or host key")
            return await direct.run(script, timeout=timeout, sensitive=sensitive)
        if reply is None:
            await self._go_direct("the agent went away during a command")
            raise ConnectError(
                "the persistent connection's agent went away during a command; "
                "it may have run. Later commands connect directly.",
                host=self.name,
            )
        return _result(reply, self.name)

    async def _go_direct(self, why: str) -> Remote:
        async with self._lock:
            if self._direct is None:
                _log.warning("agent_unavailable", cluster=self.name, reason=why)
                self._direct = await SshRemote.open(self._endpoint)
        return self._direct

    async def aclose(self) -> None:
        if self._direct is not None:
            await self._direct.aclose()


def _result(reply: dict[str, Any], name: str) -> CommandResult:
    if "error" in reply:
        kind, message = str(reply["error"].get("kind")), str(reply["error"].get("message"))
        if kind == "ConfigError":
            raise ConfigError(message)
        raise _ERRORS.get(kind, RemoteError)(message, host=name)
    ok = reply["ok"]
    return CommandResult(
        int(ok["exit_status"]), str(ok["stdout"]), str(ok["stderr"]), str(ok["noise"])
    )


async def request(
    path: Path, message: dict[str, Any], timeout: float = 5.0
) -> dict[str, Any] | None:
    """One request to the agent at ``path``; None if none answers there."""
    try:
        with anyio.fail_after(timeout):
            async with await anyio.connect_unix(path) as stream:
                await send_message(stream, {**message, "v": PROTOCOL})
                return await receive_message(stream)
    except (OSError, TimeoutError, ValueError, anyio.BrokenResourceError):
        return None


async def open_via_agent(endpoint: Endpoint) -> Remote | None:
    """A Remote through the endpoint's agent; None: go direct.

    With ``persist`` the agent is started if none answers; without, a running one (``agent
    start``) is used if its socket exists, and nothing is created. Every fallback to the
    direct path is logged once (``agent_unavailable``), except "no agent and none wanted".
    """
    if endpoint.persist <= 0:
        try:
            if not _exists(socket_path(endpoint, create=False)):
                return None
        except (ConfigError, OSError):  # no folder for agents at all: none was started
            return None
    try:
        path = socket_path(endpoint)
    except (ConfigError, OSError) as exc:
        _log.warning("agent_unavailable", cluster=endpoint.name, reason=str(exc))
        return None
    answer = await request(path, {"op": "ping"})
    if answer is not None:
        return AgentRemote(endpoint, path)
    if endpoint.persist <= 0:  # a stale socket of an agent that is gone
        unlink_socket(path)
        _log.warning("agent_unavailable", cluster=endpoint.name, reason=f"stale socket {path}")
        return None
    return AgentRemote(endpoint, path) if await start_agent(endpoint, path) else None


def _exists(path: Path) -> bool:
    return path.exists()


async def start_agent(endpoint: Endpoint, path: Path) -> bool:
    """Start the agent for ``endpoint`` and wait for it to connect; False (logged) on failure."""
    unlink_socket(path)  # a stale socket: no agent answered on it (in our own 700 folder)
    config = json.dumps({"endpoint": endpoint_json(endpoint), "socket": str(path)})
    try:
        # Through a shell that backgrounds it and exits at once: the agent is nobody's child
        # to wait for, and outlives this command (its own session: Ctrl-C here does not
        # reach it). Our pipe stays its stdin through fd 3: a background job's stdin is
        # /dev/null before its own redirections apply.
        process = await anyio.open_process(
            [
                "/bin/sh",
                "-c",
                'exec 3<&0; "$0" -m remote_chain.transport.agentd <&3 3<&- &',
                sys.executable,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        _log.warning("agent_unavailable", cluster=endpoint.name, reason=f"cannot start: {exc}")
        return False
    line = b""
    async with process:
        if process.stdin is None or process.stdout is None:  # pragma: no cover - asked for pipes
            raise RemoteError("agent started without pipes", host=endpoint.name)
        connect = endpoint.connect_timeout or DEFAULT_CONNECT_TIMEOUT
        with anyio.move_on_after(connect + START_TIMEOUT_EXTRA):
            await process.stdin.send(config.encode() + b"\n")
            await process.stdin.aclose()
            while not line.endswith(b"\n"):
                try:
                    line += await process.stdout.receive()
                except anyio.EndOfStream:
                    break
        await process.stdout.aclose()
    text = line.decode(errors="replace").strip()
    if text == READY:
        return True
    # A failed connection ("ERROR ...") is reported again, in full, by the direct path; an
    # agent still connecting gives up by itself after connect_timeout.
    _log.warning("agent_unavailable", cluster=endpoint.name, reason=text or "no answer")
    return False


def unlink_socket(path: Path, inode: int | None = None) -> None:
    """Remove a socket file (only if it is still ``inode``, not a successor's)."""
    with contextlib.suppress(FileNotFoundError):
        if inode is None or path.stat().st_ino == inode:
            path.unlink()
