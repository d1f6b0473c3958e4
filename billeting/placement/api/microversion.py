"""Microversion negotiation (spec 2.3)."""
from __future__ import annotations

MIN_VERSION = (1, 0)
MAX_VERSION = (1, 39)
SERVICE = "placement"
HEADER = "OpenStack-API-Version"


class BadVersion(Exception):
    """The header's version token is not of the form X.Y (400)."""


class UnacceptableVersion(Exception):
    """A well-formed version outside the supported range (406)."""


def to_str(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def parse_header(value: str | None) -> tuple[int, int]:
    """Return the negotiated version for an ``OpenStack-API-Version`` header value."""
    if not value:
        return MIN_VERSION
    token = None
    found = False
    for entry in value.split(","):
        parts = entry.strip().split()
        if parts and parts[0].lower() == SERVICE:
            found = True
            token = parts[1] if len(parts) > 1 else None
    if not found or token is None:
        return MIN_VERSION
    if token == "latest":
        return MAX_VERSION
    pieces = token.split(".")
    try:
        if len(pieces) != 2:
            raise ValueError
        version = (int(pieces[0]), int(pieces[1]))
    except ValueError:
        raise BadVersion(f"Invalid microversion: invalid version string: {token}") from None
    if not (MIN_VERSION <= version <= MAX_VERSION) or version[0] != 1:
        raise UnacceptableVersion(f"Invalid microversion: Unacceptable version header: {token}")
    return version
