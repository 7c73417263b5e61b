"""The ``[slurm]`` table: a profile's sbatch defaults, or a benchmark's overrides of them.

Each value is written into an ``#SBATCH`` line, so each is one Slurm word; ``extra_args`` may
not set what the run layout and the chain own (interface.md section 2).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, StrictBool, StrictStr, model_validator

from remote_chain.config.validators import Duration, Frozen, Problems

_SLURM_WORD = re.compile(r"[A-Za-z0-9_.,:@+=/-]+")
_SBATCH_ARG = re.compile(r"--([A-Za-z][A-Za-z0-9-]*)(?:=([^\s\x00-\x1f\x7f]+))?")
# sbatch options we own, or that have a key of their own. sbatch (getopt_long) accepts any
# unambiguous prefix, so `--part=x` is caught too.
_OWN_OPTIONS = (
    "chdir",
    "dependency",
    "kill-on-invalid-dep",
    "output",
    "error",
    "job-name",  # status and cancel find a chain's jobs by its name
    "array",  # one job per link: the chain files hold one job id per line
)
# Requeue is the profile's `[slurm] requeue` setting, not an extra argument.
_REQUEUE_OPTIONS = ("requeue", "no-requeue")
_KEYED_OPTIONS = ("time", "partition", "account", "qos")


def _slurm_word(value: str) -> str:
    if not _SLURM_WORD.fullmatch(value):
        raise ValueError(
            f"{json.dumps(value)} is not a Slurm name: letters, digits and ._,:@+=/- only "
            "(it is written into an #SBATCH line)"
        )
    return value


# sbatch's short forms of the options above, named in the error.
_OWN_SHORT = {
    "J": "job-name",
    "D": "chdir",
    "o": "output",
    "e": "error",
    "d": "dependency",
    "a": "array",
}


def _sbatch_arg(value: str) -> str:
    short = re.match(r"-([A-Za-z])", value)
    if short and not value.startswith("--") and short.group(1) in _OWN_SHORT:
        own = _OWN_SHORT[short.group(1)]
        raise ValueError(
            f"-{short.group(1)} (--{own}): remote-chain sets --{own} itself; the run layout "
            "and the chain depend on it"
        )
    match = _SBATCH_ARG.fullmatch(value)
    if match is None:
        raise ValueError(
            f"{json.dumps(value)}: write one sbatch option as --name or --name=value, "
            "without spaces (each entry becomes one #SBATCH line)"
        )
    name = match.group(1)
    for keyed in _KEYED_OPTIONS:
        if keyed.startswith(name):
            raise ValueError(f"--{name}: use the slurm key {keyed!r} instead of extra_args")
    for own in _OWN_OPTIONS:
        if own.startswith(name):
            raise ValueError(
                f"--{name}: remote-chain sets --{own} itself; the run layout and the chain "
                "depend on it"
            )
    return value


def _requeue_arg(value: str) -> str | None:
    """The requeue option ``value`` names (sbatch takes any unambiguous prefix), or None."""
    match = _SBATCH_ARG.fullmatch(value)
    name = match.group(1) if match else ""
    return next((own for own in _REQUEUE_OPTIONS if own.startswith(name)), None)


SlurmWord = Annotated[StrictStr, AfterValidator(_slurm_word)]


class SlurmOptions(Frozen):
    """A ``[slurm]`` table: a profile's defaults, or a benchmark's overrides of them."""

    partition: SlurmWord | None = None
    account: SlurmWord | None = None
    qos: SlurmWord | None = None
    time: Duration | None = None
    extra_args: tuple[Annotated[StrictStr, AfterValidator(_sbatch_arg)], ...] = ()
    # Our addition: how a chain reads "CANCELLED by <uid>" from a uid other than the user's
    # (admin tooling, preemption scripts). "stop" follows the spec's CANCELLED row.
    admin_cancel: Literal["stop", "preempt"] = "stop"
    # Whether Slurm may requeue a link (#SBATCH --requeue); --requeue/--no-requeue in
    # extra_args are refused in favour of this key.
    requeue: StrictBool = False

    @model_validator(mode="after")
    def _requeue_needs_the_key(self) -> SlurmOptions:
        for index, arg in enumerate(self.extra_args):
            own = _requeue_arg(arg)
            if own is not None and not self.requeue:
                raise Problems(
                    [
                        (
                            ("extra_args", index),
                            f"--{own}: requeueing is remote-chain's to decide (the chain "
                            "reads a requeued link as the same link); set requeue = true "
                            "in this [slurm] table to allow it",
                        )
                    ]
                )
        return self
