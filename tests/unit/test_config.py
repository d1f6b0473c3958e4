"""Settings: flags over BILLETING_* environment over the config file, and
every bad value is a SettingsError naming the setting (never a traceback)."""
from __future__ import annotations

import pytest

from billeting import config
from billeting.cli import build_parser
from billeting.commands.common import CliError, settings_from_args
from billeting.config import Settings, SettingsError, load_settings


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "billeting.conf"
    path.write_text(
        "[api]\nport = 9001\nworkers = 3\nhost = 10.0.0.1\nauth_strategy = noauth2\n"
        "[database]\nconnection = sqlite:////from/file.sqlite\n"
        "[cors]\nallowed_origin = http://a.example, http://b.example\n"
        "[billeting]\nlegacy_policy = yes\nlog_level = debug\n"
        "[placement]\nmax_allocation_candidates = 50\n")
    return path


def test_defaults_without_any_source():
    settings = load_settings({}, environ={})
    assert settings == Settings()
    assert (settings.host, settings.port, settings.workers, settings.auth) == ("127.0.0.1", 8778, 1, "noauth2")


def test_config_file_values_are_converted(config_file):
    settings = load_settings({"config_file": str(config_file)}, environ={})
    assert settings.port == 9001 and settings.workers == 3 and settings.host == "10.0.0.1"
    assert settings.db == "sqlite:////from/file.sqlite"
    assert settings.cors_origins == ["http://a.example", "http://b.example"]
    assert settings.legacy_policy is True
    assert settings.log_level == "DEBUG"
    assert settings.max_allocation_candidates == 50
    assert settings.config_file == str(config_file)


def test_environment_beats_file_and_flags_beat_environment(config_file):
    environ = {"BILLETING_PORT": "9002", "BILLETING_WORKERS": "5", "BILLETING_LEGACY_POLICY": "false",
               "BILLETING_CORS_ORIGINS": "http://env.example"}
    settings = load_settings({"config_file": str(config_file), "port": 9003}, environ=environ)
    assert settings.port == 9003  # flag
    assert settings.workers == 5  # environment over file
    assert settings.legacy_policy is False  # environment over file
    assert settings.cors_origins == ["http://env.example"]
    assert settings.host == "10.0.0.1"  # only in the file


def test_config_file_named_by_environment(config_file):
    settings = load_settings({}, environ={"BILLETING_CONFIG_FILE": str(config_file)})
    assert settings.port == 9001


def test_flag_config_file_beats_environment_config_file(config_file, tmp_path):
    other = tmp_path / "other.conf"
    other.write_text("[api]\nport = 9100\n")
    settings = load_settings({"config_file": str(other)}, environ={"BILLETING_CONFIG_FILE": str(config_file)})
    assert settings.port == 9100


def test_cli_flags_not_given_do_not_override(config_file):
    args = build_parser().parse_args(["serve", "--config-file", str(config_file), "--workers", "2"])
    settings = settings_from_args(args, environ={"BILLETING_HOST": "0.0.0.0"})
    assert (settings.port, settings.workers, settings.host) == (9001, 2, "0.0.0.0")
    assert settings.legacy_policy is True  # --legacy-policy absent: the file's value stays


def test_cli_repeatable_cors_flags():
    args = build_parser().parse_args(["serve", "--cors-origin", "http://a.example", "http://b.example",
                                      "--cors-origin", "http://c.example", "--cors-allow-header", "X-A"])
    settings = settings_from_args(args, environ={})
    assert settings.cors_origins == ["http://a.example", "http://b.example", "http://c.example"]
    assert settings.cors_allow_headers == ["X-A"]


