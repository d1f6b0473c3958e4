"""Server groups (hard and soft, per host and per failure domain), the
same/different host hints, failure-domain constraints that become member_of
clauses, and soft affinity by distance."""
from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from billeting.scheduler import DomainConstraint, Nearness, NoValidHost, ServerGroup
from billeting.scheduler.nova import Flavor, request_from_nova
from billeting.scheduler.request import ScheduleRequest
from tests.scheduler.fleet import new_uuids

SMALL = Flavor(vcpus=1, memory_mb=1024, root_gb=1)


def req(n=1, **kw) -> ScheduleRequest:
    return request_from_nova(SMALL, instance_uuids=new_uuids(n), project_id="proj", user_id="user", **kw)


def place_on(make_scheduler, fleet, host: str) -> str:
    """An instance already running on ``host``."""
    from billeting.scheduler.request import Destination

    [[sel]] = make_scheduler().select_destinations(req(destination=Destination(host=host)))
    return sel.consumer_uuid


def chosen(lines) -> list[str]:
    return [line[0].nodename for line in lines]


@pytest.fixture
def six_hosts(fleet):
    for i in range(6):
        fleet.host(f"h{i}", memory_mb=65536 - 1024 * i)  # h0 ranks best, then h1, ...
    return fleet


def test_anti_affinity_keeps_members_apart(six_hosts, make_scheduler):
    member = place_on(make_scheduler, six_hosts, "h0")
    group = ServerGroup(uuid="g1", policy="anti-affinity", members=(member,))
    lines = make_scheduler().select_destinations(req(3, server_group=group))
    assert chosen(lines) == ["h1", "h2", "h3"]


def test_anti_affinity_max_server_per_host(fleet, make_scheduler):
    fleet.host("a")
    fleet.host("b")
    group = ServerGroup(uuid="g", policy="anti-affinity", max_server_per_host=2)
    lines = make_scheduler().select_destinations(req(4, server_group=group))
    assert Counter(chosen(lines)) == {"a": 2, "b": 2}
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(req(5, server_group=group))
    assert "were removed by server group anti-affinity" in str(failed.value)


def test_affinity_follows_the_first_member(six_hosts, make_scheduler):
    member = place_on(make_scheduler, six_hosts, "h4")
    group = ServerGroup(uuid="g2", policy="affinity", members=(member,))
    assert chosen(make_scheduler().select_destinations(req(2, server_group=group))) == ["h4", "h4"]
    fresh = ServerGroup(uuid="g3", policy="affinity")
    lines = make_scheduler().select_destinations(req(3, server_group=fresh))
    assert len(set(chosen(lines))) == 1


def test_soft_policies_weigh_but_never_exclude(fleet, make_scheduler):
    fleet.host("a", memory_mb=65536)
    fleet.host("b", memory_mb=8192)
    anti = ServerGroup(uuid="s1", policy="soft-anti-affinity")
    assert sorted(chosen(make_scheduler().select_destinations(req(2, server_group=anti)))) == ["a", "b"]
    lines = make_scheduler().select_destinations(req(3, server_group=anti))
    assert set(chosen(lines)) == {"a", "b"}  # three members on two hosts: allowed
    member = place_on(make_scheduler, fleet, "b")
    soft = ServerGroup(uuid="s2", policy="soft-affinity", members=(member,))
    settings = make_scheduler().settings.with_multipliers(soft_affinity_weight_multiplier=10.0)
    assert chosen(make_scheduler(settings).select_destinations(req(server_group=soft))) == ["b"]


def test_same_and_different_host_hints(six_hosts, make_scheduler):
    x = place_on(make_scheduler, six_hosts, "h3")
    assert chosen(make_scheduler().select_destinations(req(same_host=[x]))) == ["h3"]
    assert "h3" not in chosen(make_scheduler().select_destinations(req(2, different_host=[x])))
    with pytest.raises(NoValidHost, match="not placed"):
        make_scheduler().select_destinations(req(same_host=["nowhere-instance"]))


@pytest.fixture
def racks(six_hosts):
    """rooms > rows > racks: room R holds rows w1 (racks r1, r2) and w2 (rack r3)."""
    f = six_hosts
    f.domain("room", "R", [f"h{i}" for i in range(6)])
    f.domain("row", "w1", ["h0", "h1", "h2", "h3"], parent="R")
    f.domain("row", "w2", ["h4", "h5"], parent="R")
    f.domain("rack", "r1", ["h0", "h1"], parent="w1")
    f.domain("rack", "r2", ["h2", "h3"], parent="w1")
    f.domain("rack", "r3", ["h4", "h5"], parent="w2")
    return f


def rack_of(name):
    return {"h0": "r1", "h1": "r1", "h2": "r2", "h3": "r2", "h4": "r3", "h5": "r3"}[name]


def test_anti_affinity_per_rack_goes_into_the_query_and_spreads_siblings(racks, make_scheduler, caplog):
    member = place_on(make_scheduler, racks, "h0")
    group = ServerGroup(uuid="gr", policy="anti-affinity", scope="rack", members=(member,))
    sched = make_scheduler()
    caplog.set_level("DEBUG")
    lines = sched.select_destinations(req(2, server_group=group))
    assert sorted(rack_of(h) for h in chosen(lines)) == ["r2", "r3"]
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(req(3, server_group=group))
    r1 = racks.directory.domain("rack", "r1").aggregate
    assert f"member_of=!in:{r1}" in failed.value.explanation.query


