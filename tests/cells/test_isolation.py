"""A cell cannot call up: its processes hold no handle to the API database
or the API bus, and what they send to the scheduler's topic never reaches a
scheduler served on the API bus."""
from __future__ import annotations

import gc
import threading
import types
import uuid as uuidlib

import pytest
from sqlalchemy import Engine

from billeting.cells.wiring import CellConfig, wire_cell
from billeting.cli import build_parser
from billeting.commands import compute as compute_command
from billeting.commands import conductor as conductor_command
from billeting.messaging import Bus, CallTimeout
from billeting.common.db.engine import make_engine

_OPAQUE = (types.ModuleType, type, types.BuiltinFunctionType, types.CodeType, types.FrameType,
           types.MethodWrapperType, types.WrapperDescriptorType, types.GetSetDescriptorType,
           types.MemberDescriptorType)


def reachable(*roots) -> list[object]:
    """Every object reachable from ``roots`` through instance data: attributes,
    containers, bound methods' ``self`` and closures' cells — never through
    modules, classes or a function's globals (those reach everything)."""
    seen: set[int] = set()
    stack = list(roots)
    found = []
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, _OPAQUE):
            continue
        if isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
            continue
        if isinstance(obj, types.FunctionType):
            stack.extend(c.cell_contents for c in obj.__closure__ or () if c.cell_contents is not None)
            stack.extend(obj.__defaults__ or ())
            continue
        found.append(obj)
        stack.extend(gc.get_referents(obj))
    return found


@pytest.fixture(scope="module", params=["memory", "amqp"])
def spaces(request):
    """(API bus URL, cell bus URL): two messaging spaces on one transport
    (shared by this module's tests: making RabbitMQ vhosts is slow)."""
    if request.param == "memory":
        return (f"memory:///api-{uuidlib.uuid4().hex[:8]}", f"memory:///cell1-{uuidlib.uuid4().hex[:8]}")
    make = request.getfixturevalue("amqp_vhost_factory")
    return make(), make()


def test_a_cells_processes_hold_only_their_cell_database_and_bus(placement, cell_database_factory, spaces):
    api_bus_url, cell_bus_url = spaces
    api_engine = make_engine(cell_database_factory("api"))  # stands for the API database
    api_bus = Bus(api_bus_url)
    cell = CellConfig(name="cell1", database_url=cell_database_factory("cell1"), transport_url=cell_bus_url)
    wiring = wire_cell(cell, placement)
    # Exactly what `billeting compute` and `billeting conductor` build from their flags.
    parser = build_parser()
    computes = compute_command.build_service(
        parser.parse_args(["compute", "--host", "h1", "--host", "h2", "--cell", "cell1"]), wiring)
    conductor = conductor_command.build_conductor(parser.parse_args(["conductor", "--cell", "cell1"]), wiring)
    computes.start()
    conductor.start()
    try:
        objects = reachable(computes, conductor)
        engines = {id(o): o for o in objects if isinstance(o, Engine)}
        buses = {id(o): o for o in objects if isinstance(o, Bus)}
        assert wiring.engine in engines.values() and placement.engine in engines.values()
        assert set(engines) == {id(wiring.engine), id(placement.engine)}
        assert api_engine not in engines.values()
        assert list(buses.values()) == [wiring.bus] and wiring.bus.url == cell_bus_url
        assert api_bus not in buses.values()
        # Nor can a cell be handed the API's handles by mistake.
        with pytest.raises(ValueError, match="not its messaging space"):
            wire_cell(cell, placement, engine=wiring.engine, bus=api_bus)
        with pytest.raises(ValueError, match="not its database"):
            wire_cell(cell, placement, engine=api_engine)
    finally:
        conductor.stop()
        computes.stop()
        wiring.close()
        api_bus.close()
        api_engine.dispose()


def test_a_message_to_the_scheduler_sent_from_a_cell_never_reaches_the_api_scheduler(placement,
                                                                                    cell_database_factory,
                                                                                    spaces):
    api_bus_url, cell_bus_url = spaces
    api_bus, api_client = Bus(api_bus_url), Bus(api_bus_url)
    received: list[bytes] = []
    got = threading.Event()

    def select_destinations(payload: bytes) -> bytes:
        received.append(payload)
        got.set()
        return b"[]"

    api_bus.serve("scheduler", {"select_destinations": select_destinations})
    wiring = wire_cell(CellConfig(name="cell1", database_url=cell_database_factory("cell1"),
                                  transport_url=cell_bus_url), placement)
    try:
        wiring.bus.cast("scheduler", "select_destinations", b'{"from":"cell"}')
        with pytest.raises(CallTimeout):
            wiring.bus.call("scheduler", "select_destinations", b'{"from":"cell"}', timeout=2)
        assert received == []
        # The scheduler does listen: a caller on the API bus reaches it.
        assert api_client.call("scheduler", "select_destinations", b'{"from":"api"}', timeout=10) == b"[]"
        assert got.wait(5) and received == [b'{"from":"api"}']
    finally:
        wiring.close()
        api_client.close()
        api_bus.close()
