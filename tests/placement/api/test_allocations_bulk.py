"""POST /allocations: many consumers in one transaction
(docs/design/placement-endpoints.md#post-allocations)."""
from __future__ import annotations

import pytest
from sqlalchemy import event

from tests.placement.api.test_allocations import generation_of, new_uuid, set_inventory, usages_of


def entry(mv: str, allocations: dict, *, generation=None, project="p", user="u",
          consumer_type="INSTANCE") -> dict:
    major, minor = (int(p) for p in mv.split("."))
    body = {"allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": project, "user_id": user}
    if (major, minor) >= (1, 28):
        body["consumer_generation"] = generation
    if (major, minor) >= (1, 38):
        body["consumer_type"] = consumer_type
    return body


def allocations_of(client, consumer: str) -> dict:
    return client.get(f"/allocations/{consumer}", mv="1.38").json


@pytest.fixture
def two_hosts(client, create_provider):
    src, dst = create_provider("src")["uuid"], create_provider("dst")["uuid"]
    set_inventory(client, src, {"VCPU": 4, "MEMORY_MB": 1024})
    set_inventory(client, dst, {"VCPU": 4, "MEMORY_MB": 1024})
    return src, dst


def test_version_gate_and_methods(client, two_hosts):
    src, _ = two_hosts
    body = {new_uuid(): entry("1.13", {src: {"VCPU": 1}})}
    resp = client.post("/allocations", json=body, mv="1.12")
    assert resp.status == 404
    resp = client.get("/allocations")
    assert resp.status == 405
    assert resp.headers["allow"] == "POST"
    assert client.post("/allocations", json=body, mv="1.13").status == 204


def test_many_consumers_at_1_13(client, two_hosts):
    src, dst = two_hosts
    a, b = new_uuid(), new_uuid()
    resp = client.post("/allocations", mv="1.13", json={
        a: entry("1.13", {src: {"VCPU": 1}, dst: {"MEMORY_MB": 256}}, project="pa"),
        b: entry("1.13", {dst: {"VCPU": 2}}, user="ub")})
    assert resp.status == 204 and resp.text == ""
    got_a = client.get(f"/allocations/{a}", mv="1.12").json
    assert got_a["allocations"][src]["resources"] == {"VCPU": 1}
    assert got_a["allocations"][dst]["resources"] == {"MEMORY_MB": 256}
    assert (got_a["project_id"], got_a["user_id"]) == ("pa", "u")
    assert client.get(f"/allocations/{b}", mv="1.12").json["user_id"] == "ub"


def test_migration_move_and_confirm(client, two_hosts):
    """Nova's migration swap (docs/design/moves.md#the-consumer-swap), at 1.38."""
    src, dst = two_hosts
    instance, migration = new_uuid(), new_uuid()
    assert client.post("/allocations", mv="1.38", json={
        instance: entry("1.38", {src: {"VCPU": 4}})}).status == 204
    assert allocations_of(client, instance)["consumer_generation"] == 1
    src_gen, dst_gen = generation_of(client, src), generation_of(client, dst)

    # SRC is full (4 of 4): the move only fits because the instance's own
    # source allocations are discarded before capacity is checked.
    resp = client.post("/allocations", mv="1.38", json={
        migration: entry("1.38", {src: {"VCPU": 4}}, generation=None, consumer_type="MIGRATION"),
        instance: entry("1.38", {dst: {"VCPU": 4}}, generation=1, consumer_type="INSTANCE")})
    assert resp.status == 204
    got_i, got_m = allocations_of(client, instance), allocations_of(client, migration)
    assert got_i["consumer_generation"] == 2 and got_m["consumer_generation"] == 1
    assert got_i["allocations"] == {dst: {"generation": dst_gen + 1, "resources": {"VCPU": 4}}}
    assert got_m["allocations"] == {src: {"generation": src_gen + 1, "resources": {"VCPU": 4}}}
    assert got_m["consumer_type"] == "MIGRATION"
    assert (generation_of(client, src), generation_of(client, dst)) == (src_gen + 1, dst_gen + 1)

    # Confirm: clear the migration consumer; SRC (which held it) is bumped.
    resp = client.post("/allocations", mv="1.38", json={
        migration: {"allocations": {}, "project_id": "p", "user_id": "u",
                    "consumer_generation": 1, "consumer_type": "MIGRATION"}})
    assert resp.status == 204
    assert allocations_of(client, migration) == {"allocations": {}}
    assert allocations_of(client, instance)["consumer_generation"] == 2
    assert (generation_of(client, src), generation_of(client, dst)) == (src_gen + 2, dst_gen + 1)
    assert usages_of(client, src) == {}


