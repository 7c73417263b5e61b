"""A submit config against one cluster: what its executor can run, the effective [slurm]."""

from __future__ import annotations

from typing import Any

from remote_chain.config.profile import ClusterProfile
from remote_chain.config.slurm import SlurmOptions
from remote_chain.config.submit import BenchmarkConfig, SubmitConfig
from remote_chain.config.validators import render_loc
from remote_chain.errors import ConfigError

# Executors that can chain jobs; `shell` has no scheduler to queue a successor with.
RESUMABLE_EXECUTORS = frozenset({"slurm"})


def check_for_cluster(config: SubmitConfig, profile: ClusterProfile) -> None:
    """Raise ``ConfigError`` if the config asks for what the cluster's executor cannot do."""
    if profile.executor in RESUMABLE_EXECUTORS:
        return
    offending = [n for n, bench in config.driver.benchmarks.items() if bench.resume is not None]
    if offending:
        names = ", ".join(repr(n) for n in offending)
        what = f"benchmarks {names} are" if len(offending) > 1 else f"benchmark {names} is"
        raise ConfigError(
            f"{what} resumable, but cluster profile {profile.name!r} "
            f"({profile.source}) uses executor {profile.executor!r}, which cannot chain jobs; "
            f"resumable needs executor {' or '.join(sorted(RESUMABLE_EXECUTORS))!r}",
            source=str(config.source),
            field=render_loc(("driver", "benchmarks", offending[0], "resumable")),
        )


def effective_slurm(profile: ClusterProfile, bench: BenchmarkConfig) -> SlurmOptions:
    """The profile's [slurm] with the benchmark's explicitly set keys on top.

    ``extra_args`` add up, profile's first: for a repeated option sbatch's last one wins.
    """
    override = bench.slurm
    update: dict[str, Any] = {
        key: getattr(override, key) for key in override.model_fields_set if key != "extra_args"
    }
    update["extra_args"] = profile.slurm.extra_args + override.extra_args
    return profile.slurm.model_copy(update=update)
