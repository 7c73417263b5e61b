"""The warm launcher (issue 13, P8): a fork server that has the command line imported.

``python -m remote_chain.warm FOLDER PERSIST``, started next to an agent (``launch.ensure``
from ``agent.start_agent`` and ``remote-chain agent start``). It imports the CLI and what the
commands import, before any thread or event loop exists (it checks: fork-safe), then serves
``launch.py``'s thin clients on ``FOLDER/warm-*.sock``: the agents' private folder (700,
ours), the socket mode 600, every peer's uid checked (``SO_PEERCRED``). For each ``run`` it
forks a child that takes the client's working folder (by fd), environment, umask and stdio
(by fd), rebuilds ``sys.std*`` with the client's encodings and runs ``cli.main()``: the same
code path as a direct process. The child dies with the server (``PR_SET_PDEATHSIG``); a
client that goes away has its child sent SIGHUP; children are reaped as they exit (SIGCHLD)
and at most ``MAX_CHILDREN`` run at once (beyond: ``busy``, the client runs itself).

One thread, one ``selectors`` loop, no event loop: nothing here survives a fork it should
not. It never writes a request (argv, environment) anywhere; its own stdio is /dev/null.

Exits: after ``PERSIST`` seconds without a request (the agents' idle time; a ping from a
new agent's start extends it), when its package files, version or interpreter no longer
match what it imported, its socket is gone (its state folder removed) or no agent's
socket is left beside it (checked every second), and on ``stop`` (``agent stop``) or
SIGTERM; each time it first removes its socket (if still its own) and waits for its running
children.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import os
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from remote_chain import launch, warmwire
from remote_chain.privsock import peer_uid, private_folder

MAX_CHILDREN = 16
WATCH_PERIOD = 1.0
REQUEST_TIMEOUT_S = 2.0  # to read one request: a silent peer does not hold the server up
GO_TIMEOUT_S = 1.0  # a client answers "ready" at once; one that does not is stopped or gone
PR_SET_PDEATHSIG = 1
RELAYABLE = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
# What the commands import: the CLI's own modules import the rest lazily, inside commands.
PRELOAD = (
    "remote_chain.cli",
    "remote_chain.completion",
    "remote_chain.settings",
    "remote_chain.logconfig",
    "remote_chain.config",
    "remote_chain.orchestrator",
    "remote_chain.cluster",
    "remote_chain.remote.agent",
    "remote_chain.remote.ssh",
    "remote_chain.doctor",
    "anyio",
    "anyio._backends._asyncio",
    "structlog",
    "rich.console",
    "rich.table",
    "rich.status",
)


def preload() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    _prebuild_command()
    if threading.active_count() != 1:  # a fork copies one thread: the others' locks stay held
        raise SystemExit(f"remote_chain.warm: an import started a thread: {threading.enumerate()}")


def _prebuild_command() -> None:
    """The click command typer builds from the app on every call (~20 ms of type hints and
    parameters): built once here, so each child starts with its own copy (the fork's).

    Safe because the app has ``add_completion=False``: the command then depends only on the
    app's declarations, nothing of the environment; the byte-for-byte tests hold it to that.
    """
    import typer.main  # noqa: PLC0415 - preloaded

    from remote_chain.cli import oneshot  # noqa: PLC0415
    from remote_chain.cli.app import app  # noqa: PLC0415

    built = typer.main.get_command(app)
    original = typer.main.get_command

    def get_command(instance: typer.Typer) -> Any:
        return built if instance is app else original(instance)

    typer.main.get_command = get_command  # type: ignore[assignment]  # same call, cached
    oneshot.FULL_PREBUILT = True  # the whole app is free here: no per-command copy


class Server:
    """The loop: accept and fork, relay signals, reap, watch for idleness and change."""

    def __init__(self, folder: Path, persist: float) -> None:
        self.folder = private_folder(folder)
        self.path = folder / launch.socket_name()
        self.persist = persist
        self.identity = launch.identity()
        self.last = time.monotonic()
        self.children: dict[int, socket.socket | None] = {}  # pid -> its client, if still there
        self.decoders: dict[int, warmwire.Decoder] = {}
        self.stopping = False
        self.served = 0  # children forked: `agent status` and the tests read it
        self.selector = selectors.DefaultSelector()
        self.listener: socket.socket | None = None
        self.inode = 0
        self.wake_r, self.wake_w = os.pipe()

    # --- setting up ----------------------------------------------------------------------------
    def bind(self) -> bool:
        """Listen on the socket; False if another server answers there already."""
        if launch.ask(self.folder, {"op": "ping", "persist": self.persist}) is not None:
            return False
        temporary = self.folder / f".warm-{os.getpid()}.tmp"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # created mode 600
        try:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            listener.bind(str(temporary))
        finally:
            os.umask(old)
        temporary.chmod(0o600)
        listener.listen(64)
        os.rename(temporary, self.path)  # atomic: a client sees no socket or a listening one
        self.inode = self.path.stat().st_ino
        listener.setblocking(False)
        self.listener = listener
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        return True

    def serve(self) -> None:
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wake-up fd says it happened
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: self.stop())
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")
        next_watch = time.monotonic() + WATCH_PERIOD
        while not (self.stopping and not self.children):
            for key, _ in self.selector.select(timeout=WATCH_PERIOD):
                if key.data == "accept":
                    self._accept()
                elif key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 512)
                else:
                    self._from_client(key.data)
            self._reap()
            if time.monotonic() >= next_watch:
                next_watch = time.monotonic() + WATCH_PERIOD
                self._watch()
        self.stop()

    def stop(self) -> None:
        """No new commands: the socket goes; the loop ends once the children have."""
        self.stopping = True
        if self.listener is not None:
            self.selector.unregister(self.listener)
            self.listener.close()
            self.listener = None
            with contextlib.suppress(OSError):
                if self.path.stat().st_ino == self.inode:  # not a successor's socket
                    self.path.unlink()

    def _watch(self) -> None:
        idle = time.monotonic() - self.last
        idle_out = not self.children and idle > self.persist
        if idle_out or launch.identity() != self.identity:  # or the package changed under us
            self.stop()
        elif not self._socket_is_ours():  # removed (its state folder deleted) or replaced
            self.inode = 0  # not ours to unlink
            self.stop()
        elif not self.children and not self._agents_left():  # it lives as long as they do
            self.stop()

    def _agents_left(self) -> bool:
        """Whether an agent still listens beside it (``agent stop`` and idle agents remove
        their sockets; a killed agent's is refused: a connect, closed unsent, which the
        agent does not count as activity)."""
        try:
            with os.scandir(self.folder) as entries:
                names = [
                    e.path
                    for e in entries
                    if e.name.endswith(".sock") and not e.name.startswith("warm-")
                ]
        except OSError:
            return False
        return any(_listening(path) for path in names)

    def _socket_is_ours(self) -> bool:
        try:
            return self.path.stat().st_ino == self.inode
        except OSError:
            return False

    # --- requests ------------------------------------------------------------------------------
    def _accept(self) -> None:
        if self.listener is None:
            return
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        fds: list[int] = []
        keep = False
        try:
            if peer_uid(conn) != os.getuid():
                return  # another user: closed unanswered
            deadline = time.monotonic() + REQUEST_TIMEOUT_S
            message, fds = warmwire.receive(conn, warmwire.Decoder(), deadline)
            if message is not None and message.get("v") == warmwire.PROTOCOL:
                keep = self._answer(conn, message, fds)
        except (OSError, warmwire.WireError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            if not keep:
                conn.close()

    def _answer(self, conn: socket.socket, message: dict[str, Any], fds: list[int]) -> bool:
        """Reply to one request; True if ``conn`` now belongs to a running child."""
        op = message.get("op")
        if op == "ping":  # not activity, like the agent's: `agent status` keeps nothing alive
            persist = message.get("persist")
            if isinstance(persist, int | float) and persist > self.persist:
                self.persist = float(persist)
            idle_left = self.persist - (time.monotonic() - self.last)
            reply = {
                "pid": os.getpid(),
                "idle_left": idle_left,
                "children": sorted(self.children),
                "served": self.served,
            }
            warmwire.send(conn, reply)
            return False
        if op == "stop":
            warmwire.send(conn, {"stopped": os.getpid()})
            self.stop()
            return False
        if op != "run":
            return False
        self.last = time.monotonic()
        if message.get("identity") != self.identity:
            warmwire.send(conn, {"mismatch": True})
            return False
        try:
            request = warmwire.parse_request(message)
        except warmwire.WireError as exc:
            warmwire.send(conn, {"refused": str(exc)})
            return False
        if time.monotonic() - request.sent_at > warmwire.STALE_AFTER_S:
            return False  # the client stopped waiting and runs the command itself
        if len(fds) != warmwire.MAX_FDS:
            warmwire.send(conn, {"refused": f"{len(fds)} file descriptors, not 4"})
            return False
        if len(self.children) >= MAX_CHILDREN:
            warmwire.send(conn, {"busy": len(self.children)})
            return False
        if not self._go(conn):
            return False
        pid = self._fork(conn, request, fds)
        self.served += 1
        try:
            warmwire.send(conn, {"pid": pid})
        except OSError:
            self.children[pid] = None
            os.kill(pid, signal.SIGHUP)  # the client is gone already
            return False
        conn.setblocking(False)
        self.children[pid] = conn
        self.decoders[pid] = warmwire.Decoder()
        self.selector.register(conn, selectors.EVENT_READ, pid)
        return True

    def _go(self, conn: socket.socket) -> bool:
        """Ask the client to confirm before forking (``warmwire``: never run twice)."""
        warmwire.send(conn, {"ready": True})
        go: dict[str, Any] | None = None
        fds: list[int] = []
        try:
            go, fds = warmwire.receive(conn, warmwire.Decoder(), time.monotonic() + GO_TIMEOUT_S)
        except (OSError, warmwire.WireError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
        if go is not None and go.get("go") is True:
            return True
        # Stopped (Ctrl-Z) or gone: it may still read this and then run the command itself.
        with contextlib.suppress(OSError):
            warmwire.send(conn, {"dropped": True})
        return False

    def _fork(self, conn: socket.socket, request: warmwire.Request, fds: list[int]) -> int:
        parent = os.getpid()
        # Blocked across the fork: a signal the client relays as soon as it has the pid
        # would otherwise run the server's handler in the child (stop: unlink the live
        # socket) and be lost to the command. The child unblocks them once its own are set.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, RELAYABLE)
        try:
            pid = os.fork()
            if pid == 0:  # the child: never returns
                code = 1
                try:
                    code = self._child(parent, conn, request, fds)
                finally:
                    os._exit(code)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # the parent's (child: gone)
        return pid

    def _from_client(self, pid: int) -> None:
        conn = self.children.get(pid)
        if conn is None:
            return
        try:
            data = conn.recv(4096)
            messages = self.decoders[pid].feed(data) if data else []
        except BlockingIOError:
            return
        except (OSError, warmwire.WireError):
            data, messages = b"", []
        for message in messages:
            signum = message.get("signal")
            if isinstance(signum, int) and signum in RELAYABLE:
                os.kill(pid, signum)
        if not data:  # the client went away: its child hears it as a terminal's hang-up
            self._forget(pid)
            os.kill(pid, signal.SIGHUP)

    def _forget(self, pid: int) -> None:
        conn = self.children.get(pid)
        if conn is not None:
            self.selector.unregister(conn)
            conn.close()
            self.children[pid] = None
        self.decoders.pop(pid, None)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.get(pid)
            if conn is not None:
                signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
                reply = (
                    {"signal": signum} if signum else {"exit": os.waitstatus_to_exitcode(status)}
                )
                with contextlib.suppress(OSError):
                    conn.setblocking(True)
                    conn.settimeout(REQUEST_TIMEOUT_S)
                    warmwire.send(conn, reply)
            self._forget(pid)
            self.children.pop(pid, None)
            self.last = time.monotonic()

    # --- the child -----------------------------------------------------------------------------
    def _child(
        self, parent: int, conn: socket.socket, request: warmwire.Request, fds: list[int]
    ) -> int:
        _die_with(parent)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.selector.close()
        for sock in [self.listener, conn, *(c for c in self.children.values())]:
            if sock is not None:
                sock.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        stdin, stdout, stderr, cwd = fds
        os.fchdir(cwd)
        os.umask(request.umask)
        os.environ.clear()
        os.environ.update(request.env)
        time.tzset()
        for target, fd in ((0, stdin), (1, stdout), (2, stderr)):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        _std_streams(request.streams)
        sys.argv = list(request.argv)
        return _run_cli()


def _listening(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except BlockingIOError:
            return True  # EAGAIN: its listen backlog is full, a live agent that is busy
        except OSError:
            return False
    return True


def _die_with(parent: int) -> None:
    """SIGKILL when the server goes (PR_SET_PDEATHSIG), checked against a server already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)


