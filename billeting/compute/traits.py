"""The trait rules a compute applies to its providers (docs/design/compute-reporting.md#traits).

On every root provider: ``COMPUTE_NODE``, the owner trait, the capability
traits the driver supports now, and ``COMPUTE_STATUS_DISABLED`` exactly
while the service is disabled. A trait is only ever *removed* when the
compute owns it: a capability trait (all of ``CAPABILITY_TRAITS``), the
disabled trait, or a trait the driver itself reported before. Traits an
operator or another service put on the provider stay.
"""
from __future__ import annotations

from collections.abc import Iterable

from os_traits import COMPUTE_STATUS_DISABLED as DISABLED

from billeting.scheduler.nova_features import IMAGE_TYPE_TRAITS, disk_formats, image_type_trait

COMPUTE_NODE = "COMPUTE_NODE"
# Placement's standard owner trait for compute-service providers; schedulers
# use it to tell compute nodes from providers other services created.
DEFAULT_OWNER = "OWNER_NOVA"

# Every capability a driver may claim; the ones it does not claim are removed.
CAPABILITY_TRAITS = frozenset({
    "COMPUTE_ACCELERATORS",
    "COMPUTE_ADDRESS_SPACE_EMULATED",
    "COMPUTE_ADDRESS_SPACE_PASSTHROUGH",
    "COMPUTE_DEVICE_TAGGING",
    "COMPUTE_EPHEMERAL_ENCRYPTION",
    "COMPUTE_EPHEMERAL_ENCRYPTION_LUKS",
    "COMPUTE_EPHEMERAL_ENCRYPTION_PLAIN",
    "COMPUTE_MEM_BACKING_FILE",
    "COMPUTE_NET_ATTACH_INTERFACE",
    "COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG",
    "COMPUTE_REMOTE_MANAGED_PORTS",
    "COMPUTE_RESCUE_BFV",
    "COMPUTE_SAME_HOST_COLD_MIGRATE",
    "COMPUTE_SECURITY_STATELESS_FIRMWARE",
    "COMPUTE_SECURITY_UEFI_SECURE_BOOT",
    "COMPUTE_SOCKET_PCI_NUMA_AFFINITY",
    "COMPUTE_STORAGE_VIRTIO_FS",
    "COMPUTE_TRUSTED_CERTS",
    "COMPUTE_VOLUME_ATTACH_WITH_TAG",
    "COMPUTE_VOLUME_EXTEND",
    "COMPUTE_VOLUME_MULTI_ATTACH",
    *IMAGE_TYPE_TRAITS,
})


def image_type_traits(formats: Iterable[str]) -> frozenset[str]:
    """The capability traits of a driver that boots ``formats`` (``qcow2`` →
    ``COMPUTE_IMAGE_TYPE_QCOW2``); ValueError for a format no trait names.
    The scheduler asks for the image's when [scheduler]
    query_placement_for_image_type_support is on."""
    traits = set(map(image_type_trait, formats))
    unknown = traits - IMAGE_TYPE_TRAITS
    if unknown:
        raise ValueError(f"unknown image type(s) {disk_formats(unknown)} (known: {disk_formats(IMAGE_TYPE_TRAITS)})")
    return frozenset(traits)


def desired_traits(current: Iterable[str], *, root: bool, owner: str, capabilities: frozenset[str],
                   driver_traits: frozenset[str], previously_reported: frozenset[str],
                   disabled: bool) -> frozenset[str]:
    """The provider's complete trait set after applying the rules to ``current``."""
    owned = (CAPABILITY_TRAITS | {DISABLED} | previously_reported) if root else previously_reported
    keep = {t for t in current if t not in owned or t in driver_traits}
    wanted = set(driver_traits) | {owner}
    if root:
        wanted |= {COMPUTE_NODE} | (capabilities & CAPABILITY_TRAITS)
        if disabled:
            wanted.add(DISABLED)
    return frozenset(keep | wanted)
