"""Microversion negotiation (docs/design/placement-http.md#microversions)."""
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


# What upstream's parser says when the token has no minor part.
_MISSING_MINOR = "Version.__new__() missing 1 required positional argument: 'minor'"


def _requested_token(value: str) -> str | None:
    """The version token of the last well-formed ``placement <token>`` entry.

    Entries are ``<service> <token>`` separated by commas; one without a
    token (``placement`` alone) is not an entry and is skipped, so an
    earlier one still counts.
    """
    for entry in reversed(value.split(",")):
        parts = entry.strip().split(None, 1)
        if len(parts) == 2 and parts[0].lower() == SERVICE:
            return parts[1].strip()
    return None


def _parse_token(token: str) -> tuple[int, int]:
    """``X.Y`` as two integers. Everything after the first dot is the minor
    part, so ``1.2.3`` and ``1.5 beta`` are errors; ``int`` decides what a
    number is (surrounding blanks are fine)."""
    pieces = token.split(".", 1)
    try:
        numbers = [int(piece) for piece in pieces]
    except ValueError as exc:
        raise BadVersion(f"Invalid microversion: invalid version string: {token}; {exc}") from None
    if len(numbers) == 1:
        raise BadVersion(f"Invalid microversion: invalid version string: {token}; {_MISSING_MINOR}")
    return numbers[0], numbers[1]


def parse_header(value: str | None) -> tuple[int, int]:
    """Return the negotiated version for an ``OpenStack-API-Version`` header value."""
    token = _requested_token(value) if value else None
    if not token:
        return MIN_VERSION
    if token == "latest":
        return MAX_VERSION
    version = _parse_token(token)
    if not (MIN_VERSION <= version <= MAX_VERSION):
        raise UnacceptableVersion(f"Invalid microversion: Unacceptable version header: {token}")
    return version
