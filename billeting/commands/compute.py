"""``billeting compute``: run one or more compute hosts of a cell.

    billeting compute --host H [--host H2 ...] --cell C --driver fake [--shape flat|numa|pci|vgpu|ironic]
                      [--cell-db URL] [--transport-url URL] [--placement-url URL] ...

Every host serves ``compute.<host>`` on the cell's bus; they share the
process's cell database pool, bus connection and Placement client.
"""
from __future__ import annotations

import argparse
import logging
import socket

from billeting.commands import common
from billeting.commands import cells
from billeting.commands.pools import add_pool_flags

LOG = logging.getLogger("billeting")


def register(commands) -> None:
    p = commands.add_parser("compute", help="run compute hosts of a cell (foreground, until SIGTERM/SIGINT)")
    p.add_argument("--host", dest="hosts", metavar="HOST", action="append", default=None,
                   help="a compute service host to run (repeat for several; default: this machine's name)")
    p.add_argument("--driver", choices=("fake",), default="fake", help="virt driver (default fake)")
    cells.add_cell_flags(p)
    fake = p.add_argument_group("fake driver")
    fake.add_argument("--shape", choices=("flat", "numa", "pci", "vgpu", "ironic"), default="flat")
    fake.add_argument("--vcpus", type=int, default=None)
    fake.add_argument("--pcpus", type=int, default=None)
    fake.add_argument("--memory-mb", type=int, default=None)
    fake.add_argument("--disk-gb", type=int, default=None)
    fake.add_argument("--numa-nodes", type=int, default=None)
    fake.add_argument("--pfs", type=int, default=None, help="SR-IOV physical functions (pci shape)")
    fake.add_argument("--vfs-per-pf", type=int, default=None)
    fake.add_argument("--bandwidth-kbps", type=int, default=None)
    fake.add_argument("--physnet", default=None)
    fake.add_argument("--gpus", type=int, default=None, help="physical GPUs (vgpu shape)")
    fake.add_argument("--vgpus-per-gpu", type=int, default=None)
    fake.add_argument("--ironic-nodes", type=int, default=None, help="bare-metal nodes (ironic shape)")
    fake.add_argument("--ironic-class", default=None, help="node resource class, e.g. baremetal.gold")
    fake.add_argument("--build-time", type=float, default=None, metavar="SECONDS", help="time a build takes")
    fake.add_argument("--failure-rate", type=float, default=None, metavar="P",
                      help="probability that a build fails (1 = always)")
    fake.add_argument("--abort-builds", action="store_true", default=None,
                      help="failed builds are aborts (never rescheduled)")
    fake.add_argument("--seed", type=int, default=None, help="seed of the failure draws")
    fake.add_argument("--hypervisor-type", default=None, help="what the node reports (default fake)")
    fake.add_argument("--hypervisor-version", type=int, default=None, metavar="N",
                      help="Nova's encoding, 6.2.0 = 6002000 (default 1000, i.e. 1.0)")
    fake.add_argument("--architecture", default=None, help="CPU architecture (default x86_64)")
    fake.add_argument("--image-types", type=_image_types, default=None, metavar="FORMAT,...",
                      help="disk formats the node boots, reported as COMPUTE_IMAGE_TYPE_* traits "
                           "(default aki,ami,ari,iso,qcow2,raw, as libvirt with KVM; '' for none)")
    tuning = p.add_argument_group("compute")
    tuning.add_argument("--reserved-host-cpus", type=int, default=None)
    tuning.add_argument("--reserved-host-memory-mb", type=int, default=None)
    tuning.add_argument("--reserved-host-disk-mb", type=int, default=None)
    tuning.add_argument("--cpu-allocation-ratio", type=float, default=None)
    tuning.add_argument("--ram-allocation-ratio", type=float, default=None)
    tuning.add_argument("--disk-allocation-ratio", type=float, default=None)
    tuning.add_argument("--report-interval", type=float, default=None, metavar="SECONDS", help="heartbeat")
    tuning.add_argument("--update-interval", type=float, default=None, metavar="SECONDS",
                        help="resource tracker period")
    tuning.add_argument("--audit-interval", type=float, default=None, metavar="SECONDS",
                        help="allocation audit period (0: off)")
    tuning.add_argument("--orphan-grace", type=float, default=None, metavar="SECONDS",
                        help="how long an unexplained allocation is left before the audit removes it")
    tuning.add_argument("--build-threads", type=int, default=None)
    tuning.add_argument("--consecutive-build-service-disable-threshold", type=int, default=None, metavar="N",
                        help="disable the service after N failed builds in a row (default 10; 0: never)")
    tuning.add_argument("--build-health-check-interval", type=float, default=None, metavar="SECONDS",
                        help="how often a service disabled by failed builds checks its health and enables "
                             "itself when it passes (default 0: only an operator enables it)")
    add_pool_flags(p)
    p.set_defaults(func=cmd_compute)