def test_all_or_nothing(client, two_hosts):
    src, dst = two_hosts
    fine, greedy = new_uuid(), new_uuid()
    before = generation_of(client, src)
    resp = client.post("/allocations", mv="1.28", json={
        fine: entry("1.28", {src: {"VCPU": 1}}),
        greedy: entry("1.28", {dst: {"VCPU": 5}})})
    assert resp.status == 409
    assert resp.error["detail"] == (
        f"Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource "
        f"provider '{dst}'. The requested amount would exceed the capacity.")
    assert allocations_of(client, fine) == {"allocations": {}}
    assert generation_of(client, src) == before
    # The consumer that would have been created does not linger.
    assert client.post("/allocations", mv="1.28", json={
        fine: entry("1.28", {src: {"VCPU": 1}})}).status == 204


def test_consumers_in_one_request_add_up_on_a_pair(client, two_hosts):
    src, _ = two_hosts
    resp = client.post("/allocations", mv="1.13", json={
        new_uuid(): entry("1.13", {src: {"VCPU": 3}}),
        new_uuid(): entry("1.13", {src: {"VCPU": 2}})})
    assert resp.status == 409
    assert "would exceed the capacity" in resp.error["detail"]
    assert usages_of(client, src) == {}


def test_generation_conflict_on_one_consumer_rolls_back_all(client, two_hosts):
    src, dst = two_hosts
    known = new_uuid()
    client.post("/allocations", mv="1.28", json={known: entry("1.28", {src: {"VCPU": 1}})})
    newcomer = new_uuid()
    resp = client.post("/allocations", mv="1.28", json={
        newcomer: entry("1.28", {dst: {"VCPU": 1}}),
        known: entry("1.28", {src: {"VCPU": 2}}, generation=7)})
    assert resp.status == 409
    assert resp.error["code"] == "placement.concurrent_update"
    assert "consumer generation conflict - expected 1 but got 7" in resp.error["detail"]
    assert allocations_of(client, newcomer) == {"allocations": {}}
    assert allocations_of(client, known)["allocations"][src]["resources"] == {"VCPU": 1}


def test_required_fields_per_microversion(client, two_hosts):
    src, _ = two_hosts
    consumer = new_uuid()
    base = entry("1.13", {src: {"VCPU": 1}})
    resp = client.post("/allocations", mv="1.27", json={consumer: {**base, "consumer_generation": None}})
    assert resp.status == 400
    resp = client.post("/allocations", mv="1.28", json={consumer: base})
    assert resp.status == 400
    assert "'consumer_generation' is a required property" in resp.error["detail"]
    with_gen = {**base, "consumer_generation": None}
    resp = client.post("/allocations", mv="1.33", json={consumer: {**with_gen, "mappings": {"": [src]}}})
    assert resp.status == 400
    resp = client.post("/allocations", mv="1.38", json={consumer: {**with_gen, "mappings": {"": [src]}}})
    assert resp.status == 400
    assert "'consumer_type' is a required property" in resp.error["detail"]
    resp = client.post("/allocations", mv="1.37", json={consumer: {**with_gen, "consumer_type": "X"}})
    assert resp.status == 400
    resp = client.post("/allocations", mv="1.34", json={consumer: {**with_gen, "mappings": {"": [src]}}})
    assert resp.status == 204
    assert allocations_of(client, consumer)["consumer_type"] == "unknown"


