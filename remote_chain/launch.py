"""The console script ``remote-chain``: hand the command to the warm launcher, else run it.

Stdlib only until the fallback (issue 13, P8). A new Python process that imports typer,
pydantic and the orchestrator spends ~0.2 s before its first byte leaves; the fork server
(``warm.py``, started next to an agent) has them imported already and forks a child per
command. This thin client looks for the server's socket (one ``lstat`` when there is none:
the no-server path costs nothing measurable), and if it is there and private (``privsock``:
our uid, mode 600, in our 700 folder; the server's uid checked with ``SO_PEERCRED``) sends
argv, the environment, umask, the stdio encodings, and its stdin, stdout, stderr and working
folder as file descriptors. The child runs exactly ``cli.main()`` on them: the same JSON,
exit codes and host-key checks as this process would give. Meanwhile the client relays
SIGINT, SIGTERM and SIGHUP to the child, and exits with its status (killed by signal N:
dies by N too, as the command's own process would).

Falls back to running the command itself when there is no socket, the client ignores a
relayed signal (``nohup``), or the server answers
``mismatch`` (another checkout, version, interpreter or flags: silently), or is stale,
refused or busy (one ``launcher_unavailable`` log line, like ``agent_unavailable``), or
does not say ``ready`` within ``REPLY_TIMEOUT_S``. Once the client has said ``go`` it never
runs the command itself (``warmwire``: a command runs once): a server that dies or stalls
after that (its child dies with it: ``PR_SET_PDEATHSIG``) is a ``ConnectError``: exit 3,
the command may have run, one ``launcher_gone`` line.
``REMOTE_CHAIN_LAUNCHER=off`` skips the launcher altogether.

The socket is ``warm-<crc32 of package folder and interpreter>.sock`` in the agents' socket
folder: ``$XDG_RUNTIME_DIR/remote-chain``, else ``<state dir>/agent`` with the state dir
from ``REMOTE_CHAIN_STATE_DIR`` / ``$XDG_STATE_HOME`` as ``Settings.state_home`` reads them
(a state dir set only in ``.env`` is not seen here: such commands run themselves).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import signal
import socket
import sys
import time
import zlib
from typing import TYPE_CHECKING, Any

import remote_chain
from remote_chain import warmwire
from remote_chain.privsock import peer_uid, socket_problem

if TYPE_CHECKING:
    from types import FrameType

# Paths are strings here: pathlib, subprocess and dataclasses would cost the thin client
# ~10 ms of imports, a third of what it spends before the launcher answers.

OFF = ("0", "off", "no", "false")
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
REPLY_TIMEOUT_S = 8.0  # > warmwire.STALE_AFTER_S: past it the server refuses, unforked
PACKAGE = os.path.dirname(os.path.realpath(remote_chain.__file__))


def main() -> None:
    """The console script: through the launcher if one serves us, else ``cli.main()``."""
    code = launched(sys.argv)
    if code is None:
        # Start-up allocates ~300,000 objects (imports, typer, pydantic models) and frees
        # almost none: the cyclic collector's passes over them cost a cold command ~25 ms
        # of its ~0.25 s (issue 13, P9). Off until the command's event loop starts
        # (collector.freeze_startup), where everything so far is frozen out of its way.
        gc.disable()
        from remote_chain.cli import main as cli_main  # noqa: PLC0415 - only without a launcher

        cli_main()
    if code is not None and code < 0:
        # The child was killed by signal -code: so is this process, as it would have been.
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal whose default is not to die: what a shell would say
    raise SystemExit(code)


# --- where -----------------------------------------------------------------------------------
def socket_folder(environ: dict[str, str] | os._Environ[str]) -> str:
    """The agents' socket folder, read from the environment as ``agent.agent_folder`` does."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "remote-chain")
    state = environ.get("REMOTE_CHAIN_STATE_DIR", "")
    if state:
        return os.path.join(os.path.expanduser(state), "agent")
    xdg = environ.get("XDG_STATE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "remote-chain", "agent")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "remote-chain", "agent")


def socket_name() -> str:
    """One server per package folder, interpreter and host: other checkouts look elsewhere,
    and so do other login nodes sharing an NFS home (no XDG_RUNTIME_DIR): there a socket
    served on one host is refused on the other, which would take it for stale and unlink it."""
    host = os.uname().nodename
    key = f"{PACKAGE}\0{os.path.realpath(sys.executable)}\0{host}".encode(errors="surrogateescape")
    return f"warm-{zlib.crc32(key):08x}.sock"


def identity() -> str:
    """What a server must share with its clients: package (files' mtimes and sizes),
    version, interpreter, its flags and sys.path (past the script's own folder), and what a
    fork inherits from the server rather than the client: its groups (after `newgrp`, `sg`
    or a group added since) and its mount namespace (a container sees other files), and
    what a shell or Slurm sets for the processes it starts: resource limits (``ulimit``),
    niceness, CPU affinity (``taskset``, a job step's binding) and the job step itself
    (``SLURM_JOB_ID``, ``SLURM_STEP_ID``): a command run from a job's batch script must be
    that job's process, not the server's."""
    import hashlib  # noqa: PLC0415 - only when a socket exists
    import resource  # noqa: PLC0415 - 0.2 ms, a C module

    digest = hashlib.sha256()
    try:
        mounts = os.readlink("/proc/self/ns/mnt")
    except OSError:
        mounts = "?"
    limits = [
        (name, resource.getrlimit(getattr(resource, name)))
        for name in sorted(dir(resource))
        if name.startswith("RLIMIT_")
    ]
    job = [os.environ.get(name, "") for name in ("SLURM_JOB_ID", "SLURM_STEP_ID")]
    parts = [
        f"{os.getgid()} {os.getegid()} {sorted(os.getgroups())} {mounts}",
        f"{limits} {os.getpriority(os.PRIO_PROCESS, 0)} {sorted(os.sched_getaffinity(0))} {job}",
        str(PACKAGE),
        remote_chain.__version__,
        os.path.realpath(sys.executable),
        sys.version,
        repr(sys.flags),
        repr(sys.warnoptions),
        repr(sorted(sys._xoptions.items())),  # -X importtime and the like
        repr(sys.path[1:]),
        sys.getfilesystemencoding(),
    ]
    digest.update("\0".join(parts).encode(errors="surrogateescape"))
    for folder, dirs, files in os.walk(PACKAGE):  # ~100 files: ~1 ms
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(folder, name))
                digest.update(f"{folder}/{name}\0{info.st_mtime_ns}\0{info.st_size}\0".encode())
    return digest.hexdigest()


