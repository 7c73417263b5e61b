"""PURE: the ownership guard every remote script runs before it trusts a folder or file.

The bash lives in ``execs/guard.bash`` (one function, ``rc_guard``); templates include it
with the ``__GUARD__`` placeholder, which ``templates.render_template`` fills in. A script the
guard stops exits with ``UNSAFE_EXIT`` and says why on stderr.
"""

from __future__ import annotations

from remote_chain.protocol.layout import (
    CANCEL_MARKER,
    CHAIN_FILE,
    EVENTS_FILE,
    FIRST_JOB_FILE,
    JOB_SCRIPT,
    LEASE_FILE,
    LOGS_DIR,
    RETRIES_FILE,
    SBATCH_OUT,
    SECRETS_FILE,
    UNKNOWN_FILE,
    WALLTIME_FILE,
)

# A status no other part of our scripts uses (sysexits' EX_NOPERM is 77 too).
UNSAFE_EXIT = 77
GUARD_PLACEHOLDER = "__GUARD__"


def trusted_bench_files() -> tuple[str, ...]:
    """Every name in a benchmark folder that remote-chain reads, runs or writes."""
    return (
        JOB_SCRIPT,
        LOGS_DIR,
        CHAIN_FILE,
        WALLTIME_FILE,
        RETRIES_FILE,
        UNKNOWN_FILE,
        EVENTS_FILE,
        CANCEL_MARKER,
        LEASE_FILE,
        SECRETS_FILE,
        FIRST_JOB_FILE,
        SBATCH_OUT,
    )
