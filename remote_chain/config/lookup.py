"""Profile lookup: the folders searched, in order (interface.md section 2), and by name."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from remote_chain.config.load import load_profile
from remote_chain.config.profile import ClusterProfile
from remote_chain.config.validators import check_name
from remote_chain.errors import ConfigError

if TYPE_CHECKING:
    from remote_chain.config.settings import Settings


COMMAND_LINE = "<command line>"


def _config_home() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"


def default_clusters_dirs(cli_dir: Path | None, settings: Settings) -> list[Path]:
    """Where profiles are looked up, in order (interface.md section 2), duplicates dropped.

    ``--clusters-dir`` and ``REMOTE_CHAIN_CLUSTERS_DIR`` name folders on purpose, so one that
    does not exist is an error (a typo must not fall through to another folder's profile).
    ``$XDG_CONFIG_HOME`` replaces ``~/.config`` when set, as the XDG spec asks.
    """
    explicit: list[tuple[Path, str, str]] = []
    if cli_dir is not None:
        explicit.append((cli_dir.expanduser(), COMMAND_LINE, "--clusters-dir"))
    explicit.extend(
        (folder, "environment", "REMOTE_CHAIN_CLUSTERS_DIR") for folder in settings.clusters_dirs()
    )
    for folder, source, field in explicit:
        if not folder.is_dir():
            raise ConfigError(f"{folder} is not a folder", source=source, field=field)
    candidates = [
        *(folder for folder, _, _ in explicit),
        Path("clusters"),
        _config_home() / "remote-chain" / "clusters",
    ]
    ordered: list[Path] = []
    for folder in candidates:
        absolute = folder.absolute()
        if absolute not in ordered:
            ordered.append(absolute)
    return ordered


def _profile_files(clusters_dirs: Sequence[Path]) -> dict[str, Path]:
    """Profile name -> file, the first folder winning."""
    found: dict[str, Path] = {}
    for folder in clusters_dirs:
        try:
            files = sorted(folder.glob("*.toml")) if folder.is_dir() else []
        except OSError as exc:
            raise ConfigError(f"cannot list: {exc.strerror or exc}", source=str(folder)) from None
        for file in files:
            found.setdefault(file.stem, file)
    return found


def list_profiles(clusters_dirs: Sequence[Path]) -> list[ClusterProfile]:
    """Every profile found, sorted by name; a name in two folders is taken from the first."""
    files = _profile_files(clusters_dirs)
    return [load_profile(files[name]) for name in sorted(files)]


def scan_profiles(
    clusters_dirs: Sequence[Path],
) -> tuple[list[ClusterProfile], list[tuple[str, Path, ConfigError]]]:
    """Every profile found, and every broken one with its error (``clusters`` lists both)."""
    good: list[ClusterProfile] = []
    broken: list[tuple[str, Path, ConfigError]] = []
    files = _profile_files(clusters_dirs)
    for name in sorted(files):
        try:
            good.append(load_profile(files[name]))
        except ConfigError as exc:
            broken.append((name, files[name], exc))
    return good, broken


def find_profile(name: str, *, clusters_dirs: Sequence[Path]) -> ClusterProfile:
    """The profile ``<name>.toml`` from the first folder holding one."""
    try:
        check_name(name, "cluster name")
    except ValueError as exc:
        raise ConfigError(str(exc), source=COMMAND_LINE, field="cluster") from None
    for folder in clusters_dirs:
        candidate = folder / f"{name}.toml"
        try:
            exists = candidate.is_file()
        except OSError as exc:
            raise ConfigError(f"cannot read: {exc.strerror}", source=str(candidate)) from None
        if exists:
            return load_profile(candidate)
    searched = ", ".join(
        f"{folder}{'' if folder.is_dir() else ' (missing)'}" for folder in clusters_dirs
    )
    names = ", ".join(sorted(_profile_files(clusters_dirs))) or "none"
    raise ConfigError(
        f"unknown cluster {name!r}: no {name}.toml in {searched or 'no folder'}; "
        f"profiles found: {names}",
        source=COMMAND_LINE,
        field="cluster",
    )
