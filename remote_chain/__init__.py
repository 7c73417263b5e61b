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

Names are imported lazily (``__getattr__``) so that ``import remote_chain`` stays cheap for
the command line's start-up time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Orchestrator": "remote_chain.orchestrator",
    "RenderedScript": "remote_chain.results",
    "ClusterFailure": "remote_chain.results",
    "DoctorResult": "remote_chain.results",
    "ClusterProfile": "remote_chain.config",
    "SubmitConfig": "remote_chain.config",
    "DriverConfig": "remote_chain.config",
    "BenchmarkConfig": "remote_chain.config",
    "SlurmOptions": "remote_chain.config",
    "ResumableSpec": "remote_chain.config",
    "EnvVar": "remote_chain.config",
    "load_submit_config": "remote_chain.config",
    "load_profile": "remote_chain.config",
    "SubmitResult": "remote_chain.results",
    "StatusResult": "remote_chain.results",
    "CancelResult": "remote_chain.results",
    "ResumeResult": "remote_chain.results",
    "ResumeCaps": "remote_chain.resumecaps",
    "WaitTimeout": "remote_chain.errors",
    "ChainStatus": "remote_chain.chainstatus",
    "ChainStateName": "remote_chain.models",
    "Settings": "remote_chain.settings",
    "RemoteChainError": "remote_chain.errors",
    "ConfigError": "remote_chain.errors",
    "RemoteError": "remote_chain.errors",
}

if TYPE_CHECKING:
    from remote_chain.chainstatus import ChainStatus
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
    from remote_chain.errors import ConfigError, RemoteChainError, RemoteError, WaitTimeout
    from remote_chain.models import ChainStateName
    from remote_chain.orchestrator import Orchestrator
    from remote_chain.results import (
        CancelResult,
        ClusterFailure,
        DoctorResult,
        RenderedScript,
        ResumeResult,
        StatusResult,
        SubmitResult,
    )
    from remote_chain.resumecaps import ResumeCaps
    from remote_chain.settings import Settings

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
