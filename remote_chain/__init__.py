"""remote-chain: self-chaining Slurm jobs that outlive one allocation, driven over SSH.

The Python API is async and is what the CLI itself uses::

    from remote_chain import Orchestrator

    async with Orchestrator() as rc:
        result = await rc.submit(Path("eval.yaml"), clusters=["eos"])
        final = await rc.wait(result.run_id)

Names are imported lazily (``__getattr__``) so that ``import remote_chain`` stays cheap for
the command line's start-up time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Orchestrator": "remote_chain.orchestrator",
    "SubmitResult": "remote_chain.orchestrator",
    "StatusResult": "remote_chain.orchestrator",
    "CancelResult": "remote_chain.orchestrator",
    "ResumeResult": "remote_chain.orchestrator",
    "WaitTimeout": "remote_chain.orchestrator",
    "ChainStatus": "remote_chain.chainstatus",
    "ChainStateName": "remote_chain.chainstatus",
    "Settings": "remote_chain.settings",
    "RemoteChainError": "remote_chain.errors",
    "ConfigError": "remote_chain.errors",
    "RemoteError": "remote_chain.errors",
}

if TYPE_CHECKING:
    from remote_chain.chainstatus import ChainStateName, ChainStatus
    from remote_chain.errors import ConfigError, RemoteChainError, RemoteError
    from remote_chain.orchestrator import (
        CancelResult,
        Orchestrator,
        ResumeResult,
        StatusResult,
        SubmitResult,
        WaitTimeout,
    )
    from remote_chain.settings import Settings

__all__ = [
    "CancelResult",
    "ChainStateName",
    "ChainStatus",
    "ConfigError",
    "Orchestrator",
    "RemoteChainError",
    "RemoteError",
    "ResumeResult",
    "Settings",
    "StatusResult",
    "SubmitResult",
    "WaitTimeout",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'remote_chain' has no attribute {name!r}")
