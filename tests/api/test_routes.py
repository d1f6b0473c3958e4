"""Every route of the spec's table (2.1) has its handler module."""
from billeting.placement.api.routes import load_routes


def test_every_route_is_served():
    _routes, missing = load_routes()
    assert missing == []
