"""Submit configs (YAML) and cluster profiles (TOML) as frozen pydantic models.

Shapes: interface.md sections 1 and 2. Every model forbids unknown keys, so a typo is an
error (with a "did you mean") instead of a silently ignored setting. Every failure, whether
from YAML, TOML, pydantic or the file system, leaves this package as one ``ConfigError``
naming the file (``source``) and the dotted field path (``field``), e.g.
``driver.benchmarks.gpqa.resumable.max_retries``; keys that are not plain words are quoted,
as in ``driver.benchmarks["my bench"]``, and list items are indexed, ``driver.upload[2]``.

Durations are held as int seconds and dump back to Slurm's form (``"04:00:00"``). In a file
they are written in Slurm's forms (``durations.py``), where a bare number means minutes, as
``sbatch --time=240`` does. Built in Python (``SlurmOptions(time=3600)``), a bare int is
seconds, the attribute's own unit: the loaders mark their data with ``FROM_FILE`` in the
validation context, and only such data reads ints as minutes.

One module per concept; every public name is importable from here:

- ``validators``  field checks shared by the models, ``Duration``, the frozen base
- ``slurm``       the ``[slurm]`` table (``SlurmOptions``) and what ``extra_args`` may set
- ``submit``      the submit config: ``SubmitConfig``, ``DriverConfig``, ``BenchmarkConfig``, ...
- ``profile``     the cluster profile: ``ClusterProfile``
- ``translate``   pydantic's ``ValidationError`` -> one ``ConfigError``
- ``load``        ``load_submit_config``, ``load_profile``
- ``lookup``      where profiles are found: ``default_clusters_dirs``, ``find_profile``, ...
- ``fit``         a config against a cluster: ``check_for_cluster``, ``effective_slurm``
"""

from remote_chain.config.fit import RESUMABLE_EXECUTORS, check_for_cluster, effective_slurm
from remote_chain.config.load import load_profile, load_submit_config
from remote_chain.config.lookup import (
    COMMAND_LINE,
    default_clusters_dirs,
    find_profile,
    list_profiles,
    scan_profiles,
)
from remote_chain.config.profile import ClusterProfile
from remote_chain.config.slurm import SlurmOptions
from remote_chain.config.submit import (
    ENV_NAME_RE,
    MAX_UPLOADS,
    RESERVED_ENV_NAMES,
    RESERVED_ENV_PREFIXES,
    BenchmarkConfig,
    DriverConfig,
    EnvVar,
    ResumableSpec,
    SubmitConfig,
    reserved_env_reason,
)
from remote_chain.config.validators import (
    FROM_FILE,
    IN_CODE,
    MAX_NAME_LEN,
    RESERVED_BENCHMARK_NAMES,
    RESERVED_BENCHMARK_PREFIXES,
    Duration,
)
from remote_chain.core.models import Executor, Transport

__all__ = [
    "COMMAND_LINE",
    "ENV_NAME_RE",
    "FROM_FILE",
    "IN_CODE",
    "MAX_NAME_LEN",
    "MAX_UPLOADS",
    "RESERVED_BENCHMARK_NAMES",
    "RESERVED_BENCHMARK_PREFIXES",
    "RESERVED_ENV_NAMES",
    "RESERVED_ENV_PREFIXES",
    "RESUMABLE_EXECUTORS",
    "BenchmarkConfig",
    "ClusterProfile",
    "DriverConfig",
    "Duration",
    "EnvVar",
    "Executor",
    "ResumableSpec",
    "SlurmOptions",
    "SubmitConfig",
    "Transport",
    "check_for_cluster",
    "default_clusters_dirs",
    "effective_slurm",
    "find_profile",
    "list_profiles",
    "load_profile",
    "load_submit_config",
    "reserved_env_reason",
    "scan_profiles",
]