def enabled(environ: dict[str, str] | os._Environ[str]) -> bool:
    return environ.get("REMOTE_CHAIN_LAUNCHER", "").strip().lower() not in OFF


# --- the thin client -------------------------------------------------------------------------
def launched(argv: list[str]) -> int | None:
    """The command's exit status through the launcher (-N: killed by signal N); None: run
    it in this process."""
    if not enabled(os.environ):
        return None
    if any(signal.getsignal(sig) == signal.SIG_IGN for sig in RELAYED):
        # `nohup` (SIGHUP) or `cmd &` in a script (SIGINT): the relay would catch what this
        # process ignores and end the command with it; a forked child could not ignore it.
        return None
    path = os.path.join(socket_folder(os.environ), socket_name())
    try:
        problem = socket_problem(path)
    except FileNotFoundError:
        return None  # the common case: no launcher
    except PermissionError:
        # A folder we may not enter holds no launcher of ours: after `su`, XDG_RUNTIME_DIR is
        # still the other user's. Silent, or every command would say so.
        return None
    except OSError as exc:
        problem = str(exc)
    if problem is not None:
        log("launcher_unavailable", reason=problem)
        return None
    try:
        fds = (0, 1, 2, os.open(".", os.O_RDONLY | os.O_DIRECTORY))
        for fd in fds[:3]:
            os.fstat(fd)
    except OSError:
        return None  # a closed stdio fd or an unreadable folder: the command says what
    try:
        return _through(path, argv, fds)
    finally:
        os.close(fds[3])


def _through(path: str, argv: list[str], fds: tuple[int, ...]) -> int | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(REPLY_TIMEOUT_S)
    with sock:
        try:
            sock.connect(path)
        except OSError as exc:
            # Refused: nobody listens, a server that died. Remove its socket (in our own 700
            # folder). Not on EAGAIN: a full listen backlog is a live server, only busy.
            if exc.errno == errno.ECONNREFUSED:
                _unlink_socket(path)
                log("launcher_unavailable", reason=f"stale socket {path}: {exc.strerror}")
            else:
                log("launcher_unavailable", reason=f"{path}: {exc.strerror or exc}")
            return None
        if peer_uid(sock) != os.getuid():
            log("launcher_unavailable", reason=f"{path} is served by uid {peer_uid(sock)}")
            return None
        relay = _Relay(sock)
        try:
            return relay.run(_request(argv).to_json(), fds)
        finally:
            relay.restore()


