"""Topology domains through the service operations, checked in Placement."""
from __future__ import annotations

import pytest

from billeting.scheduler import errors
from billeting.scheduler.service import topology


@pytest.fixture
def six_hosts(fleet):
    for i in range(1, 7):
        fleet.add(f"h{i}")
    return fleet


def test_a_rack_from_hosts_is_an_aggregate_of_those_hosts_in_placement(service, six_hosts):
    view, created = topology.define(service, "rack", "r1", hosts=["h1", "h2"])
    assert created and view.hosts == ["h1", "h2"] and view.parent is None
    assert six_hosts.aggregates("h1") == {view.aggregate} == six_hosts.aggregates("h2")
    assert six_hosts.aggregates("h3") == set()
    assert service.directory.domain("rack", "r1").aggregate == view.aggregate


def test_a_row_from_racks_gets_every_host_of_its_racks(service, six_hosts):
    r1, _ = topology.define(service, "rack", "r1", hosts=["h1", "h2"])
    r2, _ = topology.define(service, "rack", "r2", hosts=["h3"])
    w1, _ = topology.define(service, "row", "w1", members=["r1", "r2"])
    assert w1.hosts == ["h1", "h2", "h3"] and w1.members == ["r1", "r2"]
    assert six_hosts.aggregates("h1") == {r1.aggregate, w1.aggregate}
    assert six_hosts.aggregates("h3") == {r2.aggregate, w1.aggregate}
    assert topology.show(service, "rack", "r1").parent == "w1"
    # A rack that grows brings its new host into the row too.
    topology.define(service, "rack", "r2", hosts=["h3", "h4"])
    assert six_hosts.aggregates("h4") == {r2.aggregate, w1.aggregate}
    # A row redefined without a rack loses that rack's hosts.
    topology.define(service, "row", "w1", members=["r2"])
    assert six_hosts.aggregates("h1") == {r1.aggregate}
    assert topology.show(service, "rack", "r1").parent is None


def test_aggregates_set_by_others_are_kept(service, six_hosts, placement):
    other = "11111111-2222-3333-4444-555555555555"
    current = placement.get_aggregates(six_hosts.uuids["h1"])
    assert placement.put_aggregates(six_hosts.uuids["h1"], [other], current.resource_provider_generation).ok
    r1, _ = topology.define(service, "rack", "r1", hosts=["h1"])
    assert six_hosts.aggregates("h1") == {other, r1.aggregate}
    topology.remove(service, "rack", "r1")
    assert six_hosts.aggregates("h1") == {other}


def test_remove_empties_the_aggregate_and_refuses_a_held_domain(service, six_hosts):
    r1, _ = topology.define(service, "rack", "r1", hosts=["h1"])
    topology.define(service, "row", "w1", members=["r1"])
    with pytest.raises(errors.Conflict, match="member of the row w1"):
        topology.remove(service, "rack", "r1")
    topology.remove(service, "row", "w1")
    assert six_hosts.aggregates("h1") == {r1.aggregate}
    topology.remove(service, "rack", "r1")
    assert six_hosts.aggregates("h1") == set()
    assert topology.list_domains(service).domains == []


@pytest.mark.parametrize("call, kind, text", [
    (lambda s: topology.define(s, "shelf", "x", hosts=["h1"]), errors.NotFound, "unknown topology level"),
    (lambda s: topology.define(s, "rack", "x", hosts=["nope"]), errors.InvalidRequest, "unknown host nope"),
    (lambda s: topology.define(s, "row", "x", hosts=["h1"]), errors.InvalidRequest, "defined from members"),
    (lambda s: topology.define(s, "rack", "x", members=["r1"]), errors.InvalidRequest, "narrowest level"),
    (lambda s: topology.define(s, "row", "x", members=["nope"]), errors.InvalidRequest, "no rack named"),
    (lambda s: topology.define(s, "rack", "bad name", hosts=["h1"]), errors.InvalidRequest, "invalid rack name"),
])
def test_bad_definitions_are_refused_with_a_reason(service, six_hosts, call, kind, text):
    with pytest.raises(kind, match=text):
        call(service)


def test_clashes(service, six_hosts):
    topology.define(service, "rack", "r1", hosts=["h1"])
    topology.define(service, "rack", "r2", hosts=["h2"])
    topology.define(service, "row", "w1", members=["r1"])
    with pytest.raises(errors.Conflict, match="h1 is already in the rack r1"):
        topology.define(service, "rack", "r3", hosts=["h1"])
    with pytest.raises(errors.Conflict, match="taken by the rack r1"):
        topology.define(service, "row", "r1", members=["r2"])
    with pytest.raises(errors.InvalidRequest, match="w1 is a row, not a rack"):
        topology.define(service, "row", "w2", members=["w1"])
    with pytest.raises(errors.Conflict, match="already in the row w1"):
        topology.define(service, "row", "w2", members=["r1"])


def test_cells_take_hosts_or_the_widest_level(service, six_hosts):
    c1, _ = topology.define(service, "cell", "c1", hosts=["h1", "h2"])
    assert six_hosts.aggregates("h1") == {c1.aggregate}
    rec = service.catalog.by_name("h1")[0]
    assert rec.cell_uuid == "c1"
    topology.define(service, "rack", "r1", hosts=["h3"])
    topology.define(service, "row", "w1", members=["r1"])
    topology.define(service, "room", "m1", members=["w1"])
    c2, _ = topology.define(service, "cell", "c2", members=["m1"])
    assert c2.hosts == ["h3"]
