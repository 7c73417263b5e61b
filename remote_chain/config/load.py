"""Loading: a submit config from YAML, a cluster profile from TOML, each validated in full."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from remote_chain.config.profile import ClusterProfile
from remote_chain.config.submit import SubmitConfig, SubmitFile
from remote_chain.config.translate import FROM_CALLER, config_error
from remote_chain.config.validators import FROM_FILE, check_name
from remote_chain.config.yamlload import MAX_YAML_BYTES, load_yaml_lines
from remote_chain.errors import ConfigError


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_YAML_BYTES + 1)  # enough for the size check to fire
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None


def load_submit_config(path: Path, *, environ: Mapping[str, str] | None = None) -> SubmitConfig:
    """Read and validate a submit config; ``environ`` feeds ``from_env`` (default os.environ)."""
    source = str(path)
    raw, lines = load_yaml_lines(_read(path), source=source)
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping with a 'driver' key at the top", source=source)
    # Top-level x-* keys are the user's own (a home for anchors, as in docker compose).
    raw = {k: v for k, v in raw.items() if not (isinstance(k, str) and k.startswith("x-"))}
    context = {
        FROM_FILE: True,
        "base_dir": path.absolute().parent,
        "environ": os.environ if environ is None else environ,
    }
    try:
        parsed = SubmitFile.model_validate(raw, context=context)
    except ValidationError as exc:
        raise config_error(exc, source=source, root=SubmitFile, lines=lines) from None
    return SubmitConfig(driver=parsed.driver, source=path.absolute())


def load_profile(path: Path) -> ClusterProfile:
    """Read and validate one cluster profile; its name is the file's stem."""
    source = str(path)
    data = _read(path)
    if len(data) > MAX_YAML_BYTES:
        raise ConfigError(f"larger than {MAX_YAML_BYTES} bytes", source=source)
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", source=source
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=source) from None
    clash = sorted(FROM_CALLER & raw.keys())
    if clash:
        raise ConfigError(
            "not a profile key (the name comes from the file name); remove it",
            source=source,
            field=clash[0],
        )
    try:
        check_name(path.stem, "profile name")
    except ValueError as exc:
        raise ConfigError(f"{exc}; rename the file", source=source) from None
    try:
        return ClusterProfile.model_validate(
            {**raw, "name": path.stem, "source": path.absolute()},
            context={FROM_FILE: True, "base_dir": path.absolute().parent},
        )
    except ValidationError as exc:
        raise config_error(exc, source=source, root=ClusterProfile) from None