def test_empty_set_for_unknown_consumer_leaves_nothing(client, two_hosts):
    src, _ = two_hosts
    consumer = new_uuid()
    before = generation_of(client, src)
    resp = client.post("/allocations", mv="1.13", json={consumer: entry("1.13", {})})
    assert resp.status == 204
    assert allocations_of(client, consumer) == {"allocations": {}}
    assert generation_of(client, src) == before
    # No orphan record (quirk docs/design/placement-quirks.md#q1 not reproduced): null is right afterwards.
    assert client.post("/allocations", mv="1.28", json={
        consumer: entry("1.28", {src: {"VCPU": 1}})}).status == 204


def test_unknown_resource_class_wording(client, two_hosts):
    src, _ = two_hosts
    resp = client.post("/allocations", mv="1.13", json={
        new_uuid(): entry("1.13", {src: {"CUSTOM_MISSING": 1}})})
    assert resp.status == 400
    assert resp.error["detail"] == "Unable to allocate inventory No such resource class CUSTOM_MISSING."


def test_unknown_provider_and_missing_inventory(client, two_hosts):
    src, _ = two_hosts
    missing = new_uuid()
    resp = client.post("/allocations", mv="1.13", json={new_uuid(): entry("1.13", {missing: {"VCPU": 1}})})
    assert resp.status == 400
    assert resp.error["detail"] == f"Allocation for resource provider '{missing}' that does not exist."
    resp = client.post("/allocations", mv="1.13", json={new_uuid(): entry("1.13", {src: {"DISK_GB": 1}})})
    assert resp.status == 409
    assert resp.error["detail"] == (
        f"Unable to allocate inventory: Inventory for 'DISK_GB' on resource provider '{src}' invalid.")


