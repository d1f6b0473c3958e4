"""``billeting placement export`` and ``import`` against real HTTP servers:
a fleet goes out of one service and into another unchanged; an import that
finds existing objects refuses (or skips them), and one that fails halfway
leaves the target as it was."""
from __future__ import annotations

import os
import pty
import subprocess
import sys

import orjson
import pytest

from billeting import cli
from billeting.placement.tools import fleet as fleets
from tests.conftest import new_uuid
from tests.placement.tools.servers import serving
from tests.support.ports import free_port

AGG = "a1f5c0de-0000-4000-8000-0000000000e1"


def _ok(resp, *statuses):
    assert resp.status in (statuses or (200,)), resp
    return resp.json if resp.content else None


def build_fleet(client) -> dict[str, str]:
    """A fleet with everything an export must carry: a three-level tree, a
    sharing provider, custom classes and traits, aggregates, inventories with
    every field set, typed and untyped consumers, and usage above capacity
    after an inventory shrink."""
    _ok(client.put("/resource_classes/CUSTOM_GPU", mv="1.7"), 201)
    _ok(client.put("/traits/CUSTOM_FAST", mv="1.6"), 201)
    names: dict[str, str] = {}

    def provider(name, parent=None):
        body = {"name": name, "uuid": new_uuid()}
        if parent:
            body["parent_provider_uuid"] = names[parent]
        names[name] = _ok(client.post("/resource_providers", json=body, mv="1.39"))["uuid"]
        return names[name]

    def inventories(name, records):
        gen = client.get(f"/resource_providers/{names[name]}", mv="1.39").json["generation"]
        _ok(client.put(f"/resource_providers/{names[name]}/inventories", mv="1.39",
                       json={"resource_provider_generation": gen, "inventories": records}))

    def traits(name, *found):
        gen = client.get(f"/resource_providers/{names[name]}", mv="1.39").json["generation"]
        _ok(client.put(f"/resource_providers/{names[name]}/traits", mv="1.39",
                       json={"resource_provider_generation": gen, "traits": list(found)}))

    def aggregates(name, *found):
        gen = client.get(f"/resource_providers/{names[name]}", mv="1.39").json["generation"]
        _ok(client.put(f"/resource_providers/{names[name]}/aggregates", mv="1.39",
                       json={"resource_provider_generation": gen, "aggregates": list(found)}))

    # Children are created before a sibling root so that list order is not tree order.
    provider("cn1")
    provider("numa0", "cn1")
    provider("pf0", "numa0")
    provider("numa1", "cn1")
    provider("share")
    inventories("cn1", {"DISK_GB": {"total": 500, "reserved": 20, "min_unit": 5, "max_unit": 100,
                                    "step_size": 5, "allocation_ratio": 1.5}})
    inventories("numa0", {"VCPU": {"total": 8, "allocation_ratio": 4.0}, "MEMORY_MB": {"total": 4096}})
    inventories("numa1", {"VCPU": {"total": 8}, "CUSTOM_GPU": {"total": 2}})
    inventories("pf0", {"SRIOV_NET_VF": {"total": 16}})
    inventories("share", {"DISK_GB": {"total": 2000}})
    traits("numa1", "HW_NUMA_ROOT", "CUSTOM_FAST")
    traits("share", "MISC_SHARES_VIA_AGGREGATE")
    aggregates("cn1", AGG)
    aggregates("share", AGG, new_uuid())

    def consume(allocations, mv="1.39", kind="INSTANCE"):
        body = {"allocations": {names[rp]: {"resources": r} for rp, r in allocations.items()},
                "project_id": "proj-a", "user_id": "user-a", "consumer_generation": None}
        if mv == "1.39":
            body["consumer_type"] = kind
        _ok(client.put(f"/allocations/{new_uuid()}", json=body, mv=mv), 204)

    consume({"numa0": {"VCPU": 20, "MEMORY_MB": 1024}, "share": {"DISK_GB": 50}})
    consume({"numa1": {"CUSTOM_GPU": 1}, "cn1": {"DISK_GB": 15}}, kind="MIGRATION")
    consume({"pf0": {"SRIOV_NET_VF": 2}}, mv="1.37")  # an untyped consumer
    # Shrink numa0's VCPU below its usage and change cn1's step size under an
    # existing 15 GB allocation: both allowed, and both must survive the trip.
    gen = client.get(f"/resource_providers/{names['numa0']}", mv="1.39").json["generation"]
    _ok(client.put(f"/resource_providers/{names['numa0']}/inventories/VCPU", mv="1.39",
                   json={"resource_provider_generation": gen, "total": 4}))
    gen = client.get(f"/resource_providers/{names['cn1']}", mv="1.39").json["generation"]
    _ok(client.put(f"/resource_providers/{names['cn1']}/inventories/DISK_GB", mv="1.39",
                   json={"resource_provider_generation": gen, "total": 500, "reserved": 20, "min_unit": 5,
                         "max_unit": 100, "step_size": 10, "allocation_ratio": 1.5}))
    return names


