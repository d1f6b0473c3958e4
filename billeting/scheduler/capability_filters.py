"""What the host's hypervisor is and can run, against what the flavor and
the image ask for: the two filters besides ComputeFilter that Nova runs by
default (docs/design/filters-and-weighers.md#filters), on by default here too.

* ``ComputeCapabilitiesFilter`` — every flavor extra spec
  ``capabilities:<a>:<b>...`` names a path into the host's capabilities
  (``hypervisor_type``, ``hypervisor_version``, ``cpu_info``,
  ``supported_instances``, ``stats``; a first name that is none of these,
  or that the host did not report, is looked up in its ``stats``; a value
  that is JSON text is parsed before the path walks into it). ``str(value)`` must meet the spec's value under the
  extra-spec operators (``billeting.scheduler.extra_specs``); a path that
  finds nothing fails the host. An unscoped key (no ``:``) is checked the
  same way when it names one of those attributes or one of the host's
  stats, and is left alone otherwise; other scopes (``hw:``, ``trait:``,
  ``resources:``, ``aggregate_instance_extra_specs:``...) belong to others,
  except ``hw:maxphysaddr_bits=N``: the host's ``cpu_info.maxphysaddr.bits``
  must be at least N when the host reports it.
* ``ImagePropertiesFilter`` — the image's ``hw_architecture`` (else
  ``[filter_scheduler] image_properties_default_architecture``),
  ``img_hv_type`` and ``hw_vm_mode`` must match one of the host's
  ``supported_instances`` triples (a property the image leaves out matches
  anything; a host that reports no triple takes only images that name none
  of the three); ``img_hv_requested_version`` (``>=6.0``, ``>=6.0,<7``:
  Nova's operators ``<``, ``<=``, ``==``, ``!=``, ``>``, ``>=``, a bare
  version meaning ``==``) must hold for the host's hypervisor version, and
  ``hw_maxphysaddr_bits`` must not exceed the host's bits; each of the last
  two only when the host reports the figure, as Nova does. Unlike Nova, the
  version and the bits are checked even when the image names none of the
  three, so an image asking only for a version does not land on an older
  hypervisor.

Both read nothing but the host record and the request, so they run for a
request's first instance only. What a request asks is parsed once per
request (``Decision.memo``), not once per host; per host, the capabilities
filter walks one short path per spec (cost 3: several lookups, a JSON parse
where a stat holds JSON text) and the image filter scans the host's few
triples (cost 2). A host that reports no capabilities passes both as long
as the request asks for none.
"""
from __future__ import annotations

import functools
import json
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from billeting.scheduler.catalog import HostRecord
from billeting.scheduler.extra_specs import matches
from billeting.scheduler.filter_base import Filter

SCOPE = "capabilities"
# The host record's capability attributes a path may start with.
# (``stats`` itself too, so ``capabilities:stats:<name>`` reads a stat as Nova's does.)
ATTRIBUTES = frozenset({"hypervisor_type", "hypervisor_version", "cpu_info", "supported_instances", "stats"})
MAXPHYSADDR_SPEC = "hw:maxphysaddr_bits"
MAXPHYSADDR_PATH = ("cpu_info", "maxphysaddr", "bits")


# --- the host's side --------------------------------------------------------------------

def capability(record: HostRecord, path: Sequence[str]) -> Any:
    """The host's value at ``path`` (names of a ``capabilities:`` key after
    the scope), or None when the host has none there."""
    first = path[0]
    value = getattr(record, first) if first in ATTRIBUTES else None
    if value is None or value == ():
        value = record.stats.get(first)
    for name in path[1:]:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def maxphysaddr_bits(record: HostRecord) -> int | None:
    """The host's physical address bits, when it reports them."""
    found = capability(record, MAXPHYSADDR_PATH)
    if isinstance(found, bool):
        return None
    try:
        return int(found) if found is not None else None
    except (TypeError, ValueError):
        return None


def enough_bits(record: HostRecord, wanted: int | None) -> bool:
    """The host has at least ``wanted`` physical address bits, or does not
    say (Nova passes a host that reports none)."""
    if wanted is None:
        return True
    bits = maxphysaddr_bits(record)
    return bits is None or bits >= wanted


