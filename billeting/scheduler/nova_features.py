"""Flavor extra specs and image properties that are not Placement terms but
become some (docs/design/request-translation.md#translation, steps 4 and 6,
and the root traits of #request-filters that a guest's features need): CPU pinning asks
for dedicated CPUs (PCPU), and guest features ask for the host trait (or the
resource) that says a host can give them.

Each key is read from the flavor first, then from the image under Nova's
image property name; values Nova would refuse when the flavor is created
are skipped with a warning, as the rest of the translation does.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping

import os_resource_classes
import os_traits

from billeting.scheduler.bounds import MAX_VCPUS

LOG = logging.getLogger(__name__)

Prop = Callable[["str | None", str], "str | None"]  # (extra spec, image property) -> value

_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})
_CPU_RANGE = re.compile(r"^(\^)?(\d+)(?:-(\d+))?$")

# guest feature → the trait a host reports when it can give it
_MEM_ENCRYPTION_MODELS = {"amd-sev": "HW_CPU_X86_AMD_SEV", "amd-sev-es": "HW_CPU_X86_AMD_SEV_ES"}
_TPM_VERSIONS = {"1.2": "COMPUTE_SECURITY_TPM_1_2", "2.0": "COMPUTE_SECURITY_TPM_2_0"}
_TPM_MODELS = {"tpm-tis": "COMPUTE_SECURITY_TPM_TIS", "tpm-crb": "COMPUTE_SECURITY_TPM_CRB"}
_MAXPHYSADDR_MODES = {"passthrough": "COMPUTE_ADDRESS_SPACE_PASSTHROUGH",
                      "emulate": "COMPUTE_ADDRESS_SPACE_EMULATED"}


# Guest features Nova decides on the host (its NUMA topology and PCI
# passthrough filters) and this scheduler does not model: a flavor or image
# asking for them would be placed as if it had not asked, so it is refused.
_UNMODELLED_SPEC = re.compile(r"^(hw:(numa_nodes|numa_cpus\.\d+|numa_mem\.\d+|mem_page_size)|pci_passthrough:alias)$")
_UNMODELLED_PROPERTY = re.compile(r"^hw_(numa_nodes|numa_cpus\.\d+|numa_mem\.\d+|mem_page_size)$")
UNMODELLED_WHY = ("guest NUMA topologies, huge pages and PCI passthrough aliases are not modelled by "
                  "this scheduler, which would place the server as if the key were absent")


def unmodelled(extra_specs: Mapping[str, str], image_properties: Mapping[str, str] | None = None) -> list[str]:
    """The flavor extra specs and image properties, sorted, that ask for a
    guest feature the scheduler does not model."""
    return sorted([k for k in extra_specs if _UNMODELLED_SPEC.match(k)]
                  + [k for k in (image_properties or {}) if _UNMODELLED_PROPERTY.match(k)])


def truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def cpu_set(mask: str, vcpus: int) -> set[int] | None:
    """The guest CPUs ``mask`` names (``"2-3"``, ``"0,2"``; a mask made of
    exclusions only, ``"^0-1"``, names every CPU but those), or None when it
    is malformed or names a CPU the flavor does not have."""
    chosen: set[int] = set()
    excluded: set[int] = set()
    for part in mask.split(","):
        match = _CPU_RANGE.match(part.strip())
        if not match:
            return None
        low = int(match.group(2))
        high = int(match.group(3)) if match.group(3) else low
        if high < low or high >= vcpus:
            return None
        (excluded if match.group(1) else chosen).update(range(low, high + 1))
    if not chosen:
        chosen = set(range(vcpus))
    return chosen - excluded


def pinning(prop: Prop, vcpus: int, resources: dict[str, int], required: set[str], forbidden: set[str],
            *, cpus_named: bool) -> None:
    """Step 4 on the unsuffixed group: ``dedicated`` asks for every vCPU as
    PCPU, ``mixed`` splits them by the dedicated (or realtime) mask, and an
    isolated emulator thread takes one more PCPU; the thread policy requires
    or forbids SMT. Classes the extra specs already name (``cpus_named``) win."""
    policy = prop("hw:cpu_policy", "hw_cpu_policy")
    if not cpus_named and policy in ("dedicated", "mixed"):
        dedicated = vcpus if policy == "dedicated" else _mixed_dedicated(prop, vcpus)
        if dedicated is not None:
            isolate = prop("hw:emulator_threads_policy", "hw_emulator_threads_policy") == "isolate"
            resources["PCPU"] = dedicated + (1 if isolate else 0)
            if dedicated < vcpus:
                resources["VCPU"] = vcpus - dedicated
    thread = prop("hw:cpu_thread_policy", "hw_cpu_thread_policy")
    if thread == "isolate":
        forbidden.add("HW_CPU_HYPERTHREADING")
    elif thread == "require":
        required.add("HW_CPU_HYPERTHREADING")


def _mixed_dedicated(prop: Prop, vcpus: int) -> int | None:
    if vcpus > MAX_VCPUS:  # the masks are read per vCPU; the APIs refuse such flavors
        LOG.warning("ignoring hw:cpu_policy=mixed: %d vCPUs, more than %d", vcpus, MAX_VCPUS)
        return None
    mask = prop("hw:cpu_dedicated_mask", "hw_cpu_dedicated_mask")
    if not mask:
        # without a dedicated mask, the realtime vCPUs are the dedicated ones
        mask = prop("hw:cpu_realtime_mask", "hw_cpu_realtime_mask")
        if mask and not mask.strip().startswith("^"):
            mask = None
    cpus = cpu_set(mask, vcpus) if mask else None
    if cpus is None or not 0 < len(cpus) < vcpus:
        LOG.warning("ignoring hw:cpu_policy=mixed: it needs a dedicated or realtime mask leaving at least one "
                    "shared and one dedicated vCPU of %d (got %r)", vcpus, mask)
        return None
    return len(cpus)


def features(prop: Prop, resources: dict[str, int], required: set[str]) -> None:
    """Step 7 on the unsuffixed group: memory encryption, persistent memory,
    vTPM, PCI NUMA affinity, secure boot, physical address bits, stateless
    firmware."""
    if truthy(prop("hw:mem_encryption", "hw_mem_encryption")):
        model = prop("hw:mem_encryption_model", "hw_mem_encryption_model") or "amd-sev"
        if model in _MEM_ENCRYPTION_MODELS:
            resources["MEM_ENCRYPTION_CONTEXT"] = 1
            required.add(_MEM_ENCRYPTION_MODELS[model])
        else:
            LOG.warning("ignoring hw:mem_encryption: unknown model %r", model)
    _pmem(prop("hw:pmem", "hw_pmem"), resources)
    version = prop("hw:tpm_version", "hw_tpm_version")
    if version:
        model = prop("hw:tpm_model", "hw_tpm_model") or "tpm-tis"
        if version in _TPM_VERSIONS and model in _TPM_MODELS:
            required.update((_TPM_VERSIONS[version], _TPM_MODELS[model]))
        else:
            LOG.warning("ignoring vTPM request: version %r, model %r", version, model)
    if prop("hw:pci_numa_affinity_policy", "hw_pci_numa_affinity_policy") == "socket":
        required.add("COMPUTE_SOCKET_PCI_NUMA_AFFINITY")
    if prop("os:secure_boot", "os_secure_boot") == "required":
        required.add("COMPUTE_SECURITY_UEFI_SECURE_BOOT")
    mode = prop("hw:maxphysaddr_mode", "hw_maxphysaddr_mode")
    if mode in _MAXPHYSADDR_MODES:
        required.add(_MAXPHYSADDR_MODES[mode])
    if truthy(prop(None, "hw_firmware_stateless")):  # an image property only
        required.add("COMPUTE_SECURITY_STATELESS_FIRMWARE")


def _pmem(labels: str | None, resources: dict[str, int]) -> None:
    """``hw:pmem=6GB,6GB,LARGE``: one namespace of each listed label, as the
    custom class the compute reports for that label."""
    for label in (labels or "").split(","):
        label = label.strip()
        if label:
            name = os_resource_classes.normalize_name("PMEM_NAMESPACE_" + label)
            resources[name] = resources.get(name, 0) + 1


_EPHEMERAL_FORMATS = {"plain": "COMPUTE_EPHEMERAL_ENCRYPTION_PLAIN", "luks": "COMPUTE_EPHEMERAL_ENCRYPTION_LUKS",
                      "luksv2": "COMPUTE_EPHEMERAL_ENCRYPTION_LUKSV2"}
_TPM_SECRET_SECURITY = frozenset({"user", "host", "deployment"})


# image property -> the prefix of the trait a compute node reports for its value
_IMAGE_METADATA_TRAITS = (("hw_cdrom_bus", "COMPUTE_STORAGE_BUS_"), ("hw_disk_bus", "COMPUTE_STORAGE_BUS_"),
                          ("hw_video_model", "COMPUTE_GRAPHICS_MODEL_"), ("hw_vif_model", "COMPUTE_NET_VIF_MODEL_"),
                          ("hw_architecture", "HW_ARCH_"), ("hw_emulation_architecture", "COMPUTE_ARCH_"),
                          ("hw_viommu_model", "COMPUTE_VIOMMU_MODEL_"))
_KNOWN_TRAITS = frozenset(os_traits.get_traits())


def image_metadata_traits(properties: Mapping[str, str]) -> set[str]:
    """The image-metadata pre-filter (``image_metadata_prefilter``,
    docs/design/request-translation.md#request-filters): the traits the compute node needs for the image's buses, video and NIC
    models and architectures (``hw_disk_bus=virtio`` → ``COMPUTE_STORAGE_BUS_VIRTIO``).
    A value no standard trait names is skipped: no host could report it."""
    traits: set[str] = set()
    for prop, prefix in _IMAGE_METADATA_TRAITS:
        value = properties.get(prop)
        if value:
            name = prefix + value.strip().upper().replace("-", "_")
            if name in _KNOWN_TRAITS:
                traits.add(name)
            else:
                LOG.warning("ignoring image property %s=%r: no trait %s", prop, value, name)
    return traits


IMAGE_TYPE_PREFIX = "COMPUTE_IMAGE_TYPE_"
# The disk formats any driver can say it boots (os-traits' COMPUTE_IMAGE_TYPE_*).
IMAGE_TYPE_TRAITS = frozenset(os_traits.get_traits(IMAGE_TYPE_PREFIX))


def image_type_trait(disk_format: str) -> str:
    """The image-type pre-filter (``query_placement_for_image_type_support``,
    docs/design/request-translation.md#request-filters):
    the trait of a host whose driver can boot ``disk_format`` (``qcow2`` →
    ``COMPUTE_IMAGE_TYPE_QCOW2``). Made whatever the format, as Nova does; only
    the names in ``IMAGE_TYPE_TRAITS`` are ever reported by a host."""
    return IMAGE_TYPE_PREFIX + disk_format.strip().upper()


def disk_format_of(trait: str) -> str:
    """The disk format an image-type trait stands for (``COMPUTE_IMAGE_TYPE_QCOW2`` → ``qcow2``)."""
    return trait.removeprefix(IMAGE_TYPE_PREFIX).lower()


def disk_formats(traits) -> str:
    """Image-type traits as a sorted list of disk formats, for messages."""
    return ", ".join(sorted(map(disk_format_of, traits)))


def root_traits(prop: Prop, extra_specs: Mapping[str, str]) -> set[str]:
    """Root traits (docs/design/request-translation.md#request-filters): traits the compute node
    itself (the tree's root) must have for accelerators, packed virtqueues,
    ephemeral encryption, virtio sound and the vTPM secret's security."""
    traits: set[str] = set()
    if extra_specs.get("accel:device_profile"):
        traits.add(os_traits.COMPUTE_ACCELERATORS)
    if truthy(prop("hw:virtio_packed_ring", "hw_virtio_packed_ring")):
        traits.add(os_traits.COMPUTE_NET_VIRTIO_PACKED)
    if truthy(prop("hw:ephemeral_encryption", "hw_ephemeral_encryption")):
        traits.add(os_traits.COMPUTE_EPHEMERAL_ENCRYPTION)
        fmt = prop("hw:ephemeral_encryption_format", "hw_ephemeral_encryption_format")
        if fmt:
            if fmt.lower() in _EPHEMERAL_FORMATS:
                traits.add(_EPHEMERAL_FORMATS[fmt.lower()])
            else:
                LOG.warning("ignoring ephemeral encryption format %r", fmt)
    if prop("hw:sound_model", "hw_sound_model") == "virtio":
        traits.add(os_traits.COMPUTE_SOUND_MODEL_VIRTIO)
    secret = prop("hw:tpm_secret_security", "hw_tpm_secret_security")
    if secret and prop("hw:tpm_version", "hw_tpm_version"):
        if secret in _TPM_SECRET_SECURITY:
            traits.add("COMPUTE_SECURITY_TPM_SECRET_SECURITY_" + secret.upper())
        else:
            LOG.warning("ignoring hw:tpm_secret_security=%r", secret)
    return traits
