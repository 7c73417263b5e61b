"""The openssh transport: the system ``ssh`` over the user's existing ControlMaster.

For sites that demand MFA on every login: the user opens a master once (and answers the
prompts), and every command here rides it as a multiplexed session. Nothing here prompts:
``BatchMode=yes``, and stdin carries the script. Sessions over a master count against the
server's ``MaxSessions`` like asyncssh's channels, so the same capacity limit applies.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import anyio.abc
import structlog

from remote_chain.errors import (
    AuthenticationError,
    ConfigError,
)
from remote_chain.protocol.markers import REMOTE_COMMAND, wrap
from remote_chain.transport.base import (
    ClosingContext,
    CommandResult,
    result_from_output,
)
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.opensshrun import SSH, SSH_FAILED, run_capped, run_ssh, ssh_failed
from remote_chain.transport.sshconfig import (
    DEFAULT_CONNECT_TIMEOUT,
    MAX_HOPS,
    follow_jump,
    split_jump,
)

_log = structlog.get_logger()


@dataclass(frozen=True)
class _Resolved:
    """What ``ssh -G`` says about the target, and the options that follow from it."""

    options: tuple[str, ...]
    connect_timeout: float
    control_path: str | None
    keepalive_interval: float | None = None  # None: ours; else the config's ServerAliveInterval


def _config_options(endpoint: Endpoint) -> list[str]:
    return ["-F", str(endpoint.ssh_config.expanduser())] if endpoint.ssh_config else []


def _target_options(endpoint: Endpoint, extra: Sequence[str] = ()) -> list[str]:
    """Options naming the target, shared by the master command and every client: ``%h``,
    ``%p`` and ``%r`` in a ControlPath expand from these, so both sides must agree. Only the
    profile's set fields: the rest is the ssh config's."""
    options: list[str] = _config_options(endpoint)
    if endpoint.control_path is not None:
        options += ["-o", f"ControlPath={endpoint.control_path}"]
    if endpoint.port is not None:
        options += ["-p", str(endpoint.port)]
    if endpoint.user is not None:
        options += ["-l", endpoint.user]
    if endpoint.identity_file is not None:
        options += ["-i", str(endpoint.identity_file)]
    # Host keys are always verified, whatever the config says (never accept-new).
    options += ["-o", "StrictHostKeyChecking=yes"]
    if endpoint.known_hosts is not None:
        options += ["-o", f"UserKnownHostsFile={endpoint.known_hosts}"]
    return options + list(extra)


def master_command(endpoint: Endpoint, extra: Sequence[str] = ()) -> str:
    """The shell command a user runs (and answers MFA in) to open the ControlMaster."""
    return shlex.join([SSH, "-fNM", *_target_options(endpoint, extra), endpoint.host])


def _check_argv(endpoint: Endpoint, resolved: _Resolved) -> list[str]:
    return [
        SSH,
        "-o",
        "BatchMode=yes",
        *_target_options(endpoint, resolved.options),
        "-O",
        "check",
        "--",
        endpoint.host,
    ]


def _run_argv(endpoint: Endpoint, resolved: _Resolved, command: str = REMOTE_COMMAND) -> list[str]:
    # ``command`` is always a fixed string (REMOTE_COMMAND, or open's probe): the script goes
    # on stdin, never in ssh's argv, which this machine's `ps` shows.
    # The config's ServerAliveInterval when it sets one (a command-line -o would beat it).
    alive = math.ceil(resolved.keepalive_interval or endpoint.keepalive_interval)
    return [
        SSH,
        "-T",  # no pty: stdout and stderr stay apart, no \r\n translation
        "-o", "BatchMode=yes",
        "-o", "ControlMaster=no",  # use the master, never become one
        "-o", f"ConnectTimeout={math.ceil(resolved.connect_timeout)}",
        "-o", f"ServerAliveInterval={alive}",
        *_target_options(endpoint, resolved.options),
        "--",
        endpoint.host,
        command,
    ]  # fmt: skip


def parse_ssh_g(text: str) -> dict[str, list[str]]:
    """``ssh -G`` output: one ``key value...`` per line, keys lower case; repeats collected."""
    options: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            options.setdefault(key.lower(), []).append(value.strip())
    return options


def refuse_unchecked(options: dict[str, list[str]], what: str, source: str) -> None:
    """A ``ConfigError`` if the resolved options turn host-key checking off."""
    strict = (options.get("stricthostkeychecking") or [""])[0].lower()
    known = " ".join(options.get("userknownhostsfile") or [])
    problem = None
    if strict in ("false", "no", "off"):
        problem = f"StrictHostKeyChecking {strict}"
    elif any(part.lower() in ("none", "/dev/null") for part in known.split()):
        problem = f"UserKnownHostsFile {known}"
    if problem is not None:
        raise ConfigError(
            f"the ssh config turns host-key checking off for {what} ({problem}); "
            "remote-chain always verifies host keys, of jump hosts too: remove that line "
            "for this host, or name a real known_hosts file in the profile's `known_hosts`",
            source=source,
        )


def _proxy_command(endpoint: Endpoint, hops: Sequence[str]) -> str:
    """A ProxyCommand reaching the last of ``hops`` through the ones before it, each hop
    verified strictly against the profile's known_hosts and using its identity: ``-J``
    would start the hop's ssh without our ``-o``/``-i`` options."""
    command = ""
    for spec in hops:
        user, host, port = split_jump(spec)
        argv = [SSH, *_config_options(endpoint), "-o", "BatchMode=yes"]
        argv += ["-o", "StrictHostKeyChecking=yes"]
        if endpoint.known_hosts is not None:
            argv += ["-o", f"UserKnownHostsFile={endpoint.known_hosts}"]
        if endpoint.identity_file is not None:
            argv += ["-i", str(endpoint.identity_file)]
        if command:
            # The outer ssh expands %-tokens once more: double the inner command's.
            argv += ["-o", f"ProxyCommand={command.replace('%', '%%')}"]
        if user is not None:
            argv += ["-l", user]
        if port is not None:
            argv += ["-p", str(port)]
        command = shlex.join([*argv, "-W", "[%h]:%p", "--", host])
    return command


