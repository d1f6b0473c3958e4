"""Every route of the route table (docs/design/placement-http.md#routes) has its handler module."""
from billeting.placement.api.routes import load_routes


def test_every_route_is_served():
    _routes, missing = load_routes()
    assert missing == []
