"""Compute microversions: ``OpenStack-API-Version: compute 2.X`` or
``X-OpenStack-Nova-API-Version: 2.X``; none means 2.1, ``latest`` the maximum."""
from __future__ import annotations

import re
from typing import NamedTuple

from billeting.api.compute.errors import NovaError

MIN = (2, 1)
MAX = (2, 91)  # 2.91: unshelve to a host, or out of a zone
_FORMAT = re.compile(r"^([1-9]\d*)\.([1-9]\d*|0)$")


class Version(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def at_least(self, minor: int) -> bool:
        return (self.major, self.minor) >= (2, minor)


def text(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def negotiate(headers: dict[str, str]) -> Version:
    """``headers``: lower-cased names."""
    raw = None
    modern = headers.get("openstack-api-version")
    if modern:
        for part in modern.split(","):
            service, _, value = part.strip().partition(" ")
            if service.strip().lower() == "compute":
                raw = value.strip()
    if raw is None:
        raw = headers.get("x-openstack-nova-api-version")
    if raw is None or raw == "":
        return Version(*MIN)
    if raw.lower() == "latest":
        return Version(*MAX)
    match = _FORMAT.match(raw)
    if not match:
        raise NovaError(400, f"API Version String {raw} is of invalid format. Must be of format "
                             f"MajorNum.MinorNum.")
    wanted = (int(match.group(1)), int(match.group(2)))
    if not MIN <= wanted <= MAX:
        raise NovaError(406, f"Version {raw} is not supported by the API. Minimum is {text(MIN)} and "
                             f"maximum is {text(MAX)}.")
    return Version(*wanted)
