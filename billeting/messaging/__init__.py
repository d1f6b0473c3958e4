"""Messaging between Billeting's services (kombu): see ``bus``."""
from billeting.messaging.bus import Bus, BusUnavailable, CallTimeout, HandlerError, RemoteError, space_of

__all__ = ["Bus", "BusUnavailable", "CallTimeout", "HandlerError", "RemoteError", "space_of"]