def _positive(text: str | None) -> int | None:
    """A count of bits as a flavor or image writes it; None when it is not one."""
    text = (text or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


# --- ComputeCapabilitiesFilter ----------------------------------------------------------

class CapabilitySpecs(NamedTuple):
    """What a flavor asks of the host's capabilities."""

    # (path, requirement): every host must have a value there that meets it.
    always: tuple[tuple[tuple[str, ...], str], ...]
    # (stat name, requirement): checked on the hosts that have that stat.
    if_stat: tuple[tuple[str, str], ...]
    maxphysaddr_bits: int | None


def capability_specs(extra_specs: dict[str, str]) -> CapabilitySpecs:
    always, if_stat = [], []
    for key, requirement in sorted(extra_specs.items()):
        if ":" not in key:
            if key in ATTRIBUTES:
                always.append(((key,), requirement))
            else:
                if_stat.append((key, requirement))
            continue
        scope, _, rest = key.partition(":")
        if scope == SCOPE:
            always.append((tuple(rest.split(":")), requirement))
    bits = _positive(extra_specs.get(MAXPHYSADDR_SPEC))
    return CapabilitySpecs(tuple(always), tuple(if_stat), bits)


class ComputeCapabilitiesFilter(Filter):
    """Flavor extra specs ``capabilities:<path>`` (and unscoped keys naming
    a capability attribute or stat) against the host's capabilities."""

    name = "ComputeCapabilitiesFilter"
    cost = 3
    once_per_request = True
    explains = "lacked the capabilities the flavor's extra specs ask for"

    def _specs(self, decision) -> CapabilitySpecs:
        return decision.memoized(self.name, lambda: capability_specs(decision.request.extra_specs))

    def active(self, decision):
        specs = self._specs(decision)
        return bool(specs.always or specs.if_stat or specs.maxphysaddr_bits is not None)

    def passes(self, host, decision):
        specs = self._specs(decision)
        record = host.record
        for path, requirement in specs.always:
            value = capability(record, path)
            if value is None or not matches(str(value), requirement):
                return False
        if specs.if_stat:
            stats = record.stats
            for key, requirement in specs.if_stat:
                if key in stats and not matches(str(stats[key]), requirement):
                    return False
        return enough_bits(record, specs.maxphysaddr_bits)


# --- ImagePropertiesFilter --------------------------------------------------------------

# Other spellings of the same thing (the names as images and old drivers wrote them).
_ALIASES: tuple[dict[str, str], ...] = (
    {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "i386": "i686", "i486": "i686", "i586": "i686",
     "x86_32": "i686"},                                      # architecture
    {"xapi": "xen"},                                         # hypervisor type
    {"pv": "xen", "hv": "hvm", "baremetal": "hvm"},          # vm mode
)
ARCH, HV_TYPE, VM_MODE = range(3)


@functools.lru_cache(maxsize=1024)
def canonical(kind: int, name: str) -> str:
    low = name.strip().lower()
    return _ALIASES[kind].get(low, low)


_CLAUSE = re.compile(r"^\s*(<=|>=|==|!=|<|>)?\s*(\d+(?:\.\d+)*)\s*$")
_VERSION_OPS: dict[str | None, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
    ">=": operator.ge, None: operator.eq}

Version = tuple[int, ...]


def version_of(encoded: int) -> Version:
    """Nova's integer encoding of a version, three decimal digits a part:
    6002000 is 6.2.0, 1000 is 1.0."""
    parts: list[int] = []
    while encoded > 0:
        encoded, part = divmod(encoded, 1000)
        parts.insert(0, part)
    return tuple(parts)


def _padded(a: Version, b: Version) -> tuple[Version, Version]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def version_predicate(text: str) -> Callable[[Version], bool]:
    """``img_hv_requested_version`` as a test of a version: comma-separated
    clauses, each an operator and a version, all of which must hold. Text
    that is not such a list is met by no version."""
    clauses = []
    for part in text.split(","):
        found = _CLAUSE.match(part)
        if found is None:
            return lambda version: False
        clauses.append((_VERSION_OPS[found.group(1)], tuple(int(n) for n in found.group(2).split("."))))

    def holds(version: Version) -> bool:
        return all(op(*_padded(version, wanted)) for op, wanted in clauses)

    return holds


class ImageWants(NamedTuple):
    """What an image asks of the host (None: nothing)."""

    instance: tuple[str | None, str | None, str | None]  # canonical architecture, hypervisor type, vm mode
    version: Callable[[Version], bool] | None
    maxphysaddr_bits: int | None

    @property
    def anything(self) -> bool:
        return any(self.instance) or self.version is not None or self.maxphysaddr_bits is not None


def image_wants(properties: dict[str, str], default_architecture: str | None) -> ImageWants:
    def named(kind: int, key: str, default: str | None = None) -> str | None:
        value = (properties.get(key) or "").strip() or default
        return canonical(kind, value) if value else None

    version = (properties.get("img_hv_requested_version") or "").strip()
    return ImageWants(
        instance=(named(ARCH, "hw_architecture", default_architecture), named(HV_TYPE, "img_hv_type"),
                  named(VM_MODE, "hw_vm_mode")),
        version=version_predicate(version) if version else None,
        maxphysaddr_bits=_positive(properties.get("hw_maxphysaddr_bits")))


def supports(supported_instances, wanted: tuple[str | None, str | None, str | None]) -> bool:
    """Does one of the host's triples give what the image names?"""
    for triple in supported_instances:
        if all(want is None or want == canonical(kind, have)
               for kind, (want, have) in enumerate(zip(wanted, triple))):
            return True
    return False


class ImagePropertiesFilter(Filter):
    """The image's architecture, hypervisor type, vm mode, hypervisor version
    and physical address bits against what the host can run."""

    name = "ImagePropertiesFilter"
    cost = 2
    once_per_request = True
    explains = "could not run the image (architecture, hypervisor type, vm mode or hypervisor version)"

    def _wants(self, decision) -> ImageWants:
        return decision.memoized(self.name, lambda: image_wants(
            decision.request.image_properties, decision.settings.image_properties_default_architecture))

    def active(self, decision):
        return self._wants(decision).anything

    def passes(self, host, decision):
        wants = self._wants(decision)
        record = host.record
        if any(wants.instance) and not supports(record.supported_instances, wants.instance):
            return False
        if wants.version is not None and record.hypervisor_version:
            if not wants.version(version_of(record.hypervisor_version)):
                return False
        return enough_bits(record, wants.maxphysaddr_bits)
