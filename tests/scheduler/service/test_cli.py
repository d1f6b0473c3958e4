"""``billeting scheduler …`` and ``billeting topology …``: outputs, one-line
errors, exit statuses; the service settings' precedence."""
from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from billeting.cli import main
from billeting.config import SettingsError
from billeting.scheduler.service import config as config_mod
from tests.support.ports import free_port


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _ThreadedServer(WSGIServer):
    daemon_threads = True


@pytest.fixture
def scheduler_url(service):
    from billeting.scheduler.api.app import make_app

    server = make_server("127.0.0.1", 0, make_app(service), server_class=_ThreadedServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_topology_commands(scheduler_url, fleet, capsys):
    for name in ("h1", "h2", "h3"):
        fleet.add(name)
    url = ["--url", scheduler_url]
    assert main(["topology", "define", "rack", "r1", "--hosts", "h1", "h2", *url]) == 0
    assert "defined rack r1 (aggregate " in capsys.readouterr().out
    assert main(["topology", "define", "rack", "r2", "--hosts", "h3", *url]) == 0
    assert main(["topology", "define", "row", "w1", "--members", "r1", "r2", *url]) == 0
    capsys.readouterr()
    assert main(["topology", "list", *url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "rack r1  in w1  hosts h1, h2", "rack r2  in w1  hosts h3", "row w1  members r1, r2  hosts h1, h2, h3"]
    assert main(["topology", "show", "rack", "r1", *url]) == 0
    assert "parent:    w1" in capsys.readouterr().out
    assert main(["topology", "define", "rack", "r3", "--hosts", "nope", *url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown host nope" in err
    assert main(["topology", "remove", "row", "w1", *url]) == 0
    assert main(["topology", "list", "row", *url]) == 0
    assert "no domains at level row" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["topology", "define", "rack", "r1"])
    assert exit_.value.code == 2
    assert "one of the arguments --hosts --members is required" in capsys.readouterr().err


@pytest.mark.parametrize("action, name", [("define", ""), ("define", "a/b"), ("show", " r1"), ("remove", "a/b")])
def test_a_domain_name_no_route_can_carry_is_a_usage_error(action, name, capsys):
    extra = ["--hosts", "host1"] if action == "define" else []
    # The check comes before any request: no scheduler listens on port 9.
    assert main(["topology", action, "rack", name, *extra, "--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"billeting: error: invalid rack name {name!r}: use 1 to 255") and err.count("\n") == 1


def test_an_unreachable_scheduler_is_one_line(capsys):
    assert main(["topology", "list", "--url", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the scheduler" in err


def test_db_upgrade_and_status(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'api.sqlite'}"
    assert main(["scheduler", "db", "status", "--db", db]) == 1
    assert "behind; run 'billeting scheduler db upgrade --db" in capsys.readouterr().out
    assert main(["scheduler", "db", "upgrade", "--db", db]) == 0
    from billeting.apidb import migrate

    assert f"upgraded from empty to revision {migrate.head_revision()}" in capsys.readouterr().out
    assert main(["scheduler", "db", "status", "--db", db]) == 0


def test_db_status_creates_nothing(tmp_path, monkeypatch, capsys):
    assert main(["scheduler", "db", "status", "--db", f"sqlite:///{tmp_path / 'api.sqlite'}"]) == 1
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the embedded default's directory
    assert main(["scheduler", "db", "status"]) == 1
    assert "revision none" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_serve_refuses_bad_set_ups_in_one_line(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'api.sqlite'}"
    port = ["--port", str(free_port())]
    assert main(["scheduler", "serve", "--db", db, *port, "--policy-file", str(tmp_path / "none")]) == 1
    assert "cannot read policy file" in capsys.readouterr().err
    assert main(["scheduler", "serve", "--db", db, *port, "--placement-db", f"sqlite:///{tmp_path / 'p.sqlite'}"]) == 1
    assert "run 'billeting db upgrade --db" in capsys.readouterr().err
    # bad setting values are usage errors (2), as for `billeting serve`
    assert main(["scheduler", "serve", "--db", db, *port, "--transport-url", "http://nope"]) == 2
    assert "unsupported bus URL" in capsys.readouterr().err
    assert main(["scheduler", "serve", "--db", "oracle://x/y"]) == 2
    assert "unsupported database driver" in capsys.readouterr().err
    assert main(["scheduler", "serve", "--db", f"sqlite:///{tmp_path / 'x.sqlite'}", "--workers", "0"]) == 2
    assert main(["scheduler", "serve", "--db", f"sqlite:///{tmp_path / 'x.sqlite'}", "--port", "99999"]) == 2
    assert "workers must be at least 1" in capsys.readouterr().err
    assert main(["scheduler", "serve", "--db", f"sqlite:///{tmp_path / 'x.sqlite'}", "--workers", "99999999999"]) == 2
    assert "workers must be at most 1024" in capsys.readouterr().err


def test_settings_precedence(tmp_path):
    ini = tmp_path / "billeting.conf"
    ini.write_text("[scheduler_api]\nport = 9001\nworkers = 3\n[scheduler]\ntopology_levels = rack, hall\n"
                   "[filter_scheduler]\nram_weight_multiplier = -1.5\n[messaging]\ntransport_url = memory:///x\n")
    cfg = config_mod.load({"config_file": str(ini), "workers": 2}, {"BILLETING_SCHEDULER_PORT": "9002"})
    assert (cfg.port, cfg.workers, cfg.transport_url) == (9002, 2, "memory:///x")
    settings = cfg.scheduler_settings()
    assert settings.topology_levels == ("rack", "hall") and settings.multiplier("ram_weight_multiplier") == -1.5
    for bad in ("nan", "inf", "lots"):  # a NaN multiplier would make every weight NaN
        ini.write_text(f"[filter_scheduler]\nram_weight_multiplier = {bad}\n")
        with pytest.raises(SettingsError, match="invalid value for ram_weight_multiplier"):
            config_mod.load({"config_file": str(ini)}, {})
    with pytest.raises(SettingsError, match="invalid topology level name 'cell'"):
        config_mod.load({}, {"BILLETING_SCHEDULER_TOPOLOGY_LEVELS": "rack,cell"})
    with pytest.raises(SettingsError, match="unknown scheduler filter"):
        config_mod.load({}, {"BILLETING_SCHEDULER_ENABLED_FILTERS": "NoSuchFilter"})
    # The opt-in filters and their limits, as Nova's [filter_scheduler] options.
    ini.write_text("[filter_scheduler]\nenabled_filters = ComputeFilter, AggregateInstanceExtraSpecsFilter, "
                   "NumInstancesFilter\nmax_instances_per_host = 20\nmax_io_ops_per_host = 3\n")
    settings = config_mod.load({"config_file": str(ini)}, {}).scheduler_settings()
    assert settings.enabled_filters == ("ComputeFilter", "AggregateInstanceExtraSpecsFilter", "NumInstancesFilter")
    assert (settings.max_instances_per_host, settings.max_io_ops_per_host) == (20, 3)
    with pytest.raises(SettingsError, match="must not be negative"):
        config_mod.load({}, {"BILLETING_SCHEDULER_MAX_IO_OPS_PER_HOST": "-1"})
    ini.write_text("[scheduler]\nenable_isolated_aggregate_filtering = true\n")
    assert config_mod.load({"config_file": str(ini)}, {}).scheduler_settings().enable_isolated_aggregate_filtering
    assert not config_mod.load({}, {}).scheduler_settings().enable_isolated_aggregate_filtering
    ini.write_text("[scheduler]\nimage_metadata_prefilter = yes\n")
    assert config_mod.load({"config_file": str(ini)}, {}).scheduler_settings().image_metadata_prefilter
    assert not config_mod.load({}, {}).scheduler_settings().query_placement_for_image_type_support
    ini.write_text("[scheduler]\nquery_placement_for_image_type_support = true\n")
    assert config_mod.load({"config_file": str(ini)}, {}).scheduler_settings().query_placement_for_image_type_support
    environ = {"BILLETING_SCHEDULER_QUERY_PLACEMENT_FOR_IMAGE_TYPE_SUPPORT": "false"}
    assert not config_mod.load({"config_file": str(ini)}, environ).scheduler_settings(
        ).query_placement_for_image_type_support


def test_every_serve_flag_reaches_the_settings(tmp_path):
    """The flags' names are read from the parser: each one given lands in
    the settings, and the pool flags (not settings of the service) stay out."""
    from billeting.cli import build_parser
    from billeting.commands.scheduler import load_config

    ini = tmp_path / "billeting.conf"
    ini.write_text("[scheduler_api]\nport = 9001\n")
    common = ["scheduler", "serve", "--config-file", str(ini), "--db", "sqlite:///x.sqlite", "--log-level", "debug",
              "--host", "0.0.0.0", "--port", "9002", "--workers", "2", "--threads", "3", "--placement-token", "t",
              "--transport-url", "memory:///x", "--auth", "keystone", "--policy-file", "p.yaml", "--legacy-policy",
              "--auto-upgrade", "--db-pool-size", "7"]
    cfg = load_config(build_parser().parse_args([*common, "--placement-url", "http://p.example:1"]))
    assert (cfg.config_file, cfg.db, cfg.log_level, cfg.host, cfg.port, cfg.workers, cfg.threads,
            cfg.placement_url, cfg.placement_token, cfg.transport_url, cfg.auth, cfg.policy_file,
            cfg.legacy_policy, cfg.auto_upgrade) == (
        str(ini), "sqlite:///x.sqlite", "DEBUG", "0.0.0.0", 9002, 2, 3, "http://p.example:1", "t", "memory:///x",
        "keystone", "p.yaml", True, True)
    assert not hasattr(cfg, "db_pool_size")
    assert load_config(build_parser().parse_args([*common, "--placement-db", "sqlite:///p.sqlite"])).placement_db \
        == "sqlite:///p.sqlite"
    # Flags left out keep the file's value.
    assert load_config(build_parser().parse_args(["scheduler", "serve", "--config-file", str(ini)])).port == 9001


def test_keystone_placement_auth_comes_from_the_placement_section(tmp_path):
    from billeting.placement_client import KeystoneAuth
    from billeting.scheduler.serve import keystone_auth

    ini = tmp_path / "billeting.conf"
    ini.write_text("[placement]\nauth_type = password\nauth_url = http://keystone.invalid/v3\nusername = sched\n"
                   "password = secret\nproject_name = service\nuser_domain_name = Default\n"
                   "project_domain_name = Default\n")
    auth = keystone_auth(config_mod.load({"config_file": str(ini)}, {}))
    assert isinstance(auth, KeystoneAuth)
    assert keystone_auth(config_mod.load({}, {})) is None
