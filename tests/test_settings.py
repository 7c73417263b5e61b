"""Settings: REMOTE_CHAIN_* variables and .env, kept in step with .env.example."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from remote_chain.config.settings import ENV_PREFIX, Settings, load_settings
from remote_chain.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parent.parent / ".env.example"
# A setting line, active or commented out: `REMOTE_CHAIN_X=...` or `# REMOTE_CHAIN_X=...`.
_SETTING_LINE = re.compile(rf"^#?\s*{ENV_PREFIX}([A-Z0-9_]+)=", re.MULTILINE)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No REMOTE_CHAIN_* from the developer's shell, and no .env from the checkout."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_env_example_lists_every_setting() -> None:
    """.env.example names exactly the fields of Settings, each once."""
    names = _SETTING_LINE.findall(EXAMPLE.read_text(encoding="utf-8"))
    assert len(names) == len(set(names))
    assert {name.lower() for name in names} == set(Settings.model_fields)


def test_env_example_values_are_the_defaults() -> None:
    """The active lines of .env.example load, and equal the built-in defaults."""
    assert Settings(_env_file=EXAMPLE) == Settings(_env_file=None)


def test_defaults() -> None:
    """Without environment or .env, the documented defaults apply."""
    settings = Settings(_env_file=None)
    assert settings.max_channels == 6
    assert settings.lookup_timeout == 60
    assert settings.max_upload_bytes == 64 * 1024 * 1024
    assert settings.clusters_dir is None
    assert settings.log_format is None


def test_environment_overrides_dotenv_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """A REMOTE_CHAIN_* variable beats .env, which beats the default; other keys are ignored."""
    Path(".env").write_text(
        "REMOTE_CHAIN_MAX_CHANNELS=3\nREMOTE_CHAIN_POLL_INTERVAL=5\nOTHER_TOOL=1\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("REMOTE_CHAIN_MAX_CHANNELS", "4")
    monkeypatch.setenv("REMOTE_CHAIN_LOG_FORMAT", "json")
    settings = load_settings()
    assert settings.max_channels == 4
    assert settings.poll_interval == 5
    assert settings.log_format == "json"
    assert settings.connect_timeout is None  # the ssh config's ConnectTimeout, else 15 s


def test_invalid_value_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad value raises ConfigError naming the variable, not a pydantic error."""
    monkeypatch.setenv("REMOTE_CHAIN_MAX_CHANNELS", "lots")
    with pytest.raises(ConfigError) as info:
        load_settings(env_file=None)
    assert info.value.field == "REMOTE_CHAIN_MAX_CHANNELS"
    monkeypatch.setenv("REMOTE_CHAIN_MAX_CHANNELS", "0")
    monkeypatch.setenv("REMOTE_CHAIN_LOG_FORMAT", "xml")
    with pytest.raises(ConfigError) as info:
        load_settings(env_file=None)
    assert "REMOTE_CHAIN_LOG_FORMAT" in str(info.value)


def test_clusters_dir_is_path_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    """REMOTE_CHAIN_CLUSTERS_DIR splits on os.pathsep, skipping empty parts, expanding ~."""
    monkeypatch.setenv("REMOTE_CHAIN_CLUSTERS_DIR", os.pathsep.join(["/a", "", "~/b"]))
    dirs = load_settings(env_file=None).clusters_dirs()
    assert dirs == [Path("/a"), Path.home() / "b"]


def test_index_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The index is <state_dir or $XDG_STATE_HOME/remote-chain or ~/.local/state/...>/runs."""
    settings = Settings(_env_file=None)
    xdg = {"XDG_STATE_HOME": str(tmp_path / "state")}
    assert settings.index_dir(xdg) == tmp_path / "state" / "remote-chain" / "runs"
    home_default = Path.home() / ".local" / "state" / "remote-chain" / "runs"
    assert settings.index_dir({}) == home_default
    assert settings.index_dir({"XDG_STATE_HOME": "relative"}) == home_default
    monkeypatch.setenv("REMOTE_CHAIN_STATE_DIR", str(tmp_path / "mine"))
    assert load_settings(env_file=None).index_dir(xdg) == tmp_path / "mine" / "runs"


def test_empty_variable_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """`REMOTE_CHAIN_STATE_DIR=` leaves the default, rather than meaning the current folder."""
    monkeypatch.setenv("REMOTE_CHAIN_STATE_DIR", "")
    assert load_settings(env_file=None).state_dir is None
