"""``billeting placement audit``: each problem is found in a real database
where it was made the way it arises in practice (an inventory shrink through
the API; rows left behind by repairs done with foreign keys switched off),
reported as a table or JSON, with exit status 3."""
from __future__ import annotations

from contextlib import contextmanager

import orjson
import pytest
from sqlalchemy import delete, select, text, update

from billeting import cli
from billeting.placement.store import tables as t
from billeting.commands.placement_tools import EXIT_FINDINGS
from tests.placement.api.direct_rows import allocate, provider_id
from tests.conftest import new_uuid
from tests.placement.tools.servers import serving


def _ok(resp, *statuses):
    assert resp.status in (statuses or (200,)), resp
    return resp.json if resp.content else None


def with_inventory(client, create_provider, records) -> str:
    uuid = create_provider()["uuid"]
    _ok(client.put(f"/resource_providers/{uuid}/inventories", mv="1.39",
                   json={"resource_provider_generation": 0, "inventories": records}))
    return uuid


def shrink_below_usage(client, create_provider) -> str:
    rp = with_inventory(client, create_provider, {"VCPU": {"total": 8}})
    _ok(client.put(f"/allocations/{new_uuid()}", mv="1.39", json={
        "allocations": {rp: {"resources": {"VCPU": 6}}}, "project_id": "p", "user_id": "u",
        "consumer_generation": None, "consumer_type": "INSTANCE"}), 204)
    gen = client.get(f"/resource_providers/{rp}", mv="1.39").json["generation"]
    _ok(client.put(f"/resource_providers/{rp}/inventories/VCPU", mv="1.39",
                   json={"resource_provider_generation": gen, "total": 4, "reserved": 1}))
    return rp


@contextmanager
def foreign_keys_off(engine):
    """A transaction that may break foreign keys, as a manual repair might."""
    backend = engine.dialect.name
    with engine.connect() as conn:
        if backend == "sqlite":  # outside a transaction, or SQLite ignores it
            conn.connection.dbapi_connection.execute("PRAGMA foreign_keys=OFF")
        with conn.begin():
            if backend == "postgresql":
                conn.execute(text("SET LOCAL session_replication_role = replica"))
            elif backend == "mysql":
                conn.execute(text("SET FOREIGN_KEY_CHECKS=0"))
            yield conn
            if backend == "mysql":
                conn.execute(text("SET FOREIGN_KEY_CHECKS=1"))
        if backend == "sqlite":
            conn.connection.dbapi_connection.execute("PRAGMA foreign_keys=ON")


def audit_json(db_url, capsys) -> tuple[int, dict]:
    status = cli.main(["placement", "audit", "--db", db_url, "--json"])
    return status, orjson.loads(capsys.readouterr().out)