def export(url: str, path, capsys) -> fleets.Fleet:
    assert cli.main(["placement", "export", "--url", url, "--token", "admin", "-o", str(path)]) == 0
    assert "exported" in capsys.readouterr().err
    return fleets.decode(path.read_bytes())


def comparable(fleet: fleets.Fleet) -> dict:
    found = orjson.loads(fleets.encode(fleet))
    found.pop("source")
    found.pop("exported_at")
    return found


@pytest.fixture
def source(app, client):
    names = build_fleet(client)
    with serving(app) as url:
        yield url, names


@pytest.fixture
def target(target_app):
    with serving(target_app) as url:
        yield url


def test_a_fleet_survives_export_and_import(source, target, target_client, tmp_path, capsys):
    url, names = source
    exported = export(url, tmp_path / "fleet.json", capsys)

    order = [p.uuid for p in exported.providers]
    for p in exported.providers:
        if p.parent_provider_uuid:
            assert order.index(p.parent_provider_uuid) < order.index(p.uuid)
    assert exported.resource_classes == ["CUSTOM_GPU"] and exported.traits == ["CUSTOM_FAST"]
    assert {c.consumer_type for c in exported.consumers} == {"INSTANCE", "MIGRATION", None}
    cn1 = next(p for p in exported.providers if p.uuid == names["cn1"])
    assert cn1.inventories["DISK_GB"] == fleets.Inventory(500, 20, 5, 100, 10, 1.5)

    assert cli.main(["placement", "import", str(tmp_path / "fleet.json"), "--url", target, "--token", "admin"]) == 0
    out = capsys.readouterr().out
    assert "imported 5 providers, 3 consumers, 1 custom resource classes and 1 custom traits" in out
    assert "2 inventories hold more usage than capacity" in out

    again = export(target, tmp_path / "again.json", capsys)
    assert comparable(again) == comparable(exported)
    # Consumers start afresh on the target (generation 1), as after any first write.
    first = exported.consumers[0].uuid
    assert target_client.get(f"/allocations/{first}", mv="1.39").json["consumer_generation"] == 1


def test_a_second_import_refuses_and_writes_nothing(source, target, target_client, tmp_path, capsys):
    url, _ = source
    export(url, tmp_path / "fleet.json", capsys)
    args = ["placement", "import", str(tmp_path / "fleet.json"), "--url", target, "--token", "admin"]
    assert cli.main(args) == 0
    capsys.readouterr()
    before = target_client.get("/resource_providers", mv="1.39").json
    assert cli.main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("billeting: error: refusing to import: 5 provider(s)")
    assert "3 consumer(s) with allocations" in err and "nothing was written" in err
    assert len(err.splitlines()) == 1
    assert target_client.get("/resource_providers", mv="1.39").json == before


def test_skip_existing_imports_only_what_is_missing(source, target, target_client, tmp_path, capsys):
    url, names = source
    exported = export(url, tmp_path / "fleet.json", capsys)
    args = ["placement", "import", str(tmp_path / "fleet.json"), "--url", target, "--token", "admin"]
    assert cli.main(args) == 0
    # Remove one consumer and one leaf provider from the target, then import again.
    untyped = next(c.uuid for c in exported.consumers if c.consumer_type is None)
    _ok(target_client.delete(f"/allocations/{untyped}"), 204)
    _ok(target_client.delete(f"/resource_providers/{names['pf0']}"), 204)
    capsys.readouterr()
    assert cli.main(args + ["--skip-existing"]) == 0
    out = capsys.readouterr().out
    assert "imported 1 providers, 1 consumers" in out
    assert "skipped 4 providers and 2 consumers that already existed" in out
    assert comparable(export(target, tmp_path / "again.json", capsys)) == comparable(exported)


