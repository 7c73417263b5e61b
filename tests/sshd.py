"""A throwaway real OpenSSH ``sshd`` on 127.0.0.1, for tests at the ``Remote`` seam.

Everything lives in one directory: host key, client key, ``authorized_keys``, ``known_hosts``,
the sshd config and log, and a fake home. Nothing in the real home (``/root/.ssh`` when tests
run as root) or in ``/etc/ssh`` is read or written. The sessions' ``HOME`` is pointed at the
fake home with ``SetEnv``, so login shells read its dotfiles; ``noisy_login`` fills them with
the kind of output (MOTD, ``module`` init, echo in ``.bashrc``) real clusters print.

Use it from a test module::

    @pytest.fixture(scope="module")
    def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
        with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
            yield server
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remote_chain.transport.endpoint import Endpoint

SSHD = "/usr/sbin/sshd"
HOST = "127.0.0.1"
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
BIND_TRIES = 3

NOISY_BASHRC = "echo 'bashrc: module init says hello'\necho 'bashrc: to stderr' >&2\n"
NOISY_PROFILE = (
    "printf 'Welcome to the loopback cluster\\n  (MOTD without a trailing newline)'\n"
    "echo 'profile: quota warning' >&2\n"
)


@dataclass(frozen=True)
class Sshd:
    """A running sshd and the files a client needs to reach it."""

    port: int
    pid: int
    user: str
    directory: Path
    client_key: Path
    known_hosts: Path
    host_key_line: str
    home: Path
    log: Path

    def endpoint(self, **changes: Any) -> Endpoint:
        """An ``Endpoint`` that reaches this server; ``changes`` override its fields."""
        base = Endpoint(
            name="loopback",
            host=HOST,
            port=self.port,
            user=self.user,
            identity_file=self.client_key,
            known_hosts=self.known_hosts,
            connect_timeout=5,
            command_timeout=30,
        )
        return dataclasses.replace(base, **changes)

    def accepted_logins(self) -> int:
        """How many logins the server has accepted so far (one per connection)."""
        return self.log.read_text().count("Accepted publickey")


def keygen(path: Path, *, passphrase: str = "") -> Path:
    """Make an ed25519 key pair at ``path`` (and ``path.pub``)."""
    argv = ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "remote-chain-test"]
    subprocess.run([*argv, "-f", str(path)], check=True)
    return path


def public_key_line(private_key: Path) -> str:
    """``<type> <base64>`` of a key pair's public half, as known_hosts wants it."""
    kind, blob = Path(f"{private_key}.pub").read_text().split()[:2]
    return f"{kind} {blob}"


def free_port() -> int:
    """A port that was free a moment ago (sshd start is retried if it is taken meanwhile)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _config(
    directory: Path,
    port: int,
    user: str,
    home: Path,
    *,
    max_sessions: int | None,
    accept_env: bool,
    extra: Sequence[str] = (),
) -> str:
    lines = [
        # sshd keeps a keyword's first value: the caller's lines override the defaults below.
        *extra,
        f"ListenAddress {HOST}",
        f"Port {port}",
        f"HostKey {directory / 'host_key'}",
        f"PidFile {directory / 'sshd.pid'}",
        f"AuthorizedKeysFile {directory / 'authorized_keys'}",
        # Test directories are not owned the way StrictModes insists on.
        "StrictModes no",
        # Tests may run as root (containers, CI); keys only, as on a real cluster.
        "PermitRootLogin prohibit-password",
        f"AllowUsers {user}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PrintMotd no",
        "PrintLastLog no",
        "LogLevel VERBOSE",
        # sshd sets HOME from the passwd entry, then applies SetEnv: login shells read the
        # fake home's dotfiles, never the real user's.
        f"SetEnv HOME={home}",
    ]
    if max_sessions is not None:
        lines.append(f"MaxSessions {max_sessions}")
    if accept_env:  # Debian's and Ubuntu's default; OpenSSH's own default accepts no name
        lines.append("AcceptEnv LANG LC_*")
    return "\n".join(lines) + "\n"


def _wait_listening(process: subprocess.Popen[bytes], log: Path) -> bool:
    """True once sshd says it listens; False if it exited (e.g. the port was taken)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if "Server listening" in log.read_text():
            return True
        time.sleep(0.02)
    raise RuntimeError(f"sshd did not start within {START_TIMEOUT} s:\n{log.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_TIMEOUT)


@contextmanager
def running_sshd(
    directory: Path,
    *,
    max_sessions: int | None = None,
    noisy_login: bool = False,
    accept_env: bool = False,
    extra_config: Sequence[str] = (),
) -> Iterator[Sshd]:
    """Start ``sshd -D -e`` on a free loopback port; stop it (by its own PID) on exit.

    ``max_sessions`` sets ``MaxSessions`` (OpenSSH's default, 10, when ``None``);
    ``accept_env`` adds Debian's ``AcceptEnv LANG LC_*`` (none accepted when ``False``, so
    scripts arrive on stdin only); ``extra_config`` lines come first, so they override ours
    (``LogLevel DEBUG1``, ``MaxAuthTries 2``, ``Banner F``, ...).
    """
    if not Path(SSHD).is_file():
        raise RuntimeError(f"{SSHD} is missing: install openssh-server")
    if os.geteuid() == 0:
        # sshd's privilege separation directory; Debian creates it only from its init script.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    user = pwd.getpwuid(os.getuid()).pw_name
    keygen(directory / "host_key")
    client_key = keygen(directory / "client_key")
    shutil.copy(directory / "client_key.pub", directory / "authorized_keys")
    home = directory / "home"
    home.mkdir()
    if noisy_login:
        (home / ".bashrc").write_text(NOISY_BASHRC)
        (home / ".bash_profile").write_text(NOISY_PROFILE)
    config = directory / "sshd_config"
    log = directory / "sshd.log"
    for _ in range(BIND_TRIES):
        port = free_port()
        config.write_text(
            _config(
                directory,
                port,
                user,
                home,
                max_sessions=max_sessions,
                accept_env=accept_env,
                extra=extra_config,
            )
        )
        with log.open("wb") as log_file:
            process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdout=log_file, stderr=log_file
            )
        if _wait_listening(process, log):
            break
        process.wait(STOP_TIMEOUT)
    else:
        raise RuntimeError(f"sshd failed to start {BIND_TRIES} times:\n{log.read_text()}")
    host_key_line = public_key_line(directory / "host_key")
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(f"[{HOST}]:{port} {host_key_line}\n")
    try:
        yield Sshd(
            port=port,
            pid=process.pid,
            user=user,
            directory=directory,
            client_key=client_key,
            known_hosts=known_hosts,
            host_key_line=host_key_line,
            home=home,
            log=log,
        )
    finally:
        _stop(process)