class _Relay:
    """Signals that arrive while the child runs go to it; before it runs, they wait."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.child = False
        self.pending: list[int] = []
        self.old = {sig: signal.signal(sig, self._handle) for sig in RELAYED}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if not self.child:
            self.pending.append(signum)
            return
        with contextlib.suppress(OSError):
            warmwire.send(self.sock, {"signal": signum})

    def restore(self) -> None:
        for sig, old in self.old.items():
            signal.signal(sig, old)
        if not self.child:  # we run the command ourselves: it gets what came meanwhile
            for signum in self.pending:
                os.kill(os.getpid(), signum)

    def run(self, request: dict[str, Any], fds: tuple[int, ...]) -> int | None:
        decoder = warmwire.Decoder()
        try:
            warmwire.send(self.sock, request, fds)
            reply, _ = warmwire.receive(self.sock, decoder)
        except (OSError, warmwire.WireError) as exc:
            log("launcher_unavailable", reason=f"no answer: {exc}")
            return None
        if reply is None or "ready" not in reply:
            if reply is None or "busy" in reply or "refused" in reply:
                why = "closed" if reply is None else reply.get("refused", "busy")
                log("launcher_unavailable", reason=str(why))
            return None  # "mismatch": another package or interpreter, silently
        # Until "go" is sent the server has not forked; once it is, the command may run in
        # its child and never runs here too (warmwire: the ready/go exchange).
        try:
            warmwire.send(self.sock, {"go": True})
        except OSError as exc:  # never delivered: the server cannot have forked
            log("launcher_unavailable", reason=f"no answer: {exc}")
            return None
        try:
            reply, _ = warmwire.receive(self.sock, decoder)
        except (OSError, warmwire.WireError):
            reply = None
        if reply is not None and "dropped" in reply:  # our "go" came too late: not forked
            log("launcher_unavailable", reason="the launcher stopped waiting for this command")
            return None
        if reply is None or not isinstance(reply.get("pid"), int):
            return _gone()
        self.child = True
        for signum in self.pending:
            self._handle(signum, None)
        self.sock.settimeout(None)  # the command takes what it takes
        try:
            done, _ = warmwire.receive(self.sock, decoder)
        except (OSError, warmwire.WireError):
            done = None
        if done is not None and isinstance(done.get("exit"), int):
            return int(done["exit"])
        if done is not None and isinstance(done.get("signal"), int):
            return -int(done["signal"])  # main() dies by it: a parent sees the signal
        return _gone()


def _gone() -> int:
    """The launcher went away (or stalled) once the command may have started in it."""
    from remote_chain.errors import ConnectError  # noqa: PLC0415 - a small module

    log("launcher_gone", reason="the launcher went away during the command; it may have run")
    return ConnectError.exit_code


def _request(argv: list[str]) -> warmwire.Request:
    umask = os.umask(0o077)
    os.umask(umask)
    streams = [
        (str(getattr(s, "encoding", None) or "utf-8"), str(getattr(s, "errors", None) or "strict"))
        for s in (sys.stdin, sys.stdout, sys.stderr)
    ]
    return warmwire.Request(
        identity(), list(argv), dict(os.environ), umask, streams, time.monotonic()
    )


def _unlink_socket(path: str) -> None:
    with contextlib.suppress(OSError):
        if socket_problem(path) is None:
            os.unlink(path)


def log(event: str, **fields: str) -> None:
    """One warning on stderr, in the format the command's own logs would have."""
    if _log_format() == "json":
        line = json.dumps({"event": event, "level": "warning", **fields})
    else:
        line = f"[warning  ] {event:<24} " + " ".join(f"{k}={v!r}" for k, v in fields.items())
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _log_format() -> str:
    args = sys.argv[1:]
    for i, arg in enumerate(args):
        if arg == "--log-format" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--log-format="):
            return arg.partition("=")[2]
    return os.environ.get("REMOTE_CHAIN_LOG_FORMAT", "console")


# --- starting, asking, stopping (the CLI's side: `agent start|status|stop`) --------------------
def ask(
    folder: str | os.PathLike[str], message: dict[str, Any], timeout: float = 5.0
) -> dict[str, Any] | None:
    """One ``ping`` or ``stop`` to the launcher in ``folder``; None if none answers."""
    path = os.path.join(folder, socket_name())
    try:
        if socket_problem(path) is not None:
            return None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            if peer_uid(sock) != os.getuid():
                return None
            warmwire.send(sock, {**message, "v": warmwire.PROTOCOL})
            reply, _ = warmwire.receive(sock, warmwire.Decoder())
            return reply
    except (OSError, warmwire.WireError):
        return None


def ensure(folder: str | os.PathLike[str], persist: float) -> None:
    """Start the launcher for ``folder`` unless one answers (then it stays ``persist`` more).

    Not waited for: it binds its socket once its imports are done (~0.5 s); until then
    commands run themselves. Detached like the agent (its own session, nobody's child).
    """
    if not enabled(os.environ) or persist <= 0:
        return
    if ask(folder, {"op": "ping", "persist": persist}) is not None:
        return
    import subprocess  # noqa: PLC0415 - not on the thin client's path

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [
                "/bin/sh",
                "-c",
                '"$0" -m remote_chain.warm "$1" "$2" </dev/null >/dev/null 2>&1 &',
                sys.executable,
                os.fspath(folder),
                str(persist),
            ],
            check=False,
            start_new_session=True,
            timeout=10,
            # `-m` puts the working folder first on sys.path: from "/", no other checkout's
            # remote_chain can shadow the one PYTHONPATH or the install names.
            cwd="/",
        )


def ensure_quietly(folder: str | os.PathLike[str], persist: float) -> None:
    """``ensure`` for the hot path: only a stat when the launcher's socket is there."""
    if enabled(os.environ) and not os.path.exists(os.path.join(folder, socket_name())):
        ensure(folder, persist)


if __name__ == "__main__":
    main()