def test_a_failed_import_removes_what_it_wrote(source, target, target_client, tmp_path, capsys):
    url, names = source
    exported = export(url, tmp_path / "fleet.json", capsys)
    # A child whose inventory the target refuses (total 0): the roots, the custom
    # class and trait are written first, and must be gone again afterwards.
    broken = [p if p.uuid != names["pf0"] else
              fleets.Provider(p.uuid, p.name, p.parent_provider_uuid, {"SRIOV_NET_VF": fleets.Inventory(total=0)})
              for p in exported.providers]
    consumers = [c for c in exported.consumers if names["pf0"] not in c.allocations]
    (tmp_path / "broken.json").write_bytes(fleets.encode(fleets.Fleet(
        **{**{f: getattr(exported, f) for f in exported.__struct_fields__}, "providers": broken,
           "consumers": consumers})))
    before_classes = target_client.get("/resource_classes", mv="1.39").json
    assert cli.main(["placement", "import", str(tmp_path / "broken.json"), "--url", target,
                     "--token", "admin", "--concurrency", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("billeting: error: import failed: PUT /resource_providers/")
    assert "400" in err and err.endswith("everything it had written was removed again")
    assert target_client.get("/resource_providers", mv="1.39").json == {"resource_providers": []}
    assert target_client.get("/resource_classes", mv="1.39").json == before_classes
    assert "CUSTOM_FAST" not in target_client.get("/traits", mv="1.39").json["traits"]


def test_a_name_taken_by_another_provider_is_refused(source, target, target_client, tmp_path, capsys):
    url, _ = source
    export(url, tmp_path / "fleet.json", capsys)
    _ok(target_client.post("/resource_providers", json={"name": "numa1"}, mv="1.39"))
    assert cli.main(["placement", "import", str(tmp_path / "fleet.json"), "--url", target, "--token", "admin",
                     "--skip-existing"]) == 1
    err = capsys.readouterr().err
    assert "provider names already used by other providers" in err and "numa1" in err
    assert len(target_client.get("/resource_providers", mv="1.39").json["resource_providers"]) == 1


@pytest.mark.parametrize("content,message", [
    (b"not json", "not JSON"),
    (b'{"format": "something-else"}', "not a fleet file"),
    (b'{"format": "billeting-placement-fleet", "version": 9, "source": "", "microversion": "1.39", '
     b'"exported_at": "", "resource_classes": [], "traits": [], "providers": [], "consumers": []}',
     "fleet file version 9 is not supported"),
])
def test_bad_files_are_one_line_errors(tmp_path, capsys, content, message):
    (tmp_path / "bad.json").write_bytes(content)
    assert cli.main(["placement", "import", str(tmp_path / "bad.json"), "--url", "http://127.0.0.1:9",
                     "--token", "admin"]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_unreachable_service_is_a_one_line_error(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert cli.main(["placement", "export", "--url", url, "--token", "admin"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"billeting: error: GET {url}/: cannot connect") and len(err.splitlines()) == 1
    assert err.endswith("Connection refused)")  # not urllib3's stray quote


def test_closed_stdin_and_stdout_are_one_line_errors(capsys, monkeypatch):
    # As when started with 0<&- or >&-: Python then has no sys.stdin / sys.stdout.
    monkeypatch.setattr(sys, "stdin", None)
    assert cli.main(["placement", "import", "-", "--url", "http://127.0.0.1:9", "--token", "admin"]) == 1
    assert capsys.readouterr().err == "billeting: error: cannot read standard input: it is closed\n"
    monkeypatch.setattr(sys, "stdout", None)
    assert cli.main(["placement", "export", "--url", "http://127.0.0.1:9", "--token", "admin"]) == 1
    assert capsys.readouterr().err == "billeting: error: standard output is closed: give --output FILE\n"


def test_url_and_token_are_required(capsys, monkeypatch):
    monkeypatch.delenv("OS_TOKEN", raising=False)
    monkeypatch.delenv("BILLETING_PLACEMENT_URL", raising=False)
    assert cli.main(["placement", "export", "--token", "admin"]) == 1
    assert "--url (or BILLETING_PLACEMENT_URL) is required" in capsys.readouterr().err
    assert cli.main(["placement", "export", "--url", "http://127.0.0.1:9"]) == 1
    assert "--token (or OS_TOKEN) is required" in capsys.readouterr().err


def test_progress_bars_show_on_a_terminal(source, tmp_path):
    url, _ = source
    controller, terminal = pty.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "billeting.cli", "placement", "export", "--url", url,
                                 "--token", "admin", "-o", str(tmp_path / "fleet.json")],
                                stderr=terminal, stdout=subprocess.DEVNULL, timeout=120,
                                env={**os.environ, "COLUMNS": "100", "TERM": "xterm"})
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    assert result.returncode == 0
    text = shown.decode(errors="replace")
    assert "providers" in text and "5/5" in text and "consumers" in text and "3/3" in text
    # Without a terminal, nothing but the summary line.
    quiet = subprocess.run([sys.executable, "-m", "billeting.cli", "placement", "export", "--url", url,
                            "--token", "admin", "-o", str(tmp_path / "quiet.json")],
                           capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr.strip().startswith("exported 5 providers")
    assert len(quiet.stderr.strip().splitlines()) == 1
