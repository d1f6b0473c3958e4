"""One Placement client for every Billeting component that talks to Placement
(scheduler, conductors, computes, tools): typed calls, HTTP to any
Placement-compatible URL or Billeting's Placement in this process, and the
claim rules (claim, un-claim, move) written once in ``claims``."""
from billeting.placement_client.client import (
    Auth,
    KeystoneAuth,
    PlacementClient,
    PlacementError,
    PlacementUnavailable,
)
from billeting.placement_client.transport import HttpTransport, WsgiTransport


def http_client(url: str, *, token: str = "admin", timeout: float = 30.0) -> PlacementClient:
    """A client for the Placement at ``url`` (noauth2-style token by default)."""
    return PlacementClient(HttpTransport(url, timeout=timeout), auth=Auth(token))


__all__ = ["Auth", "KeystoneAuth", "PlacementClient", "PlacementError", "PlacementUnavailable",
           "HttpTransport", "WsgiTransport", "http_client"]