def _std_streams(streams: list[tuple[str, str]]) -> None:
    """``sys.std*`` for fds 0-2, as the interpreter makes them, with the client's encodings."""
    made = []
    for fd, (encoding, errors) in enumerate(streams):
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        tty = raw.isatty()
        buffered = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        text = io.TextIOWrapper(
            buffered,
            encoding=encoding,
            errors=errors,
            newline="\n",  # POSIX CPython: stdin too (universal newlines on Windows only)
            line_buffering=fd == 2 or (fd == 1 and tty),
            write_through=fd == 2,
        )
        made.append(text)
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made  # type: ignore[misc]


def _run_cli() -> int:
    """``cli.main()``, its SystemExit turned into the status the interpreter would exit with."""
    from remote_chain import cli  # noqa: PLC0415 - preloaded before the fork

    try:
        # Signals that came since the fork (blocked there) are delivered here, to the
        # command's handlers: Ctrl-C before the CLI's own frame is a KeyboardInterrupt.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, RELAYABLE)
        cli.main()
    except SystemExit as done:
        code = done.code
        if code is None:
            return _flushed(0)
        if isinstance(code, int):
            return _flushed(code)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"{code}\n")
        return _flushed(1)
    except BaseException as exc:  # the interpreter's own last resort, as in a process
        traceback.print_exc()
        if isinstance(exc, KeyboardInterrupt):  # Python then dies by SIGINT: so does this
            _flushed(0)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
            return 128 + signal.SIGINT
        return _flushed(1)
    return _flushed(0)


def _flushed(code: int) -> int:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def main() -> None:
    """``python -m remote_chain.warm FOLDER PERSIST``."""
    folder, persist = Path(sys.argv[1]), float(sys.argv[2])
    preload()
    server = Server(folder, persist)
    if server.bind():
        server.serve()


if __name__ == "__main__":
    main()