_FAKE_FLAGS = {"shape": "shape", "vcpus": "vcpus", "pcpus": "pcpus", "memory_mb": "memory_mb",
               "disk_gb": "disk_gb", "numa_nodes": "numa_nodes", "pfs": "pfs", "vfs_per_pf": "vfs_per_pf",
               "bandwidth_kbps": "bandwidth_kbps", "physnet": "physnet", "gpus": "gpus",
               "vgpus_per_gpu": "vgpus_per_gpu", "ironic_nodes": "ironic_nodes", "ironic_class": "ironic_class",
               "build_time": "build_time_s", "failure_rate": "failure_rate", "abort_builds": "abort_builds",
               "seed": "seed", "hypervisor_type": "hypervisor_type", "hypervisor_version": "hypervisor_version",
               "architecture": "architecture", "image_types": "image_types"}
_SETTING_FLAGS = {"reserved_host_cpus": "reserved_host_cpus", "reserved_host_memory_mb": "reserved_host_memory_mb",
                  "reserved_host_disk_mb": "reserved_host_disk_mb", "cpu_allocation_ratio": "cpu_allocation_ratio",
                  "ram_allocation_ratio": "ram_allocation_ratio", "disk_allocation_ratio": "disk_allocation_ratio",
                  "report_interval": "report_interval_s", "update_interval": "update_resources_interval_s",
                  "audit_interval": "audit_interval_s", "orphan_grace": "orphan_grace_s",
                  "build_threads": "build_threads",
                  "consecutive_build_service_disable_threshold": "consecutive_build_service_disable_threshold",
                  "build_health_check_interval": "build_health_check_interval_s"}


def _image_types(text: str) -> tuple[str, ...]:
    return tuple(part.strip().upper() for part in text.split(",") if part.strip())


def fake_config(args: argparse.Namespace):
    from billeting.compute.fake import FakeConfig

    given = {field: getattr(args, flag) for flag, field in _FAKE_FLAGS.items() if getattr(args, flag, None) is not None}
    try:
        return FakeConfig(**given)
    except (ValueError, TypeError) as exc:
        raise common.CliError(f"invalid fake driver setting: {exc}") from None


def compute_settings(args: argparse.Namespace):
    from billeting.compute.settings import ComputeSettings

    return cells.checked_settings(ComputeSettings, args, _SETTING_FLAGS, "compute")


def build_service(args: argparse.Namespace, wiring):
    """The computes this command runs, built from the cell's wiring only."""
    from billeting.compute.fake import FakeDriver
    from billeting.compute.manager import ComputeManager
    from billeting.compute.service import ComputeService

    hosts = args.hosts or [socket.gethostname()]
    if len(set(hosts)) != len(hosts):
        raise common.CliError("each --host may be given once")
    config, settings = fake_config(args), compute_settings(args)
    managers = [ComputeManager(host, FakeDriver(host, config), wiring, settings) for host in hosts]
    return ComputeService(wiring, managers)


def cmd_compute(args: argparse.Namespace) -> int:
    common.configure_logging(cells.log_level(args))
    fake_config(args)
    compute_settings(args)  # refuse bad flags before connecting anywhere
    wiring = cells.wire(args)
    service = build_service(args, wiring)
    cells.start_on(wiring, service, args.cell)
    LOG.info("%d compute host(s) of cell %s running: %s", len(service.managers), args.cell,
             ", ".join(m.host for m in service.managers))

    def stop() -> None:
        service.stop()
        wiring.close()

    return cells.run_until_signalled(stop)