@pytest.mark.parametrize("environ,message", [
    ({"BILLETING_PORT": "eighty"}, "invalid value for port"),
    ({"BILLETING_PORT": "0"}, "port must be between 1 and 65535"),
    ({"BILLETING_PORT": "70000"}, "port must be between 1 and 65535"),
    ({"BILLETING_WORKERS": "0"}, "workers must be at least 1"),
    ({"BILLETING_THREADS": "-1"}, "threads must be at least 1"),
    ({"BILLETING_LEGACY_POLICY": "maybe"}, "invalid value for legacy_policy"),
    ({"BILLETING_AUTH": "basic"}, "auth must be noauth2 or keystone"),
    ({"BILLETING_LOG_LEVEL": "chatty"}, "log_level must be one of"),
    ({"BILLETING_CONFIG_FILE": "/nonexistent/billeting.conf"}, "cannot read config file"),
])
def test_bad_values_are_settings_errors(environ, message):
    with pytest.raises(SettingsError, match=message):
        load_settings({}, environ=environ)


def test_bad_value_in_file_names_the_setting(tmp_path):
    path = tmp_path / "bad.conf"
    path.write_text("[api]\nworkers = many\n")
    with pytest.raises(SettingsError, match="invalid value for workers"):
        load_settings({"config_file": str(path)}, environ={})


def test_cli_turns_settings_errors_into_cli_errors():
    args = build_parser().parse_args(["serve"])
    with pytest.raises(CliError, match="invalid value for port"):
        settings_from_args(args, environ={"BILLETING_PORT": "x"})


def test_default_db_is_in_the_user_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    url = config.default_db_url()
    assert url == f"sqlite:///{tmp_path / 'data' / 'billeting' / 'placement.sqlite'}"
    assert not (tmp_path / "data").exists()  # naming it creates nothing
    config.ensure_default_data_dir()
    assert (tmp_path / "data" / "billeting").is_dir()
    assert Settings().db_url == url
    assert Settings(db="sqlite:///x.sqlite").db_url == "sqlite:///x.sqlite"


def test_generation_strategy_is_read_and_checked(tmp_path):
    path = tmp_path / "strategy.conf"
    path.write_text("[placement]\nallocation_candidates_generation_strategy = breadth-first\n")
    assert load_settings({"config_file": str(path)}, environ={}).allocation_candidates_generation_strategy == \
        "breadth-first"
    with pytest.raises(SettingsError, match="allocation_candidates_generation_strategy"):
        load_settings({}, environ={"BILLETING_ALLOCATION_CANDIDATES_GENERATION_STRATEGY": "sideways"})


def test_oslo_policy_section(tmp_path):
    path = tmp_path / "policy.conf"
    path.write_text("[oslo_policy]\nenforce_new_defaults = False\nenforce_scope = False\n"
                    "policy_file = /etc/billeting/policy.yaml\n")
    settings = load_settings({"config_file": str(path)}, environ={})
    assert settings.legacy_policy is True
    assert settings.enforce_scope is False
    assert settings.policy_file == "/etc/billeting/policy.yaml"
    path.write_text("[oslo_policy]\nenforce_new_defaults = true\n")
    assert load_settings({"config_file": str(path)}, environ={}).legacy_policy is False
    # The flag and the environment still come first.
    assert load_settings({"config_file": str(path), "legacy_policy": True}, environ={}).legacy_policy is True
    assert load_settings({"config_file": str(path)}, environ={"BILLETING_LEGACY_POLICY": "1"}).legacy_policy is True
    assert Settings().enforce_scope is True


def test_contradicting_legacy_switches_in_one_file(tmp_path):
    path = tmp_path / "both.conf"
    path.write_text("[oslo_policy]\nenforce_new_defaults = true\n[billeting]\nlegacy_policy = true\n")
    with pytest.raises(SettingsError, match="contradict each other"):
        load_settings({"config_file": str(path)}, environ={})
    path.write_text("[oslo_policy]\nenforce_new_defaults = false\n[billeting]\nlegacy_policy = true\n")
    assert load_settings({"config_file": str(path)}, environ={}).legacy_policy is True


def test_bad_oslo_policy_value_names_it(tmp_path):
    path = tmp_path / "bad.conf"
    path.write_text("[oslo_policy]\nenforce_new_defaults = perhaps\n")
    with pytest.raises(SettingsError, match=r"\[oslo_policy\] enforce_new_defaults: invalid value"):
        load_settings({"config_file": str(path)}, environ={})
