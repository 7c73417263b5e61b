"""A cluster profile (``clusters/<name>.toml``, interface.md section 2) and its field checks."""

from __future__ import annotations

import json
import os
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    model_validator,
)

from remote_chain.config.slurm import SlurmOptions
from remote_chain.config.validators import (
    CONTROL,
    IN_CODE,
    Frozen,
    Problems,
    check_name,
    context_of,
    one_line,
)
from remote_chain.core.durations import parse_persist
from remote_chain.core.models import Executor, Transport
from remote_chain.errors import ConfigError

_WORKDIR = re.compile(r"/[A-Za-z0-9._/@+,:=~-]*")


def _ssh_word(value: str) -> str:
    if not value or CONTROL.search(value) or any(ch.isspace() for ch in value):
        raise ValueError("must be one word, without spaces or control characters")
    if value.startswith("-"):
        raise ValueError("must not start with '-' (ssh would read it as an option)")
    return value


def _host(value: str) -> str:
    _ssh_word(value)
    if "@" in value:
        raise ValueError("put the user name in `user`, not in `host`")
    return value


def _workdir(value: str) -> str:
    if not _WORKDIR.fullmatch(value):
        raise ValueError(
            f"{json.dumps(value)}: must be an absolute POSIX path of letters, digits and "
            "._/@+,:=~- (no spaces, quotes, '$' or '%': it is used in #SBATCH lines and commands)"
        )
    if ".." in value.split("/"):
        raise ValueError(f"{json.dumps(value)}: must not contain '..'")
    normal = posixpath.normpath(value)
    if normal in ("/", "//"):
        raise ValueError("must not be the filesystem root")
    return normal


def _local_path(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, str):
        return value  # pydantic reports the type
    one_line(value)
    base = Path(context_of(info).get("base_dir", Path.cwd()))
    return base / Path(value).expanduser()


LocalPath = Annotated[Path, BeforeValidator(_local_path)]


class ClusterProfile(Frozen):
    """One ``clusters/<name>.toml`` (interface.md section 2); ``name`` is the file's stem.

    It can also be built in code, ``ClusterProfile(name="eos", host=..., workdir=...)``, and
    passed to the Orchestrator wherever a profile name goes. ``name`` stays required: it is
    part of every remote path (``<workdir>/<run_id>/<name>``).
    """

    name: Annotated[StrictStr, AfterValidator(check_name)]
    host: Annotated[StrictStr, AfterValidator(_host)]
    # None: the ssh config's Port, else 22. A set field overrides the ssh config, like `ssh -p`.
    port: StrictInt | None = Field(default=None, ge=1, le=65535)
    user: Annotated[StrictStr, AfterValidator(_ssh_word)] | None = None
    identity_file: LocalPath | None = None
    known_hosts: LocalPath | None = None
    proxy_jump: Annotated[StrictStr, AfterValidator(_ssh_word)] | None = None
    control_path: Annotated[StrictStr, AfterValidator(one_line)] | None = None
    ssh_config: LocalPath | None = None  # read instead of ~/.ssh/config (ssh -F)
    workdir: Annotated[StrictStr, AfterValidator(_workdir)]
    executor: Executor = "slurm"
    transport: Transport = "asyncssh"
    # Seconds the agent keeps the connection idle; 0: every command connects.
    persist: Annotated[int, BeforeValidator(parse_persist)] = 0
    slurm: SlurmOptions = SlurmOptions()
    source: Path = IN_CODE

    @model_validator(mode="after")
    def _control_path_needs_openssh(self) -> ClusterProfile:
        if self.control_path is not None and self.transport != "openssh":
            raise Problems(
                [(("control_path",), 'only used with transport = "openssh"; set that too')]
            )
        if self.persist and self.transport == "openssh":
            raise Problems(
                [(("persist",), 'only for transport = "asyncssh": a ControlMaster persists')]
            )
        return self

    def check_local_files(self) -> None:
        """Raise ``ConfigError`` if ``identity_file`` or ``known_hosts`` is not a readable file.

        Separate from loading, so ``render`` and ``clusters`` work on a machine without keys.
        """
        for field in ("identity_file", "known_hosts", "ssh_config"):
            path: Path | None = getattr(self, field)
            if path is None:
                continue
            try:
                usable = path.is_file() and os.access(path, os.R_OK)
            except OSError:
                usable = False
            if not usable:
                raise ConfigError(
                    f"{path} is not a readable file", source=str(self.source), field=field
                )