@pytest.mark.parametrize("make", [
    lambda rp: {},
    lambda rp: [],
    lambda rp: {"not-a-consumer-uuid": entry("1.13", {rp: {"VCPU": 1}})},
    lambda rp: {new_uuid(): {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p"}},
    lambda rp: {new_uuid(): {"project_id": "p", "user_id": "u"}},
    lambda rp: {new_uuid(): {**entry("1.13", {rp: {"VCPU": 0}})}},
    lambda rp: {new_uuid(): {**entry("1.13", {rp: {"VCPU": -2}})}},
    lambda rp: {new_uuid(): {**entry("1.13", {rp: {"VCPU": "2"}})}},
    lambda rp: {new_uuid(): {**entry("1.13", {rp: {}})}},
    lambda rp: {new_uuid(): {**entry("1.13", {"zz": {"VCPU": 1}})}},
    lambda rp: {new_uuid(): {**entry("1.13", {rp: {"VCPU": 1}}), "extra": 1}},
    lambda rp: {new_uuid(): {**entry("1.13", {rp: {"VCPU": 1}}), "allocations": [
        {"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}]}},
    lambda rp: {new_uuid(): None},
])
def test_bad_bodies(client, two_hosts, make):
    src, _ = two_hosts
    resp = client.post("/allocations", mv="1.13", json=make(src))
    assert resp.status == 400, resp
    assert resp.error["detail"].startswith("JSON does not validate: ")
    assert usages_of(client, src) == {}


def test_media_type_and_policy(client, two_hosts):
    src, _ = two_hosts
    body = {new_uuid(): entry("1.13", {src: {"VCPU": 1}})}
    resp = client.post("/allocations", body=b"{}", mv="1.13", content_type="text/plain")
    assert resp.status == 415
    resp = client.post("/allocations", body=b"{nope", mv="1.13", content_type="application/json")
    assert resp.status == 400
    assert resp.error["detail"].startswith("Malformed JSON")
    resp = client.post("/allocations", json=body, mv="1.13", token="user")
    assert resp.status == 403
    assert resp.error["detail"] == "Policy does not allow placement:allocations:manage to be performed."
    resp = client.post("/allocations", json=body, mv="1.13", token="nova", headers={"X-Roles": "service"})
    assert resp.status == 204


def test_consumer_key_with_trailing_newline(client, two_hosts):
    src, _ = two_hosts
    resp = client.post("/allocations", mv="1.38", json={
        "0" * 36 + "\n": entry("1.38", {src: {"VCPU": 1}})})
    assert resp.status == 400
    assert resp.error["detail"].startswith("JSON does not validate: ")
    assert usages_of(client, src) == {}


def test_an_owner_is_looked_up_once_however_many_consumers_it_creates(client, two_hosts, engine):
    # A scheduler claims a batch of instances of one project in one POST:
    # one lookup (or creation) of the project and user, not one per consumer.
    src, dst = two_hosts
    lookups = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if "UNION ALL" in statement.upper() and "projects" in statement:
            lookups.append(statement)

    body = {new_uuid(): entry("1.38", {src: {"VCPU": 1}}, project="batch-p", user="batch-u") for _ in range(3)}
    other = new_uuid()
    body[other] = entry("1.38", {dst: {"VCPU": 1}}, project="batch-q", user="batch-u")
    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert client.post("/allocations", json=body, mv="1.38").status == 204
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(lookups) == 2  # two owners
    for consumer in body:
        got = allocations_of(client, consumer)
        assert (got["project_id"], got["user_id"]) == (("batch-q" if consumer == other else "batch-p"), "batch-u")
        assert got["consumer_type"] == "INSTANCE"


def test_a_batch_of_new_consumers_costs_one_insert_and_one_bump_statement(client, two_hosts, engine):
    # The scheduler's batch claims: however many consumers and providers,
    # their consumers go in with one INSERT and the providers' generations
    # move with one (executemany) UPDATE
    src, dst = two_hosts
    sent = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        sent.append(" ".join(statement.split()[:4]).upper().replace("IGNORE ", ""))

    body = {new_uuid(): entry("1.38", {host: {"VCPU": 1}}) for host in (src, dst, src, dst, src)}
    before = {host: generation_of(client, host) for host in (src, dst)}
    used = {host: client.get(f"/resource_providers/{host}/usages").json["usages"].get("VCPU", 0)
            for host in (src, dst)}
    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert client.post("/allocations", json=body, mv="1.38").status == 204
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert sum(s.startswith("INSERT INTO CONSUMERS") for s in sent) == 1
    # (and their stock, placement/stock.py, with one more, after the usage)
    assert sum(s.startswith("UPDATE RESOURCE_PROVIDERS SET GENERATION") for s in sent) == 1
    assert sum(s.startswith("UPDATE RESOURCE_PROVIDERS SET STOCK") for s in sent) == 1
    assert {host: generation_of(client, host) for host in (src, dst)} == {h: g + 1 for h, g in before.items()}
    for consumer in body:
        assert allocations_of(client, consumer)["consumer_generation"] == 1
    assert {host: client.get(f"/resource_providers/{host}/usages").json["usages"]["VCPU"]
            for host in (src, dst)} == {src: used[src] + 3, dst: used[dst] + 2}


def test_creating_consumers_of_which_one_exists_asks_for_a_rerun(client, two_hosts, engine):
    # What a writer that lost a creation race sees: the whole unit of work
    # is re-run (and then meets the consumer's generation rules).
    from billeting.placement import consumers
    from billeting.placement.store.tx import Retry

    src, _ = two_hosts
    taken = new_uuid()
    assert client.post("/allocations", mv="1.28", json={taken: entry("1.28", {src: {"VCPU": 1}})}).status == 204
    fresh = sorted([new_uuid(), new_uuid()])
    owner = consumers.Owner("p", "u", None)
    with engine.connect() as conn:
        with pytest.raises(Retry):
            with conn.begin():
                consumers.create_many(conn, [(fresh[0], owner), (taken, owner), (fresh[1], owner)], generation=1)
        with conn.begin():
            made = consumers.create_many(conn, [(u, owner) for u in fresh], generation=1)
            assert consumers.get_many(conn, fresh) == made
