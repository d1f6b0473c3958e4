"""Flavor + image → request groups and query (docs/design/request-translation.md, #request-filters)."""
from __future__ import annotations

import pytest

from billeting.placement_client.model import CandidateQuery, RequestGroup
from billeting.placement_client.query import query_string
from billeting.scheduler.bounds import MAX_VCPUS
from billeting.scheduler.catalog import MemoryHostCatalog
from billeting.scheduler.decision import Decision
from billeting.scheduler.directory import MemoryDirectory
from billeting.scheduler import nova_features
from billeting.scheduler.nova import Flavor, Image, Unmodelled, request_from_nova, resource_groups
from billeting.scheduler import query as scheduler_query
from billeting.scheduler.settings import SchedulerSettings


def groups_of(flavor, image=None, **kw):
    groups, policy = resource_groups(flavor, image, **kw)
    return {g.suffix: g for g in groups}, policy


def test_worked_example_of_the_design_document_renders_verbatim():
    """Spec 2.3: 4 vCPU / 8192 MB / 40 GB root / 1024 MB swap, an FPGA group,
    an AVX2 trait, group_policy=isolate, AZ az1 mapped to aggregate A."""
    flavor = Flavor(vcpus=4, memory_mb=8192, root_gb=40, ephemeral_gb=0, swap=1024, extra_specs={
        "resources1:CUSTOM_FPGA": "1", "trait1:CUSTOM_FPGA_INTEL": "required",
        "trait:HW_CPU_X86_AVX2": "required", "group_policy": "isolate"})
    request = request_from_nova(flavor, instance_uuids=["i-1"], project_id="p", user_id="u",
                                availability_zone="az1")
    directory = MemoryDirectory()
    directory.add_zone("az1", "A")
    decision = Decision(request, SchedulerSettings(), directory)
    query = scheduler_query.build(decision, MemoryHostCatalog(), version=(1, 36))
    assert query_string(query, (1, 36)) == (
        "group_policy=isolate&limit=1000"
        "&member_of=in:A"
        "&required=HW_CPU_X86_AVX2"
        "&required1=CUSTOM_FPGA_INTEL"
        "&resources=DISK_GB:41,MEMORY_MB:8192,VCPU:4"
        "&resources1=CUSTOM_FPGA:1"
        "&root_required=!COMPUTE_STATUS_DISABLED")


def test_flavor_amounts_go_to_the_unsuffixed_group():
    groups, policy = groups_of(Flavor(vcpus=2, memory_mb=2048, root_gb=20, ephemeral_gb=5, swap=1500))
    assert policy is None
    assert groups[""].resources == {"DISK_GB": 27, "MEMORY_MB": 2048, "VCPU": 2}  # 20 + 5 + ceil(1500/1024)


def test_boot_from_volume_leaves_the_root_disk_out():
    groups, _ = groups_of(Flavor(vcpus=1, memory_mb=512, root_gb=20), is_bfv=True)
    assert groups[""].resources == {"MEMORY_MB": 512, "VCPU": 1}
    groups, _ = groups_of(Flavor(vcpus=1, memory_mb=512, root_gb=20, ephemeral_gb=3), is_bfv=True)
    assert groups[""].resources["DISK_GB"] == 3


def test_extra_spec_resources_override_and_zero_removes_a_class():
    groups, _ = groups_of(Flavor(vcpus=2, memory_mb=2048, root_gb=10, extra_specs={
        "resources:VCPU": "6", "resources:DISK_GB": "0", "resources:CUSTOM_MAGIC": "3"}))
    assert groups[""].resources == {"CUSTOM_MAGIC": 3, "MEMORY_MB": 2048, "VCPU": 6}