def test_anti_affinity_per_row(racks, make_scheduler):
    group = ServerGroup(uuid="gw", policy="anti-affinity", scope="row")
    lines = make_scheduler().select_destinations(req(2, server_group=group))
    rows = {"r1": "w1", "r2": "w1", "r3": "w2"}
    assert sorted(rows[rack_of(h)] for h in chosen(lines)) == ["w1", "w2"]
    with pytest.raises(NoValidHost):
        make_scheduler().select_destinations(req(3, server_group=group))


def test_different_row_and_same_rack_constraints(racks, make_scheduler):
    x = place_on(make_scheduler, racks, "h1")  # rack r1, row w1
    lines = make_scheduler().select_destinations(req(2, domain_constraints=[
        DomainConstraint(relation="different", level="row", instances=(x,))]))
    assert {rack_of(h) for h in chosen(lines)} == {"r3"}
    lines = make_scheduler().select_destinations(req(2, domain_constraints=[
        DomainConstraint(relation="same", level="rack", instances=(x,))]))
    assert {rack_of(h) for h in chosen(lines)} == {"r1"}


def test_no_valid_host_names_the_failure_domains_it_looked_in(racks, make_scheduler):
    x = place_on(make_scheduler, racks, "h1")  # rack r1
    too_big = request_from_nova(Flavor(vcpus=1, memory_mb=10**6), instance_uuids=new_uuids(1), project_id="proj",
                                user_id="user", domain_constraints=[
                                    DomainConstraint(relation="same", level="rack", instances=(x,))])
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(too_big)
    assert "4 were outside rack r1" in failed.value.explanation.message, failed.value.explanation.message


def test_no_valid_host_says_which_domains_the_group_has_filled(racks, make_scheduler):
    """Anti-affinity per rack with a member in every rack: Placement offers
    nothing, and the explanation names the racks and the group (not only
    "no host matched")."""
    members = tuple(place_on(make_scheduler, racks, h) for h in ("h0", "h2", "h4"))
    group = ServerGroup(uuid="gfull", policy="anti-affinity", scope="rack", members=members)
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(req(server_group=group))
    explanation = failed.value.explanation
    assert explanation.hosts_offered == 0
    assert ("6 were in rack r1, rack r2, rack r3, which each already hold 1 member of server group gfull, "
            "the most its anti-affinity per rack allows") in explanation.message, explanation.message
    assert "no host matching the whole request" not in explanation.message


def test_no_valid_host_says_which_domains_different_from_keeps_out(racks, make_scheduler):
    x, y = place_on(make_scheduler, racks, "h1"), place_on(make_scheduler, racks, "h5")  # rows w1, w2
    apart = req(domain_constraints=[DomainConstraint(relation="different", level="row", instances=(x, y))])
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(apart)
    message = failed.value.explanation.message
    assert f"6 were in row w1, row w2, where the request must not share a row with instance(s) " \
           f"{', '.join(sorted((x, y)))}" in message, message


def test_no_valid_host_counts_the_aggregates_the_caller_excluded(racks, make_scheduler):
    r1, r2 = (racks.directory.domain("rack", r).aggregate for r in ("r1", "r2"))
    asked = req()
    [base] = asked.groups
    asked = msgspec.structs.replace(asked, groups=(msgspec.structs.replace(
        base, forbidden_aggregates=frozenset({r1, r2}), resources={**base.resources, "MEMORY_MB": 70000}),))
    with pytest.raises(NoValidHost) as failed:
        make_scheduler().select_destinations(asked)
    message = failed.value.explanation.message
    assert "4 were in rack r1 or rack r2, which the request excludes" in message, message
    assert "6 had no 70,000 MB of memory free" in message, message


def test_near_widens_level_by_level_and_says_which_it_met(fleet, make_scheduler):
    for i in range(6):
        fleet.host(f"h{i}", memory_mb=2048 if i < 4 else 65536)  # racks r1, r2 are small
    fleet.domain("room", "R", [f"h{i}" for i in range(6)])
    fleet.domain("row", "w1", ["h0", "h1", "h2", "h3"], parent="R")
    fleet.domain("row", "w2", ["h4", "h5"], parent="R")
    fleet.domain("rack", "r1", ["h0", "h1"], parent="w1")
    fleet.domain("rack", "r2", ["h2", "h3"], parent="w1")
    fleet.domain("rack", "r3", ["h4", "h5"], parent="w2")
    near = Nearness(level="rack", domain="r1")
    levels = []
    for _ in range(7):
        [[sel]] = make_scheduler().select_destinations(req(near=near))
        levels.append((sel.domain_level, rack_of(sel.nodename)))
    # r1 holds 2 small instances (1 GB each on 2 GB hosts: 4), then row w1's r2 (4 more)...
    assert levels[:4] == [("rack", "r1")] * 4
    assert levels[4:7] == [("row", "r2")] * 3