async def _ssh_g(endpoint: Endpoint, host: str, options: Sequence[str]) -> dict[str, list[str]]:
    argv = [SSH, *_config_options(endpoint), *options, "-G", "--", host]
    completed = await run_ssh(endpoint, argv, stdin=None, limit=10, doing="connect")
    if completed.returncode != 0:
        reason = completed.stderr.decode("utf-8", "replace").strip()
        raise ConfigError(
            f"`ssh -G {host}` failed: {reason}",
            source=str(endpoint.ssh_config or "ssh config"),
        )
    return parse_ssh_g(completed.stdout.decode("utf-8", "replace"))


async def _jump_specs(
    endpoint: Endpoint, jump: str | None, source: str, *, seen: tuple[str, ...]
) -> list[str]:
    """The jump hosts of one ProxyJump value, each checked by ``ssh -G``; the first one's own
    ProxyJump first, as OpenSSH follows it (``sshconfig._jumps`` says why). Our ProxyCommand
    chain then reaches every one of them with our checks: an ssh that followed a ProxyJump by
    itself would check the bastion against the default known_hosts only."""
    if jump is None or jump.lower() == "none":
        return []
    specs = [part.strip() for part in jump.split(",") if part.strip()]
    out: list[str] = []
    for index, spec in enumerate(specs):
        user, host, port = split_jump(spec)
        hop_options = (["-l", user] if user else []) + (["-p", str(port)] if port else [])
        resolved = await _ssh_g(endpoint, host, hop_options)
        refuse_unchecked(resolved, f"jump host {host!r}", source)
        own = (resolved.get("proxyjump") or [""])[0]
        if index == 0 and own and own.lower() != "none":
            inner = follow_jump(seen, host, source)
            out += await _jump_specs(endpoint, own, source, seen=inner)
        out.append(spec)
        if len(out) > MAX_HOPS:
            raise ConfigError(f"more than {MAX_HOPS} jump hosts reaching {jump!r}", source=source)
    return out


