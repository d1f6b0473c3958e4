"""The cell commands: cell-db upgrade/status, one-line errors from compute
and conductor, and ``billeting audit`` reporting and removing orphans."""
from __future__ import annotations

import uuid as uuidlib

import pytest

from billeting import cli
from billeting.commands import cells as cell_command
from billeting.cells import instances as inst
from billeting.compute.driver import node_uuid
from billeting.placement_client.model import AllocationWrite, ProviderResources

from tests.cells.conftest import PROJECT, USER
from tests.conftest import one_line
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("restore_logging")


def test_cell_db_upgrade_then_status(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cell.sqlite'}"
    assert cli.main(["cell-db", "status", "--cell-db", url]) == 1
    assert "revision none" in capsys.readouterr().out
    assert cli.main(["cell-db", "upgrade", "--cell-db", url]) == 0
    assert "upgraded from empty" in capsys.readouterr().out
    assert cli.main(["cell-db", "upgrade", "--cell-db", url]) == 0
    assert "already at revision" in capsys.readouterr().out
    assert cli.main(["cell-db", "status", "--cell-db", url]) == 0


def test_status_and_audit_of_missing_cell_databases_create_nothing(tmp_path, monkeypatch, capsys):
    url = f"sqlite:///{tmp_path / 'cell.sqlite'}"
    assert cli.main(["cell-db", "status", "--cell-db", url]) == 1
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the embedded default's directory
    assert cli.main(["cell-db", "status"]) == 1
    assert cli.main(["audit", "--cell", f"cell1={url}", "--placement-url", "http://127.0.0.1:9"]) == 1
    assert one_line(capsys) == f"billeting: error: cell cell1's database {url}: no such file"
    assert list(tmp_path.iterdir()) == []


def test_cell_db_status_of_a_file_that_is_not_sqlite_is_one_line(tmp_path, capsys):
    path = tmp_path / "cell.sqlite"
    path.write_bytes(b"\x8a\xff not a database " * 100)
    assert cli.main(["cell-db", "status", "--cell-db", f"sqlite:///{path}"]) == 1
    assert "file is not a database" in one_line(capsys)


@pytest.mark.parametrize("args, expected", [
    (["compute", "--transport-url", "memory:///cell1"], "a memory:// bus only reaches this process"),
    (["compute", "--transport-url", "http://x/"], "invalid transport URL"),
    (["compute", "--failure-rate", "2"], "failure_rate must be between 0 and 1"),
    (["compute", "--image-types", "qcow2,qed"], "unknown image type(s) qed"),
    (["compute", "--reserved-host-memory-mb", "-1"], "must not be negative"),
    (["compute", "--consecutive-build-service-disable-threshold", "-1"], "0 turns it off"),
    (["compute", "--host", "a", "--host", "a", "--transport-url", "amqp://g:g@127.0.0.1:1/x",
      "--placement-url", "http://127.0.0.1:1"], "cannot reach Placement"),
    (["conductor", "--max-attempts", "0"], "max_attempts must be at least 1"),
    (["conductor", "--recent-failure-hosts", "0"], "recent_failure_hosts must be at least 1"),
    (["conductor", "--recent-failure-window", "-1"], "recent_failure_window_s must not be negative"),
    (["conductor", "--transport-url", "amqp://g:secret@127.0.0.1:1/x", "--placement-url", "http://127.0.0.1:1"],
     "cannot reach Placement"),
    (["audit"], "name every cell"),
    (["audit", "--cell", "cell1"], "--cell wants NAME=DATABASE_URL"),
])
def test_operator_mistakes_are_one_line(tmp_path, capsys, args, expected):
    if args[0] in ("compute", "conductor"):
        args = [*args, "--cell-db", f"sqlite:///{tmp_path / 'cell.sqlite'}", "--auto-upgrade"]
    assert cli.main(args) == 1
    line = one_line(capsys)
    assert expected in line and "secret" not in line


def test_compute_build_health_flags_reach_the_settings():
    from billeting.commands import compute as compute_command

    def settings(*flags: str):
        return compute_command.compute_settings(cli.build_parser().parse_args(["compute", *flags]))

    assert settings().consecutive_build_service_disable_threshold == 10
    chosen = settings("--consecutive-build-service-disable-threshold", "3", "--build-health-check-interval", "30")
    assert (chosen.consecutive_build_service_disable_threshold, chosen.build_health_check_interval_s) == (3, 30.0)


def test_compute_image_types_flag_sets_the_disk_formats_the_fake_node_boots():
    from billeting.commands import compute as compute_command
    from billeting.compute.fake import DEFAULT_IMAGE_TYPES

    def image_types(*flags: str) -> tuple[str, ...]:
        return compute_command.fake_config(cli.build_parser().parse_args(["compute", *flags])).image_types

    assert image_types() == DEFAULT_IMAGE_TYPES
    assert image_types("--image-types", "qcow2, Raw") == ("QCOW2", "RAW")
    assert image_types("--image-types", "") == ()


def test_a_cell_database_behind_the_code_is_refused_with_the_fix(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cell.sqlite'}"
    assert cli.main(["compute", "--cell-db", url, "--transport-url", "amqp://g:g@127.0.0.1:1/x"]) == 1
    line = one_line(capsys)
    assert "empty (no cell schema)" in line and f"billeting cell-db upgrade --cell-db {url}" in line


def test_audit_reports_and_removes_orphans(deployment, cell_db, monkeypatch, capsys):
    deployment.compute("h1")
    deployment.conductor()
    engine = deployment.cells["cell1"].engine
    uuid = deployment.boot()
    wait_for(lambda: inst.get(engine, uuid).vm_state is inst.VmState.ACTIVE)
    assert inst.begin_delete(engine, uuid) and inst.finish_delete(engine, uuid)  # the allocation stayed
    stranger = str(uuidlib.uuid4())
    write = AllocationWrite(allocations={node_uuid("h1"): ProviderResources({"VCPU": 1})}, project_id=PROJECT,
                            user_id=USER, consumer_generation=None)
    assert deployment.placement.put_allocations(stranger, write).ok
    # The command talks to this test's in-process Placement instead of a URL.
    monkeypatch.setattr(cell_command, "placement_client", lambda args: deployment.placement)
    cells = ["--cell", f"cell1={cell_db}"]

    assert cli.main(["audit", *cells, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"found    {uuid}  deleted-instance" in out and f"kept     {stranger}  unknown" in out
    assert "1 orphaned, 1 unknown, 0 removed (dry run)" in out

    assert cli.main(["audit", *cells]) == 0
    out = capsys.readouterr().out
    assert f"removed  {uuid}" in out and "1 orphaned, 1 unknown, 1 removed" in out
    assert deployment.placement.get_allocations(uuid).allocations == {}
    assert deployment.placement.get_allocations(stranger).allocations != {}

    assert cli.main(["audit", *cells, "--remove-unknown"]) == 0
    assert "0 orphaned, 1 unknown, 1 removed" in capsys.readouterr().out
    assert deployment.placement.get_allocations(stranger).allocations == {}


@pytest.mark.slow
def test_a_compute_the_bus_refuses_leaves_no_service_or_provider_behind(engine, db_url, cell_db, capsys):
    from billeting.cells import services
    from billeting.common.db.engine import make_engine
    from billeting.placement_client import http_client
    from tests.concurrency.serve import running_server
    from tests.conftest import AMQP_BASE

    wrong_password = AMQP_BASE.replace("guest:guest@", "guest:not-the-password@") + "/"
    with running_server(db_url, workers=1) as server:
        assert cli.main(["compute", "--host", "refused", "--cell", "cell1", "--cell-db", cell_db,
                         "--transport-url", wrong_password, "--placement-url", server.url]) == 1
        line = one_line(capsys)
        assert "cell cell1's bus: cannot connect to" in line and "not-the-password" not in line
        client = http_client(server.url)
        try:
            assert [p.name for p in client.list_providers()] == []
        finally:
            client.close()
    cell_engine = make_engine(cell_db)
    try:
        assert services.get(cell_engine, "refused") is None and services.nodes(cell_engine, "refused") == []
    finally:
        cell_engine.dispose()
