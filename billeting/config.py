"""One settings object for the whole process.

Precedence, highest first: command-line flags, ``BILLETING_*`` environment
variables, then an optional INI config file (``--config-file`` or
``BILLETING_CONFIG_FILE``). The object is built once in the CLI and passed
down; nothing deeper reads the environment.
"""
from __future__ import annotations

import ast
import configparser
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

import platformdirs

from billeting.serving.options import KEEPALIVE_TIMEOUT_S, MAX_THREADS, MAX_WORKERS

DEFAULT_INCOMPLETE_CONSUMER = "00000000-0000-0000-0000-000000000000"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("billeting"))


def default_db_url() -> str:
    """The embedded SQLite file in the per-user data directory (which is
    not created here: see ``ensure_default_data_dir``)."""
    return f"sqlite:///{default_data_dir() / 'placement.sqlite'}"


def ensure_default_data_dir() -> None:
    """Create the per-user data directory, for commands that write."""
    default_data_dir().mkdir(parents=True, exist_ok=True)


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 8778
    db: str = ""  # empty means the embedded SQLite default
    workers: int = 1
    threads: int = 4  # request threads per worker process
    # HTTP robustness (see billeting.serving.ServeOptions): seconds a client
    # gets for its request line and headers, for its body, and while idle
    # between requests; seconds SIGTERM waits for requests in flight; bytes.
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive_timeout: float = KEEPALIVE_TIMEOUT_S
    graceful_timeout: float = 10.0
    max_body_size: int = 4 * 1024 * 1024
    auth: str = "noauth2"  # or "keystone"
    policy_file: str | None = None
    legacy_policy: bool = False  # i.e. [oslo_policy] enforce_new_defaults = False
    enforce_scope: bool = True  # [oslo_policy] enforce_scope, where oslo.policy still has it
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
    metrics_access: str = "open"  # GET /metrics: "open", or "policy" (rule billeting:metrics)

    @property
    def db_url(self) -> str:
        return self.db or default_db_url()


# config-file key (section.option) -> settings attribute
_FILE_KEYS = {
    "api.host": "host",
    "api.port": "port",
    "api.workers": "workers",
    "api.threads": "threads",
    "api.header_timeout": "header_timeout",
    "api.body_timeout": "body_timeout",
    "api.keepalive_timeout": "keepalive_timeout",
    "api.graceful_timeout": "graceful_timeout",
    "api.max_body_size": "max_body_size",
    "api.auth_strategy": "auth",
    "database.connection": "db",
    "oslo_policy.policy_file": "policy_file",
    "billeting.legacy_policy": "legacy_policy",
    "oslo_policy.enforce_scope": "enforce_scope",
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
    "billeting.metrics_access": "metrics_access",
}


class SettingsError(ValueError):
    """A setting could not be read or converted."""


def _convert(name: str, raw: str) -> object:
    return convert_setting(name, {f.name: f.type for f in fields(Settings)}[name], raw)


def convert_setting(name: str, kind: str, raw: str) -> object:
    """A setting's text (config file or environment) as the dataclass field
    type ``kind`` names (``"int"``, ``"bool"``, ``"list[str]"``...)."""
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
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


