"""One settings object for the whole process.

Precedence, highest first: command-line flags, ``BILLETING_*`` environment
variables, then an optional INI config file (``--config-file`` or
``BILLETING_CONFIG_FILE``). The object is built once in the CLI and passed
down; nothing deeper reads the environment.
"""
from __future__ import annotations

import configparser
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

import platformdirs

DEFAULT_INCOMPLETE_CONSUMER = "00000000-0000-0000-0000-000000000000"


def default_db_url() -> str:
    """The embedded SQLite file in the per-user data directory."""
    data_dir = Path(platformdirs.user_data_dir("billeting"))
    data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data_dir / 'placement.sqlite'}"


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8778
    db: str = ""  # empty means the embedded SQLite default
    workers: int = 1
    threads: int = 4  # request threads per worker process
    auth: str = "noauth2"  # or "keystone"
    policy_file: str | None = None
    legacy_policy: bool = False
    cors_origins: list[str] = field(default_factory=list)
    cors_allow_headers: list[str] = field(default_factory=list)
    auto_upgrade: bool = False
    config_file: str | None = None
    incomplete_consumer_project_id: str = DEFAULT_INCOMPLETE_CONSUMER
    incomplete_consumer_user_id: str = DEFAULT_INCOMPLETE_CONSUMER
    allocation_conflict_retry_count: int = 10
    randomize_allocation_candidates: bool = False
    max_allocation_candidates: int = -1
    allocation_candidates_generation_strategy: str = "depth-first"  # or "breadth-first"
    log_level: str = "INFO"

    @property
    def db_url(self) -> str:
        return self.db or default_db_url()


# config-file key (section.option) -> settings attribute
_FILE_KEYS = {
    "api.host": "host",
    "api.port": "port",
    "api.workers": "workers",
    "api.threads": "threads",
    "api.auth_strategy": "auth",
    "database.connection": "db",
    "oslo_policy.policy_file": "policy_file",
    "billeting.legacy_policy": "legacy_policy",
    "cors.allowed_origin": "cors_origins",
    "cors.allow_headers": "cors_allow_headers",
    "billeting.auto_upgrade": "auto_upgrade",
    "placement.incomplete_consumer_project_id": "incomplete_consumer_project_id",
    "placement.incomplete_consumer_user_id": "incomplete_consumer_user_id",
    "placement.allocation_conflict_retry_count": "allocation_conflict_retry_count",
    "placement.randomize_allocation_candidates": "randomize_allocation_candidates",
    "placement.max_allocation_candidates": "max_allocation_candidates",
    "placement.allocation_candidates_generation_strategy": "allocation_candidates_generation_strategy",
    "billeting.log_level": "log_level",
}


class SettingsError(ValueError):
    """A setting could not be read or converted."""


def _convert(name: str, raw: str) -> object:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    try:
        if kind == "int":
            return int(raw)
        if kind == "bool":
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"not a boolean: {raw!r}")
        if kind.startswith("list"):
            return [part.strip() for part in raw.split(",") if part.strip()]
        return raw
    except ValueError as exc:
        raise SettingsError(f"invalid value for {name}: {exc}") from None


def load_settings(flags: dict[str, object], environ: dict[str, str] | None = None) -> Settings:
    """Merge flags (explicitly given ones only), environment and config file."""
    environ = os.environ if environ is None else environ
    settings = Settings()
    config_file = flags.get("config_file") or environ.get("BILLETING_CONFIG_FILE")
    if config_file:
        settings.config_file = str(config_file)
        parser = configparser.ConfigParser(interpolation=None)
        if not parser.read(str(config_file)):
            raise SettingsError(f"config file {config_file} could not be read")
        for key, attr in _FILE_KEYS.items():
            section, option = key.split(".")
            if parser.has_option(section, option):
                setattr(settings, attr, _convert(attr, parser.get(section, option)))
    for f in fields(Settings):
        env_name = "BILLETING_" + f.name.upper()
        if env_name in environ and f.name != "config_file":
            setattr(settings, f.name, _convert(f.name, environ[env_name]))
    for name, value in flags.items():
        if value is not None and hasattr(settings, name):
            setattr(settings, name, value)
    check_settings(settings)
    return settings


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def check_settings(settings: Settings) -> None:
    """Reject values no component could work with, naming the setting."""
    if settings.auth not in ("noauth2", "keystone"):
        raise SettingsError(f"auth must be noauth2 or keystone, not {settings.auth!r}")
    if not 1 <= settings.port <= 65535:
        raise SettingsError(f"port must be between 1 and 65535, not {settings.port}")
    if settings.workers < 1:
        raise SettingsError(f"workers must be at least 1, not {settings.workers}")
    if settings.threads < 1:
        raise SettingsError(f"threads must be at least 1, not {settings.threads}")
    if settings.allocation_conflict_retry_count < 0:
        raise SettingsError("allocation_conflict_retry_count must not be negative")
    if settings.allocation_candidates_generation_strategy not in ("depth-first", "breadth-first"):
        raise SettingsError("allocation_candidates_generation_strategy must be depth-first or breadth-first, "
                            f"not {settings.allocation_candidates_generation_strategy!r}")
    settings.log_level = str(settings.log_level).upper()
    if settings.log_level not in _LOG_LEVELS:
        raise SettingsError(f"log_level must be one of {', '.join(_LOG_LEVELS)}")