def test_a_clean_fleet_has_no_findings(client, create_provider, db_url, capsys):
    rp = with_inventory(client, create_provider, {"VCPU": {"total": 8}})
    _ok(client.put(f"/allocations/{new_uuid()}", mv="1.39", json={
        "allocations": {rp: {"resources": {"VCPU": 8}}}, "project_id": "p", "user_id": "u",
        "consumer_generation": None, "consumer_type": "INSTANCE"}), 204)  # exactly full is fine
    assert cli.main(["placement", "audit", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "no problems found" in out
    assert "checked: consumer_without_allocations, allocation_on_missing_provider, " \
           "allocation_without_inventory, usage_over_capacity, kept_usage_out_of_step, stock_out_of_step" in out


def test_every_problem_is_found_in_the_database(client, create_provider, engine, db_url, capsys):
    over = shrink_below_usage(client, create_provider)
    # A consumer row whose allocations were deleted by hand.
    orphan_host = with_inventory(client, create_provider, {"VCPU": {"total": 8}})
    orphan = allocate(engine, orphan_host, "VCPU", 1)
    with engine.begin() as conn:
        conn.execute(delete(t.allocations).where(t.allocations.c.consumer_id.in_(
            select(t.consumers.c.id).where(t.consumers.c.uuid == orphan))))
    # An inventory removed under its allocations, and a provider row deleted
    # under its allocations, both with foreign keys switched off.
    bare = with_inventory(client, create_provider, {"DISK_GB": {"total": 100}})
    bare_consumer = allocate(engine, bare, "DISK_GB", 30)
    gone = with_inventory(client, create_provider, {"MEMORY_MB": {"total": 1024}})
    gone_consumer = allocate(engine, gone, "MEMORY_MB", 512)
    with foreign_keys_off(engine) as conn:
        conn.execute(delete(t.inventories).where(t.inventories.c.resource_provider_id == provider_id(conn, bare)))
        gone_id = provider_id(conn, gone)
        conn.execute(delete(t.inventories).where(t.inventories.c.resource_provider_id == gone_id))
        conn.execute(update(t.resource_providers).where(t.resource_providers.c.id == gone_id)
                     .values(root_provider_id=None))
        conn.execute(delete(t.resource_providers).where(t.resource_providers.c.id == gone_id))

    status, report = audit_json(db_url, capsys)
    assert status == EXIT_FINDINGS
    assert all(check["ran"] for check in report["checks"])
    found = {(f["check"], f["provider"], f["consumer"]) for f in report["findings"]}
    assert found == {
        ("usage_over_capacity", over, None),
        ("consumer_without_allocations", None, orphan),
        # The hand-deleted allocation left its usage counted on the inventory.
        ("kept_usage_out_of_step", orphan_host, None),
        ("allocation_without_inventory", bare, None),
        # ... and its stock still lists the inventory deleted by hand.
        ("stock_out_of_step", bare, None),
        ("allocation_on_missing_provider", f"id:{gone_id}", gone_consumer),
    }
    over_finding = next(f for f in report["findings"] if f["check"] == "usage_over_capacity")
    assert over_finding["used"] == 6 and over_finding["capacity"] == 3.0
    assert over_finding["detail"] == "6 VCPU used, capacity 3 (total 4, reserved 1, allocation ratio 1)"
    assert bare_consumer

    # The table says the same.
    assert cli.main(["placement", "audit", "--db", db_url]) == EXIT_FINDINGS
    table = capsys.readouterr().out
    assert "6 problem(s)" in table and over in table and orphan in table


def test_recount_usage_repairs_kept_usage(client, create_provider, engine, db_url, capsys):
    rp = with_inventory(client, create_provider, {"VCPU": {"total": 8}})
    allocate(engine, rp, "VCPU", 3)
    with engine.begin() as conn:  # a restore that brought allocations but not the kept usage
        conn.execute(update(t.inventories).values(used=0))
    status, report = audit_json(db_url, capsys)
    assert status == EXIT_FINDINGS
    # (the provider's stock still says 3: the rows changed around Placement)
    finding, stale = report["findings"]
    assert (finding["check"], finding["provider"], finding["resource_class"], finding["used"]) == \
        ("kept_usage_out_of_step", rp, "VCPU", 3)
    assert finding["detail"].startswith("kept usage 0 VCPU but its allocations sum to 3")
    assert (stale["check"], stale["provider"]) == ("stock_out_of_step", rp)
    assert cli.main(["placement", "audit", "--db", db_url, "--recount-usage"]) == 0
    captured = capsys.readouterr()
    assert "recounted kept usage: 1 inventory row(s) changed" in captured.err
    assert "no problems found" in captured.out
    resp = client.get("/allocation_candidates?resources=VCPU:6", mv="1.39")
    assert resp.json["allocation_requests"] == []  # 8 - 3 left: the candidates see it again


def test_the_api_audit_checks_capacity_and_says_what_it_could_not(app, client, create_provider, capsys):
    over = shrink_below_usage(client, create_provider)
    with serving(app) as url:
        assert cli.main(["placement", "audit", "--url", url, "--token", "admin", "--json"]) == EXIT_FINDINGS
        report = orjson.loads(capsys.readouterr().out)
        assert [(f["check"], f["provider"], f["resource_class"]) for f in report["findings"]] == \
            [("usage_over_capacity", over, "VCPU")]
        skipped = {c["name"]: c["reason"] for c in report["checks"] if not c["ran"]}
        assert set(skipped) == {"consumer_without_allocations", "allocation_on_missing_provider",
                                "allocation_without_inventory", "kept_usage_out_of_step",
                                "stock_out_of_step"}
        assert all("needs --db" in reason for reason in skipped.values())
        assert cli.main(["placement", "audit", "--url", url, "--token", "admin"]) == EXIT_FINDINGS
        out = capsys.readouterr().out
        assert "not checked: consumer_without_allocations (needs --db" in out


def test_audit_refuses_a_database_that_is_not_current(tmp_path, capsys):
    (tmp_path / "empty.sqlite").touch()
    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    assert cli.main(["placement", "audit", "--db", url]) == 1
    err = capsys.readouterr().err.strip()
    assert "is at revision none" in err and len(err.splitlines()) == 1


def test_audit_of_a_missing_sqlite_file_creates_nothing(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'nowhere.sqlite'}"
    assert cli.main(["placement", "audit", "--db", url]) == 1
    assert capsys.readouterr().err == f"billeting: error: database {url}: no such file\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args,message", [
    (["--url", "http://127.0.0.1:9", "--db", "sqlite:///x.sqlite"], "give either --url or --db, not both"),
    (["--url", "ftp://somewhere", "--token", "admin"], "--url must start with http:// or https://"),
    (["--url", "http://127.0.0.1:9", "--recount-usage"], "--recount-usage repairs Billeting's database"),
])
def test_audit_argument_errors(args, message, capsys):
    assert cli.main(["placement", "audit", *args]) == 1
    assert message in capsys.readouterr().err
