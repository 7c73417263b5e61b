"""remote-chain: self-chaining Slurm jobs that outlive one allocation, driven over SSH.

The Python API is async and is what the CLI itself uses::

    from remote_chain import ClusterProfile, Orchestrator

    eos = ClusterProfile(name="eos", host="eos-login", workdir="/lustre/me/rc")
    async with Orchestrator() as rc:
        result = await rc.submit(Path("eval.yaml"), clusters=[eos])  # or a profile name
        final = await rc.wait(result.run_id)

A config can be loaded (``load_submit_config``) or built in code (``SubmitConfig``,
``DriverConfig``, ``BenchmarkConfig``, ``SlurmOptions``, ``ResumableSpec``, ``EnvVar``);
``Orchestrator.render()`` returns the job scripts submit would send.

Names are imported on first use (PEP 562 ``__getattr__``): the command line is a module of
this package, and importing the package must not import the whole library before it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from remote_chain.version import __version__

_LAZY = {
    "Orchestrator": "remote_chain.client.orchestrator",
    "RenderedScript": "remote_chain.core.results",
    "ClusterFailure": "remote_chain.core.results",
    "DoctorResult": "remote_chain.core.results",
    "ClusterProfile": "remote_chain.config",
    "SubmitConfig": "remote_chain.config",
    "DriverConfig": "remote_chain.config",
    "BenchmarkConfig": "remote_chain.config",
    "SlurmOptions": "remote_chain.config",
    "ResumableSpec": "remote_chain.config",
    "EnvVar": "remote_chain.config",
    "load_submit_config": "remote_chain.config",
    "load_profile": "remote_chain.config",
    "SubmitResult": "remote_chain.core.results",
    "StatusResult": "remote_chain.core.results",
    "CancelResult": "remote_chain.core.results",
    "ResumeResult": "remote_chain.core.results",
    "ResumeCaps": "remote_chain.execs.resume",
    "WaitTimeout": "remote_chain.errors",
    "ChainStatus": "remote_chain.core.chainstatus",
    "ChainStateName": "remote_chain.core.models",
    "Settings": "remote_chain.config.settings",
    "RemoteChainError": "remote_chain.errors",
    "ConfigError": "remote_chain.errors",
    "RemoteError": "remote_chain.errors",
}

if TYPE_CHECKING:
    from remote_chain.client.orchestrator import Orchestrator
    from remote_chain.config import (
        BenchmarkConfig,
        ClusterProfile,
        DriverConfig,
        EnvVar,
        ResumableSpec,
        SlurmOptions,
        SubmitConfig,
        load_profile,
        load_submit_config,
    )
    from remote_chain.config.settings import Settings
    from remote_chain.core.chainstatus import ChainStatus
    from remote_chain.core.models import ChainStateName
    from remote_chain.core.results import (
        CancelResult,
        ClusterFailure,
        DoctorResult,
        RenderedScript,
        ResumeResult,
        StatusResult,
        SubmitResult,
    )
    from remote_chain.errors import ConfigError, RemoteChainError, RemoteError, WaitTimeout
    from remote_chain.execs.resume import ResumeCaps

__all__ = [
    "BenchmarkConfig",
    "CancelResult",
    "ChainStateName",
    "ChainStatus",
    "ClusterFailure",
    "ClusterProfile",
    "ConfigError",
    "DoctorResult",
    "DriverConfig",
    "EnvVar",
    "Orchestrator",
    "RemoteChainError",
    "RemoteError",
    "RenderedScript",
    "ResumableSpec",
    "ResumeCaps",
    "ResumeResult",
    "Settings",
    "SlurmOptions",
    "StatusResult",
    "SubmitConfig",
    "SubmitResult",
    "WaitTimeout",
    "__version__",
    "load_profile",
    "load_submit_config",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'remote_chain' has no attribute {name!r}")