def test_ironic_flavor_asks_for_one_whole_node():
    groups, _ = groups_of(Flavor(vcpus=32, memory_mb=262144, root_gb=800, extra_specs={
        "resources:CUSTOM_BAREMETAL_GOLD": "1", "resources:VCPU": "0",
        "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}))
    assert groups == {"": RequestGroup(resources={"CUSTOM_BAREMETAL_GOLD": 1})}


def test_numbered_and_named_groups_and_their_traits():
    groups, policy = groups_of(Flavor(vcpus=1, memory_mb=512, extra_specs={
        "resources1:SRIOV_NET_VF": "1", "trait1:CUSTOM_PHYSNET_A": "required",
        "trait1:CUSTOM_SLOW": "forbidden", "resources_GPU:VGPU": "2", "group_policy": "none"}))
    assert policy == "none"
    assert groups["1"].resources == {"SRIOV_NET_VF": 1}
    assert groups["1"].required == (frozenset({"CUSTOM_PHYSNET_A"}),)
    assert groups["1"].forbidden == frozenset({"CUSTOM_SLOW"})
    assert groups["_GPU"].resources == {"VGPU": 2}
    assert groups[""].resources == {"MEMORY_MB": 512, "VCPU": 1}


def test_invalid_entries_are_skipped():
    groups, policy = groups_of(Flavor(vcpus=1, memory_mb=512, extra_specs={
        "resources:NOT_A_CLASS": "1", "resources:VCPU": "-1", "resources:MEMORY_MB": "lots",
        "trait:CUSTOM_X": "preferred", "group_policy": "sometimes", "hw:cpu_cores": "2",
        "capabilities:cpu_info:arch": "x86_64"}))
    assert policy is None
    assert groups == {"": RequestGroup(resources={"MEMORY_MB": 512, "VCPU": 1})}


def test_image_traits_are_required_on_the_unsuffixed_group():
    groups, _ = groups_of(Flavor(vcpus=1, memory_mb=512),
                          Image(properties={"trait:HW_CPU_X86_AVX2": "required", "trait:CUSTOM_X": "forbidden",
                                            "hw_disk_bus": "scsi"}))
    assert groups[""].required == (frozenset({"HW_CPU_X86_AVX2"}),)
    assert groups[""].forbidden == frozenset()


def test_dedicated_cpus_ask_for_pcpu_and_thread_policy_for_a_trait():
    groups, _ = groups_of(Flavor(vcpus=4, memory_mb=512, extra_specs={
        "hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}))
    assert groups[""].resources == {"MEMORY_MB": 512, "PCPU": 4}
    assert groups[""].forbidden == frozenset({"HW_CPU_HYPERTHREADING"})
    groups, _ = groups_of(Flavor(vcpus=2, memory_mb=512, extra_specs={"hw:emulator_threads_policy": "isolate"}),
                          Image(properties={"hw_cpu_policy": "dedicated"}))
    assert groups[""].resources["PCPU"] == 3


def test_mixed_cpus_split_by_the_dedicated_or_realtime_mask():
    """Spec 2.2 step 4: ``mixed`` asks for the masked vCPUs as PCPU and the
    rest as VCPU; a malformed mask, or one leaving no shared or no dedicated
    vCPU, is skipped (every vCPU shared)."""
    def cpus(vcpus, **specs):
        groups, _ = groups_of(Flavor(vcpus=vcpus, memory_mb=512, extra_specs={"hw:cpu_policy": "mixed", **specs}))
        return {rc: n for rc, n in groups[""].resources.items() if rc in ("VCPU", "PCPU")}

    assert cpus(4, **{"hw:cpu_dedicated_mask": "2-3"}) == {"VCPU": 2, "PCPU": 2}
    assert cpus(4, **{"hw:cpu_dedicated_mask": "^0"}) == {"VCPU": 1, "PCPU": 3}
    assert cpus(8, **{"hw:cpu_dedicated_mask": "0-5,^1"}) == {"VCPU": 3, "PCPU": 5}
    assert cpus(4, **{"hw:cpu_realtime_mask": "^0-2"}) == {"VCPU": 3, "PCPU": 1}
    assert cpus(4, **{"hw:cpu_dedicated_mask": "1", "hw:emulator_threads_policy": "isolate"}) == {
        "VCPU": 3, "PCPU": 2}
    for bad in ("0-3", "^0-3", "4", "x", "", "2-1"):
        assert cpus(4, **{"hw:cpu_dedicated_mask": bad}) == {"VCPU": 4}, bad
    assert cpus(4, **{"hw:cpu_realtime_mask": "1-2"}) == {"VCPU": 4}  # a realtime mask excludes
    groups, _ = groups_of(Flavor(vcpus=4, memory_mb=512, extra_specs={"hw:cpu_policy": "mixed"}),
                          Image(properties={"hw_cpu_dedicated_mask": "^0"}))
    assert groups[""].resources["PCPU"] == 3
    # resources the extra specs name win over the policy
    assert cpus(4, **{"hw:cpu_dedicated_mask": "2-3", "resources:VCPU": "4"}) == {"VCPU": 4}
    # the masks are read per vCPU: beyond a guest's largest size (which both
    # APIs refuse) the policy is skipped, not a second of work per request
    assert cpus(MAX_VCPUS, **{"hw:cpu_dedicated_mask": "^0"}) == {"VCPU": 1, "PCPU": MAX_VCPUS - 1}
    assert cpus(10**6, **{"hw:cpu_dedicated_mask": "^0"}) == {"VCPU": 10**6}


def test_guest_features_ask_for_the_host_traits_and_resources_that_give_them():
    """Spec 2.2 step 7, each feature from the flavor and from the image."""
    def base(specs=None, props=None):
        groups, _ = groups_of(Flavor(vcpus=1, memory_mb=512, extra_specs=specs or {}),
                              Image(properties=props or {}))
        required = set().union(*groups[""].required)
        extra = {rc: n for rc, n in groups[""].resources.items() if rc not in ("VCPU", "MEMORY_MB")}
        return required, extra

    assert base({"hw:mem_encryption": "True"}) == ({"HW_CPU_X86_AMD_SEV"}, {"MEM_ENCRYPTION_CONTEXT": 1})
    assert base(props={"hw_mem_encryption": "yes", "hw_mem_encryption_model": "amd-sev-es"}) == (
        {"HW_CPU_X86_AMD_SEV_ES"}, {"MEM_ENCRYPTION_CONTEXT": 1})
    assert base({"hw:mem_encryption": "false"}) == (set(), {})
    assert base({"hw:pmem": "6GB,6GB, large-1"}) == (set(), {"CUSTOM_PMEM_NAMESPACE_6GB": 2,
                                                              "CUSTOM_PMEM_NAMESPACE_LARGE_1": 1})
    assert base({"hw:tpm_version": "2.0"}) == ({"COMPUTE_SECURITY_TPM_2_0", "COMPUTE_SECURITY_TPM_TIS"}, {})
    assert base(props={"hw_tpm_version": "1.2", "hw_tpm_model": "tpm-crb"}) == (
        {"COMPUTE_SECURITY_TPM_1_2", "COMPUTE_SECURITY_TPM_CRB"}, {})
    assert base({"hw:tpm_version": "3.0"}) == (set(), {})
    assert base({"hw:pci_numa_affinity_policy": "socket"})[0] == {"COMPUTE_SOCKET_PCI_NUMA_AFFINITY"}
    assert base({"hw:pci_numa_affinity_policy": "preferred"})[0] == set()
    assert base(props={"os_secure_boot": "required"})[0] == {"COMPUTE_SECURITY_UEFI_SECURE_BOOT"}
    assert base({"os:secure_boot": "optional"})[0] == set()
    assert base({"hw:maxphysaddr_mode": "passthrough"})[0] == {"COMPUTE_ADDRESS_SPACE_PASSTHROUGH"}
    assert base(props={"hw_maxphysaddr_mode": "emulate"})[0] == {"COMPUTE_ADDRESS_SPACE_EMULATED"}
    assert base(props={"hw_firmware_stateless": "true"})[0] == {"COMPUTE_SECURITY_STATELESS_FIRMWARE"}
    # the flavor's value wins over the image's
    assert base({"hw:tpm_version": "1.2"}, {"hw_tpm_version": "2.0"})[0] == {
        "COMPUTE_SECURITY_TPM_1_2", "COMPUTE_SECURITY_TPM_TIS"}


def test_features_the_compute_node_itself_must_offer_become_root_required():
    """Spec 2.4 request filters 7, 8, 11, 12, 13 (on whenever the guest asks)."""
    def roots(specs=None, props=None):
        return set(request_from_nova(Flavor(vcpus=1, memory_mb=512, extra_specs=specs or {}),
                                     Image(properties=props or {}), instance_uuids=["u"], project_id="p",
                                     user_id="u").root_required)

    assert roots() == set()
    assert roots({"accel:device_profile": "gpu-profile"}) == {"COMPUTE_ACCELERATORS"}
    assert roots({"hw:virtio_packed_ring": "true"}) == {"COMPUTE_NET_VIRTIO_PACKED"}
    assert roots(props={"hw_virtio_packed_ring": "no"}) == set()
    assert roots(props={"hw_ephemeral_encryption": "True", "hw_ephemeral_encryption_format": "luks"}) == {
        "COMPUTE_EPHEMERAL_ENCRYPTION", "COMPUTE_EPHEMERAL_ENCRYPTION_LUKS"}
    assert roots({"hw:ephemeral_encryption": "1", "hw:ephemeral_encryption_format": "zip"}) == {
        "COMPUTE_EPHEMERAL_ENCRYPTION"}
    assert roots(props={"hw_sound_model": "virtio"}) == {"COMPUTE_SOUND_MODEL_VIRTIO"}
    assert roots({"hw:sound_model": "ac97"}) == set()
    assert roots({"hw:tpm_version": "2.0", "hw:tpm_secret_security": "host"}) == {
        "COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST"}
    assert roots({"hw:tpm_secret_security": "host"}) == set()  # only with a vTPM


def test_image_type_support_asks_for_the_disk_format_trait_unless_booting_from_volume():
    """Spec 2.4 request filter 3 ([scheduler] query_placement_for_image_type_support, off by default)."""
    import pytest

    def root_required(image, *, on=True, is_bfv=False):
        request = request_from_nova(Flavor(vcpus=1, memory_mb=512, root_gb=10), image, instance_uuids=["u"],
                                    project_id="p", user_id="u", is_bfv=is_bfv)
        decision = Decision(request, SchedulerSettings(query_placement_for_image_type_support=on), MemoryDirectory())
        return set(scheduler_query.build(decision, MemoryHostCatalog(), version=(1, 36)).root_required)

    qcow2 = Image(id="cirros", disk_format="qcow2")
    request = request_from_nova(Flavor(vcpus=1, memory_mb=512), qcow2, instance_uuids=["u"], project_id="p",
                                user_id="u", is_bfv=True)
    assert (request.image_disk_format, request.is_bfv) == ("qcow2", True)
    assert root_required(qcow2, on=False) == set()
    assert root_required(qcow2) == {"COMPUTE_IMAGE_TYPE_QCOW2"}
    assert root_required(Image(disk_format="ISO")) == {"COMPUTE_IMAGE_TYPE_ISO"}
    assert root_required(qcow2, is_bfv=True) == set()  # the hypervisor boots the volume, not the image
    assert root_required(Image()) == set() and root_required(None) == set()  # no format given: nothing asked
    # A format no host can report: the request cannot succeed, and says which trait it lacks.
    with pytest.raises(scheduler_query.Unsatisfiable,
                       match=r"disk format 'qed' needs trait COMPUTE_IMAGE_TYPE_QED, which no compute host"):
        root_required(Image(disk_format="qed"))
    assert root_required(Image(disk_format="qed"), on=False) == set()
    assert root_required(Image(disk_format="qed"), is_bfv=True) == set()


def test_query_string_feature_checks_name_the_missing_microversion():
    import pytest

    from billeting.placement_client.query import UnsupportedQuery

    query = CandidateQuery(groups=(RequestGroup(resources={"VCPU": 1}),), root_forbidden=frozenset({"X"}))
    with pytest.raises(UnsupportedQuery, match="root_required needs Placement microversion 1.35"):
        query_string(query, (1, 34))
    anyof = CandidateQuery(groups=(RequestGroup(resources={"VCPU": 1}, required=(frozenset({"A", "B"}),)),))
    assert query_string(anyof, (1, 39)) == "required=in:A,B&resources=VCPU:1"
    with pytest.raises(UnsupportedQuery):
        query_string(anyof, (1, 38))


def test_failure_domain_hints_become_constraints_and_nearness():
    from billeting.scheduler.nova import BadHint, domain_hints
    from billeting.scheduler.request import DomainConstraint, Nearness

    directory = MemoryDirectory()
    directory.add_domain("rack", "r1", "agg-r1")
    a, b = "3f1b2c4d-0000-4000-8000-00000000000a", "3f1b2c4d-0000-4000-8000-00000000000b"
    constraints, near = domain_hints({"different_rack": [a.upper()], "same_row": [b, b], "same_host": [a],
                                      "different_planet": [a], "anything": ["else"]}, directory)
    assert constraints == (DomainConstraint(relation="different", level="rack", instances=(a,)),
                           DomainConstraint(relation="same", level="row", instances=(b,)))
    assert near is None
    assert domain_hints({"near_rack": ["r1"]}, directory) == ((), Nearness(level="rack", domain="r1"))
    assert domain_hints({"near_row": [a]}, directory) == ((), Nearness(level="row", instances=(a,)))
    assert domain_hints({"different_cell": [a]}, directory) == (
        (DomainConstraint(relation="different", level="cell", instances=(a,)),), None)
    # A move leaves the moving instance out (a constraint on itself alone disappears).
    assert domain_hints({"different_rack": [a], "same_row": [a, b]}, directory, exclude=a) == (
        (DomainConstraint(relation="same", level="row", instances=(b,)),), None)
    for hints in ({"same_rack": ["not-a-uuid"]}, {"different_row": []}, {"near_rack": ["r9"]},
                  {"near_rack": ["r1", a]}, {"near_rack": [a], "near_row": [b]}):
        try:
            domain_hints(hints, directory)
        except BadHint:
            continue
        raise AssertionError(f"{hints} was taken")


@pytest.mark.parametrize("specs, properties, keys", [
    ({"hw:numa_nodes": "2"}, {}, ["hw:numa_nodes"]),
    ({"hw:numa_cpus.0": "0-1", "hw:numa_mem.0": "512"}, {}, ["hw:numa_cpus.0", "hw:numa_mem.0"]),
    ({"hw:mem_page_size": "large", "pci_passthrough:alias": "a1:2"}, {}, ["hw:mem_page_size", "pci_passthrough:alias"]),
    ({}, {"hw_numa_nodes": "2", "hw_mem_page_size": "2048"}, ["hw_mem_page_size", "hw_numa_nodes"]),
])
def test_what_the_scheduler_does_not_model_is_refused_not_ignored(specs, properties, keys):
    flavor = Flavor(name="f-numa", vcpus=4, memory_mb=1024, extra_specs=specs)
    image = Image(properties=properties)
    assert nova_features.unmodelled(specs, properties) == keys
    with pytest.raises(Unmodelled) as caught:
        request_from_nova(flavor, image, instance_uuids=["i-1"], project_id="p", user_id="u")
    assert caught.value.keys == keys
    assert f"flavor f-numa asks for {', '.join(keys)}" in str(caught.value)
    assert "not modelled" in str(caught.value)


def test_modelled_cpu_keys_are_not_refused():
    specs = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate", "hw:numa_something_else": "x"}
    assert nova_features.unmodelled(specs, {"hw_cpu_policy": "dedicated"}) == []
    request_from_nova(Flavor(vcpus=2, memory_mb=64, extra_specs=specs), instance_uuids=["i-1"], project_id="p",
                      user_id="u")