def read_config_file(path: str) -> configparser.ConfigParser:
    """Parse the INI file; any problem is one line naming the file (and the
    line, when the syntax is at fault)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as stream:
            parser.read_file(stream, source=path)
    except OSError as exc:
        raise SettingsError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"cannot read config file {path}: it is not UTF-8 text") from None
    except configparser.Error as exc:
        raise SettingsError(_syntax_error(path, exc)) from None
    return parser


def _syntax_error(path: str, exc: configparser.Error) -> str:
    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"{path}, line {exc.lineno}: a [section] header must come first, not {exc.line.strip()!r}"
    if isinstance(exc, configparser.ParsingError):
        lineno, shown = exc.errors[0]  # configparser keeps the line as its repr()
        try:
            line = ast.literal_eval(shown)
        except (ValueError, SyntaxError):
            line = shown
        return f"{path}, line {lineno}: cannot parse {str(line).strip()!r} (expected 'name = value')"
    if isinstance(exc, configparser.DuplicateOptionError):
        return f"{path}, line {exc.lineno}: option {exc.option!r} repeated in section [{exc.section}]"
    if isinstance(exc, configparser.DuplicateSectionError):
        return f"{path}, line {exc.lineno}: section [{exc.section}] repeated"
    return f"{path}: {' '.join(str(exc).split())}"


def _file_value(parser: configparser.ConfigParser, path: str, section: str, option: str, attr: str) -> object:
    try:
        return _convert(attr, parser.get(section, option))
    except SettingsError as exc:
        raise SettingsError(f"{path}: [{section}] {option}: {exc}") from None


def _apply_config_file(settings: Settings, path: str) -> None:
    parser = read_config_file(path)
    for key, attr in _FILE_KEYS.items():
        section, option = key.split(".")
        if parser.has_option(section, option):
            setattr(settings, attr, _file_value(parser, path, section, option, attr))
    # oslo.policy's own name for the legacy switch, inverted.
    if parser.has_option("oslo_policy", "enforce_new_defaults"):
        legacy = not _file_value(parser, path, "oslo_policy", "enforce_new_defaults", "legacy_policy")
        if parser.has_option("billeting", "legacy_policy") and legacy != settings.legacy_policy:
            raise SettingsError(f"{path}: [oslo_policy] enforce_new_defaults and [billeting] "
                                "legacy_policy contradict each other; keep one of them")
        settings.legacy_policy = legacy


def load_settings(flags: dict[str, object], environ: dict[str, str] | None = None) -> Settings:
    """Merge flags (explicitly given ones only), environment and config file."""
    environ = os.environ if environ is None else environ
    settings = Settings()
    config_file = flags.get("config_file") or environ.get("BILLETING_CONFIG_FILE")
    if config_file:
        settings.config_file = str(config_file)
        _apply_config_file(settings, str(config_file))
    for f in fields(Settings):
        env_name = "BILLETING_" + f.name.upper()
        if env_name in environ and f.name != "config_file":
            setattr(settings, f.name, _convert(f.name, environ[env_name]))
    for name, value in flags.items():
        if value is not None and hasattr(settings, name):
            setattr(settings, name, value)
    check_settings(settings)
    return settings


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")  # what every command takes


def check_settings(settings: Settings) -> None:
    """Reject values no component could work with, naming the setting."""
    if settings.auth not in ("noauth2", "keystone"):
        raise SettingsError(f"auth must be noauth2 or keystone, not {settings.auth!r}")
    if not 1 <= settings.port <= 65535:
        raise SettingsError(f"port must be between 1 and 65535, not {settings.port}")
    for name, most in (("workers", MAX_WORKERS), ("threads", MAX_THREADS)):
        if getattr(settings, name) < 1:
            raise SettingsError(f"{name} must be at least 1, not {getattr(settings, name)}")
        if getattr(settings, name) > most:
            raise SettingsError(f"{name} must be at most {most}, not {getattr(settings, name)}")
    for name in ("header_timeout", "body_timeout", "keepalive_timeout", "graceful_timeout"):
        if not 0 < getattr(settings, name) < math.inf:
            raise SettingsError(f"{name} must be a positive number of seconds, not {getattr(settings, name)}")
    if settings.max_body_size < 1:
        raise SettingsError(f"max_body_size must be at least 1 byte, not {settings.max_body_size}")
    if settings.allocation_conflict_retry_count < 0:
        raise SettingsError("allocation_conflict_retry_count must not be negative")
    if settings.allocation_candidates_generation_strategy not in ("depth-first", "breadth-first"):
        raise SettingsError("allocation_candidates_generation_strategy must be depth-first or breadth-first, "
                            f"not {settings.allocation_candidates_generation_strategy!r}")
    if settings.metrics_access not in ("open", "policy"):
        raise SettingsError(f"metrics_access must be open or policy, not {settings.metrics_access!r}")
    settings.log_level = str(settings.log_level).upper()
    if settings.log_level not in LOG_LEVELS:
        raise SettingsError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
