"""The whole exception tree of remote-chain.

::

    RemoteChainError
    ├── ConfigError            bad YAML/TOML, unknown cluster, invalid field (names file and field)
    ├── RemoteError            transport failures, always carrying the cluster/host
    │   ├── ConnectError       transient: refused, reset, unreachable
    │   │   └── RefusedError   nothing listens: retried only briefly (connect_retry)
    │   ├── HostNotFoundError  the name does not resolve: fails at once, never retried
    │   ├── RemoteTimeout      transient: a connect or command took too long
    │   ├── AuthenticationError  never retried
    │   ├── HostKeyError       never retried: unknown or changed host key
    │   └── CommandFailedError a remote command exited non-zero (command, exit status, stderr)
    ├── SlurmError
    │   └── SubmitError        sbatch refused a job, or a submit was lost three times
    ├── StateError             an unsafe, corrupt or inconsistent run folder or state file
    ├── NotFoundError          the run, benchmark or job asked for is not on the cluster
    └── WaitTimeout            ``wait`` reached its ``--timeout`` (exit 4)

Only what is raised is here: accounting that fails or lags is not an error but a status
("unknown", retried by ``retries.accounting_lag``). Whether an error is transient is a
property of its class (``transient``), and so is the fix a user is told (``hint``); retry
policies (retries.py) list classes, never bare ``Exception``. The CLI maps classes to exit
codes in one table.
"""

from __future__ import annotations

from typing import Generic, TypeVar

# What WaitTimeout carries: the last status read (core.results.StatusResult), typed by the
# raiser, so that the tree imports nothing of the library.
R = TypeVar("R")


class RemoteChainError(Exception):
    """Root of every error remote-chain raises on purpose."""

    transient: bool = False
    exit_code: int = 1
    hint: str = ""  # what the user can do about it ("" when nothing specific)


class ConfigError(RemoteChainError):
    """A config file, profile or command-line value is invalid.

    ``source`` names the file (or ``"<command line>"``), ``field`` the dotted field path.
    """

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.message = message
        self.source = source
        self.field = field
        where = ": ".join(part for part in (source, field) if part)
        super().__init__(f"{where}: {message}" if where else message)


class RemoteError(RemoteChainError):
    """The transport to a cluster failed. ``host`` is always named."""

    exit_code = 3

    def __init__(self, message: str, *, host: str):
        self.message = message
        self.host = host
        super().__init__(f"{host}: {message}")


class ConnectError(RemoteError):
    transient = True
    hint = "check host, port and proxy_jump; is the cluster reachable?"


class RefusedError(ConnectError):
    """Nothing listens on the port: a dead host, or an sshd restarting. Retried only for
    ``connect_retry`` seconds, unlike a connection reset mid-handshake (a server that is there).
    """

    hint = "nothing listens there: check host and port (profile or ssh config)"


class RemoteTimeout(RemoteError):
    transient = True
    hint = "the host did not answer in time; check the network or raise the timeout"


class HostNotFoundError(RemoteError):
    """The host name (or a jump host's) does not resolve: like ``ssh``, fail at once.

    Not transient for a single command (a typo does not heal); ``wait`` still counts it as
    unreachable and keeps trying, since DNS may come back during a long wait.
    """

    hint = "the name does not resolve: check host (or HostName in ssh config)"


class AuthenticationError(RemoteError):
    hint = "check identity_file / your ssh-agent, or open a ControlMaster"


class HostKeyError(RemoteError):
    hint = "add the host key to known_hosts (ssh-keyscan, checked by hand)"


class CommandFailedError(RemoteError):
    """A remote command ran but exited non-zero; not a reachability problem."""

    exit_code = 1
    hint = ""  # not the connection's fault: RemoteError's hints do not apply

    def __init__(self, message: str, *, host: str, command: str, exit_status: int, stderr: str):
        self.command = command
        self.exit_status = exit_status
        self.stderr = stderr
        super().__init__(f"{message} (exit {exit_status}): {stderr.strip()[-500:]}", host=host)


class SlurmError(RemoteChainError):
    pass


class SubmitError(SlurmError):
    pass


class StateError(RemoteChainError):
    """A chain's state files are corrupt or contradict each other; names file and problem."""

    def __init__(self, message: str, *, path: str):
        self.message = message
        self.path = path
        super().__init__(f"{path}: {message}")


class NotFoundError(RemoteChainError):
    """The run, benchmark or job asked for is not on the cluster (names the cluster)."""


class WaitTimeout(RemoteChainError, Generic[R]):
    """``wait`` gave up after its ``--timeout``; exit 4 (interface.md §4). ``result``: the
    last status read."""

    exit_code = 4

    def __init__(self, result: R):
        self.result = result
        super().__init__("timed out before every chain ended")