async def _resolve(endpoint: Endpoint) -> _Resolved:
    """The target and every jump host as ``ssh -G`` resolves them; refuses unchecked ones."""
    source = str(endpoint.ssh_config or "ssh config")
    mine: list[str] = []
    if endpoint.port is not None:
        mine += ["-p", str(endpoint.port)]
    if endpoint.user is not None:
        mine += ["-l", endpoint.user]
    target = await _ssh_g(endpoint, endpoint.host, mine)
    refuse_unchecked(target, f"host {endpoint.host!r}", source)
    jump = endpoint.proxy_jump or (target.get("proxyjump") or [""])[0] or None
    extra: list[str] = []
    hops = await _jump_specs(endpoint, jump, source, seen=(endpoint.host,))
    if hops:
        extra = ["-o", f"ProxyCommand={_proxy_command(endpoint, hops)}"]
    timeout = endpoint.connect_timeout
    if timeout is None:
        configured = (target.get("connecttimeout") or ["none"])[0]
        timeout = float(configured) if configured.isdigit() else DEFAULT_CONNECT_TIMEOUT
    control_path = endpoint.control_path
    if control_path is None:
        configured = (target.get("controlpath") or ["none"])[0]
        control_path = None if configured.lower() == "none" else configured
    alive = (target.get("serveraliveinterval") or ["0"])[0]
    keepalive = float(alive) if alive.isdigit() and alive != "0" else None
    return _Resolved(tuple(extra), timeout, control_path, keepalive)


class OpensshRemote(ClosingContext):
    """A ``Remote`` over the system ``ssh``: an existing ControlMaster when the profile or
    the ssh config names a ControlPath, else one ``ssh`` login per command (keys only)."""

    def __init__(self, endpoint: Endpoint, resolved: _Resolved | None = None) -> None:
        self._endpoint = endpoint
        self._resolved = resolved or _Resolved(
            (), endpoint.connect_timeout or DEFAULT_CONNECT_TIMEOUT, endpoint.control_path
        )
        self._limiter = anyio.CapacityLimiter(endpoint.max_channels)

    @property
    def name(self) -> str:
        return self._endpoint.name

    @classmethod
    async def open(cls, endpoint: Endpoint) -> OpensshRemote:
        """Resolve the config as ``ssh -G`` does, then check a ControlMaster is up (or, with
        none configured, that a login works); errors say what to run or fix."""
        started = time.monotonic()
        resolved = await _resolve(endpoint)
        if resolved.control_path is not None:
            completed = await run_ssh(
                endpoint,
                _check_argv(endpoint, resolved),
                stdin=None,
                limit=resolved.connect_timeout,
                doing="connect",
            )
            if completed.returncode != 0:
                reason = completed.stderr.decode("utf-8", "replace").strip()
                raise AuthenticationError(
                    f"no ssh ControlMaster is running for {endpoint.host} ({reason}). "
                    "Open one (and answer any MFA prompt) with: "
                    f"{master_command(endpoint, resolved.options)}",
                    host=endpoint.name,
                )
        else:
            completed = await run_ssh(
                endpoint,
                _run_argv(endpoint, resolved, "exit 0"),
                stdin=b"",
                limit=resolved.connect_timeout + 1,
                doing="connect",
            )
            if completed.returncode != 0:
                raise ssh_failed(endpoint, completed.stderr)
        seconds = round(time.monotonic() - started, 3)
        _log.debug(
            "ssh_connected",
            cluster=endpoint.name,
            host=endpoint.host,
            seconds=seconds,
            transport="openssh",
        )
        return cls(endpoint, resolved)

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        """Run ``script`` in a remote login shell; a non-zero exit is in the result."""
        wrapped, nonce = wrap(script)
        limit = self._endpoint.command_timeout if timeout is None else timeout
        async with self._limiter:
            started = time.monotonic()
            stdout, stderr, returncode = await run_capped(
                self._endpoint,
                _run_argv(self._endpoint, self._resolved),
                wrapped.encode(),
                limit,
            )
        result = result_from_output(
            name=self.name,
            nonce=nonce,
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            exit_status=returncode,
            lost=returncode == SSH_FAILED,
        )
        _log.debug(
            "ssh_command",
            cluster=self.name,
            seconds=round(time.monotonic() - started, 3),
            bytes=len(stdout) + len(stderr),
            exit_status=result.exit_status,
            transport="openssh",
        )
        return result

    async def aclose(self) -> None:
        """Nothing to close: the ControlMaster is the user's, and outlives us on purpose."""
