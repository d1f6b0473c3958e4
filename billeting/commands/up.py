"""``billeting up``: the whole control plane and fake computes in one process.

    billeting up [--cells 2] [--computes 20] [--port-base 8774] [--state-dir DIR]

Placement, the scheduler, the compute API, the super conductor, one cell
conductor per cell and fake computes, on embedded SQLite files in a state
directory (emptied at start, locked while it runs) and ``memory://`` buses:
one API bus, one per cell. Each cell's services get only their cell's database and bus
(``cells.wiring``). HTTP is served by threaded WSGI servers in this process:
compute API on the port base, the image catalog on base+2, Placement on
base+4, scheduler on base+5.

Identity: with the ``keystone`` package installed (``billeting[identity]``)
a real Keystone runs beside them on base+1 (a child process,
``billeting.identity``), every API is behind keystonemiddleware and a
``clouds.yaml`` for the ``openstack`` CLI is written to the state directory;
``--auth noauth2`` (the default without Keystone) keeps the test-only tokens.
Ctrl-C or SIGTERM stops everything.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import shutil
import signal
import textwrap
import threading
import uuid as uuidlib
from pathlib import Path

from billeting.commands import common
from billeting.config import LOG_LEVELS
from billeting.identity.layout import CLOUD_NAME
from billeting.identity.process import IdentityFailed
from billeting.state_lock import LOCK_NAME, StateDirBusy, StateLock

LOG = logging.getLogger("billeting")

# What ``start`` writes into the state directory (SQLite adds -wal/-shm/-journal),
# and the lock file that keeps a second ``billeting up`` out of it.
_STATE_FILE = re.compile(rf"^((placement|api|cell\d+)\.sqlite(-wal|-shm|-journal)?|{re.escape(LOCK_NAME)})$")
_STATE_DIRS = frozenset({"identity"})   # billeting.identity.layout.DIRECTORY


def register(commands) -> None:
    p = commands.add_parser("up", help="run Placement, scheduler, compute API, conductors and fake computes in "
                                       "one process (foreground, until Ctrl-C)")
    p.add_argument("--cells", type=int, default=2, help="cells with computes (default 2)")
    p.add_argument("--computes", type=int, default=20, help="fake compute hosts, spread over the cells (default 20)")
    p.add_argument("--port-base", type=int, default=8774,
                   help="compute API port; Keystone on +1, the image catalog on +2, Placement on +4, "
                        "scheduler on +5 (default 8774)")
    p.add_argument("--auth", choices=("keystone", "noauth2"), default=None,
                   help="keystone: a Keystone on base+1 and keystonemiddleware in front of every API (the "
                        "default when the keystone package is installed: pip install 'billeting[identity]'); "
                        "noauth2: test-only tokens ('X-Auth-Token: admin'), the default without it")
    p.add_argument("--admin-password", default=None,
                   help="the Keystone admin's password (default: a new random one at each start, written to "
                        "the clouds.yaml in the state directory)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--state-dir", default=None,
                   help="where the SQLite files go (default: the per-user state directory); emptied at start, "
                        "so it must be new, empty or an earlier 'billeting up' state directory")
    p.add_argument("--build-attempts", type=int, default=3, help="[conductor] build_attempts (default 3)")
    p.add_argument("--vcpus", type=int, default=32, help="VCPUs of each fake compute (default 32)")
    p.add_argument("--memory-mb", type=int, default=65536, help="memory of each fake compute (default 65536)")
    p.add_argument("--disk-gb", type=int, default=1000, help="disk of each fake compute (default 1000)")
    p.add_argument("--build-time", type=float, default=0.2, help="seconds a fake build takes (default 0.2)")
    p.add_argument("--failure-rate", type=float, default=0.0, help="probability a build fails (default 0)")
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--scheduler-config", metavar="PATH", default=None,
                   help="the scheduler's settings from this config file ([scheduler] and [filter_scheduler] "
                        "sections, as for 'billeting scheduler serve'): filters, weighers, topology levels")
    p.set_defaults(func=cmd_up)


def scheduler_settings(path: str | None):
    """The scheduler's settings from ``--scheduler-config`` (None: the defaults).
    Raises SettingsError naming what is wrong."""
    if path is None:
        return None
    from billeting.scheduler.service import config as scheduler_config

    return scheduler_config.load({"config_file": path}, {}).scheduler_settings()


class AllInOne:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stops: list = []
        # Asked before ``stops`` run: each service then stops at once instead
        # of one after another, each waiting out a bus drain or a periodic task.
        self.stop_requests: list = []
        self.scheduler_settings = scheduler_settings(getattr(args, "scheduler_config", None))
        self.identity = None  # the IdentityLayout, with --auth keystone

    def start(self, cancelled: threading.Event | None = None) -> dict[str, str]:
        """Start everything; ``cancelled`` (set by SIGTERM/SIGINT) cuts short the wait for Keystone."""
        a = self.args
        state = state_dir(a)
        empty_state_dir(state)
        # Keystone first: its child imports and bootstraps while this process imports the rest.
        keystone = self._start_keystone(state) if auth_strategy(a) == "keystone" else None

        from billeting.api.compute.plane import ControlPlane
        from billeting.apidb import cell_mappings, images
        from billeting.apidb import migrate as api_migrate
        from billeting.apidb.cell_directory import CellCatalog
        from billeting.cells.wiring import CellConfig, open_cell_database, wire_cell
        from billeting.compute.fake import FakeConfig, FakeDriver
        from billeting.compute.manager import ComputeManager
        from billeting.compute.service import ComputeService
        from billeting.compute.settings import ComputeSettings
        from billeting.conductor.cell import CellConductor, ConductorSettings
        from billeting.conductor.move_protocols import CellHandle
        from billeting.config import Settings
        from billeting.messaging import Bus
        from billeting.placement.api.app import make_app as placement_app
        from billeting.placement.store import migrate as placement_migrate
        from billeting.common.db.engine import make_engine
        from billeting.placement.store.sync import sync_standard_names
        from billeting.placement_client.inprocess import InProcessPlacementClient
        from billeting.scheduler.api.app import make_app as scheduler_app

        run = uuidlib.uuid4().hex[:8]

        placement_url = f"sqlite:///{state / 'placement.sqlite'}"
        placement_engine = make_engine(placement_url, pool_size=20)
        placement_migrate.upgrade(placement_engine)
        sync_standard_names(placement_engine)
        # The in-process client (computes, scheduler) is inside the trust boundary: noauth2.
        settings = Settings(db=placement_url, auth="noauth2")
        client = InProcessPlacementClient(placement_engine, settings)
        served = settings
        if keystone is not None:
            # Keystone's admin is project-scoped, as the openstack CLI's default token is.
            served = dataclasses.replace(settings, auth="keystone", config_file=str(self.identity.authtoken_conf),
                                         enforce_scope=False)

        api_engine = make_engine(f"sqlite:///{state / 'api.sqlite'}", pool_size=20)
        api_migrate.upgrade(api_engine)
        # qcow2, as Glance serves cirros; the fake computes boot it (their default image types).
        images.put(api_engine, "cirros", name="cirros", disk_format="qcow2")
        images.put(api_engine, "avx2-image", name="avx2-image", disk_format="qcow2",
                   properties={"trait:HW_CPU_X86_AVX2": "required"})

        cell0_url = f"sqlite:///{state / 'cell0.sqlite'}"
        cell_mappings.ensure_cell(api_engine, name="cell0", database_connection=cell0_url, transport_url=None)
        cell0 = open_cell_database(cell0_url, upgrade=True)
        handles, wirings = {}, {}
        for i in range(1, a.cells + 1):
            name = f"cell{i}"
            config = CellConfig(name=name, database_url=f"sqlite:///{state / f'{name}.sqlite'}",
                                transport_url=f"memory:///{name}-{run}")
            cell_mappings.ensure_cell(api_engine, name=name, database_connection=config.database_url,
                                      transport_url=config.transport_url)
            wiring = wire_cell(config, client, upgrade=True)
            wirings[name] = wiring
            handles[name] = CellHandle(name, wiring.engine, Bus(config.transport_url))
        cells = CellCatalog(api_engine, handles, cell0)

        api_bus = Bus(f"memory:///api-{run}")
        plane = ControlPlane(api_engine=api_engine, cells=cells, placement=client, api_bus=api_bus,
                             build_attempts=a.build_attempts, catalog_refresh_s=2.0,
                             scheduler_settings=self.scheduler_settings)
        self.stops.append(plane.close)
        self.stops.append(api_bus.close)

        conductors = []
        for name, wiring in wirings.items():
            conductor = CellConductor(wiring, ConductorSettings(), name=f"conductor-{name}")
            conductor.start()
            conductors.append(conductor)
        computes = []
        per_cell: dict[str, list] = {name: [] for name in wirings}
        names = list(wirings)
        for i in range(a.computes):
            cell = names[i % len(names)]
            host = f"compute{i + 1:02d}"
            driver = FakeDriver(host, FakeConfig(vcpus=a.vcpus, memory_mb=a.memory_mb, disk_gb=a.disk_gb,
                                                 build_time_s=a.build_time, failure_rate=a.failure_rate))
            per_cell[cell].append(ComputeManager(host, driver, wirings[cell],
                                                 ComputeSettings(report_interval_s=5.0,
                                                                 update_resources_interval_s=10.0)))
        for cell, managers in per_cell.items():
            if managers:
                service = ComputeService(wirings[cell], managers)
                service.start()
                computes.append(service)
        self.stop_requests.append(lambda: [s.request_stop() for s in computes])
        self.stop_requests.append(lambda: [c.request_stop() for c in conductors])
        self.stops.append(lambda: [s.stop() for s in computes])
        self.stops.append(lambda: [c.stop() for c in conductors])
        self.stops.append(lambda: [w.close() for w in wirings.values()])
        self.stops.append(lambda: [h.bus.close() for h in handles.values()])

        from billeting.scheduler.service.runtime import SchedulerService  # noqa: F401 - the plane's

        from billeting.api.compute.errors import render_server_error as nova_errors
        from billeting.api.image.app import make_app as image_app
        from billeting.api.image.app import render_server_error as image_errors
        from billeting.placement.serve import render_server_error as placement_errors
        from billeting.scheduler.serve import render_server_error as scheduler_errors
        from billeting.serving.in_thread import ThreadedServer
        from billeting.serving.options import ServeOptions

        # The same event-loop front as `billeting serve` (timeouts, size
        # limits, errors in each service's format), in threads of this process.
        urls = {}
        compute, image = plane.app(), image_app(api_engine)
        if keystone is None:
            scheduler = scheduler_app(plane.scheduler)
        else:
            from billeting.common.keystone_auth import COMPUTE_OPEN, IMAGE_OPEN, keystone_protected

            authtoken = str(self.identity.authtoken_conf)
            compute = keystone_protected(compute, authtoken, COMPUTE_OPEN)
            image = keystone_protected(image, authtoken, IMAGE_OPEN)
            scheduler = scheduler_app(plane.scheduler, auth_strategy="keystone", config_file=authtoken)
            urls["identity"] = keystone.wait_ready(cancelled or threading.Event())
        apps = {"compute API": (compute, nova_errors), "image": (image, image_errors),
                "Placement": (placement_app(served, placement_engine), placement_errors),
                "scheduler": (scheduler, scheduler_errors)}
        for label, port in service_ports(a):
            if label == "identity":
                continue  # Keystone's own process listens there
            app, errors = apps[label]
            server = ThreadedServer(app, ServeOptions(host=a.host, port=port, threads=8, graceful_timeout=5.0,
                                                      process_name=f"up-{label.split()[0].lower()}",
                                                      render_error=errors))
            self.stops.insert(0, server.stop)
            urls[label] = server.url
        urls["state"] = str(state)
        return urls

    def _start_keystone(self, state: Path):
        """Launch Keystone (it bootstraps while the rest starts; ``start`` waits for it last)."""
        from billeting.identity.layout import Endpoints, IdentityLayout
        from billeting.identity.process import KeystoneProcess

        a = self.args
        ports = dict(service_ports(a))
        self.identity = layout = IdentityLayout.new(state, a.host, ports["identity"], getattr(a, "admin_password", None))
        layout.write()
        public = layout.public_host
        keystone = KeystoneProcess(layout, Endpoints(compute=f"http://{public}:{ports['compute API']}/v2.1",
                                                     placement=f"http://{public}:{ports['Placement']}",
                                                     image=f"http://{public}:{ports['image']}"))
        self.stops.append(keystone.stop)
        return keystone

    def stop(self) -> None:
        for stop in self.stop_requests + self.stops:
            try:
                stop()
            except Exception:  # noqa: BLE001 - stop the rest anyway
                LOG.exception("while stopping")


def service_ports(a: argparse.Namespace) -> list[tuple[str, int]]:
    ports = [("compute API", a.port_base), ("image", a.port_base + 2), ("Placement", a.port_base + 4),
             ("scheduler", a.port_base + 5)]
    if auth_strategy(a) == "keystone":
        ports.insert(1, ("identity", a.port_base + 1))
    return ports


def keystone_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("keystone") is not None


def auth_strategy(a: argparse.Namespace) -> str:
    """``--auth`` as given, else keystone when the package is there."""
    chosen = getattr(a, "auth", None)
    if chosen is None:
        chosen = a.auth = "keystone" if keystone_installed() else "noauth2"
    return chosen


def busy_port(a: argparse.Namespace) -> str | None:
    """The first port ``start`` could not bind, named with the service that
    wanted it: checked before anything starts (else every compute starts, and
    the databases are emptied, for nothing)."""
    for label, port in service_ports(a):
        try:
            common.check_listen(a.host, port)
        except common.CliError as exc:
            return f"the {label} {exc}"
    return None


def state_dir(a: argparse.Namespace) -> Path:
    import platformdirs

    return Path(a.state_dir) if a.state_dir else Path(platformdirs.user_state_dir("billeting")) / "up"


def empty_state_dir(state: Path) -> None:
    """Remove the last run's files, but not the lock file this process holds
    (a new file would be a new lock, free for a second ``billeting up``)."""
    for entry in state.iterdir():
        if entry.name == LOCK_NAME:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def usage_problem(a: argparse.Namespace) -> str | None:
    """What is wrong with the flags, checked before anything starts (a usage error, exit 2)."""
    checks = [(a.cells >= 1, "--cells must be at least 1"), (a.computes >= 0, "--computes must be at least 0"),
              (a.build_attempts >= 1, "--build-attempts must be at least 1"),
              (a.vcpus >= 1, "--vcpus must be at least 1"), (a.memory_mb >= 1, "--memory-mb must be at least 1"),
              (a.disk_gb >= 0, "--disk-gb must be at least 0"), (a.build_time >= 0, "--build-time must be at least 0"),
              (0 <= a.failure_rate <= 1, "--failure-rate must be between 0 and 1"),
              (1 <= a.port_base <= 65535 - 5, "--port-base must be between 1 and 65530 (it uses N to N+5)"),
              (a.log_level.upper() in LOG_LEVELS,
               "--log-level must be DEBUG, INFO, WARNING or ERROR"),
              (getattr(a, "auth", None) != "keystone" or keystone_installed(),
               "--auth keystone needs the keystone package: pip install 'billeting[identity]'"),
              (getattr(a, "admin_password", None) != "",
               "--admin-password must not be empty")]
    return next((text for ok, text in checks if not ok), None) or state_dir_problem(a.state_dir)


def state_dir_problem(state_dir: str | None) -> str | None:
    """``start`` empties the state directory: refuse one that holds anything
    ``billeting up`` did not write (``--state-dir ~`` must not cost a home)."""
    if state_dir is None:
        return None  # the per-user default holds nothing else
    path = Path(state_dir)
    if path.exists() and not path.is_dir():
        return f"--state-dir {state_dir} is not a directory"
    if not path.exists():
        return None
    foreign = sorted(entry.name for entry in path.iterdir()
                     if not (entry.is_file() and _STATE_FILE.match(entry.name))
                     and not (entry.is_dir() and not entry.is_symlink() and entry.name in _STATE_DIRS))
    if foreign:
        return (f"--state-dir {state_dir} holds files billeting up did not make ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}) and would be emptied: give a new or empty directory")
    return None


def cmd_up(args: argparse.Namespace) -> int:
    problem = usage_problem(args)
    if problem is not None:
        raise common.UsageError(f"billeting up: {problem}")
    common.configure_logging(args.log_level.upper())
    from billeting.config import SettingsError

    try:
        everything = AllInOne(args)
    except SettingsError as exc:
        raise common.UsageError(f"billeting up: --scheduler-config: {exc}") from None
    state = state_dir(args)
    try:
        # Held until this process exits: a second `billeting up` here would empty our databases.
        lock = StateLock.acquire(state)
    except StateDirBusy as exc:
        raise common.UsageError(f"billeting up: state directory {state} is in use by another billeting up "
                                    f"(pid {exc.pid or 'unknown'}); stop it or give another --state-dir") from None
    except OSError as exc:
        raise common.CliError(f"billeting up: cannot lock state directory {state}: {exc.strerror}") from None
    problem = busy_port(args)
    if problem is not None:
        lock.release()
        raise common.CliError(f"billeting up: {problem}")
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        urls = everything.start(done)
    except (ValueError, OSError, IdentityFailed) as exc:
        everything.stop()
        lock.release()
        raise common.CliError(f"billeting up: {exc}") from None
    keystone = everything.identity
    token_note = "" if keystone else "   (X-Auth-Token: admin)"
    print(f"compute API  {urls['compute API']}/v2.1{token_note}", flush=True)
    if keystone:
        print(f"identity     {keystone.auth_url}   (Keystone; user admin, project admin)", flush=True)
    print(f"image        {urls['image']}/v2", flush=True)
    print(f"Placement    {urls['Placement']}", flush=True)
    print(f"scheduler    {urls['scheduler']}", flush=True)
    print(f"cells        {args.cells} (+ cell0), {args.computes} fake computes; state in {urls['state']}",
          flush=True)
    if keystone:
        print(f"clouds.yaml  {keystone.clouds_yaml}; for the openstack CLI:", flush=True)
        print(f"  export OS_CLIENT_CONFIG_FILE={keystone.clouds_yaml} OS_CLOUD={CLOUD_NAME}", flush=True)
        print("  openstack server list", flush=True)
        print("or add this entry to ~/.config/openstack/clouds.yaml (its password is new at each start "
              "unless --admin-password pins it):", flush=True)
        print(textwrap.indent(keystone.clouds_yaml_text(), "  "), end="", flush=True)
    else:
        print("identity     none (--auth noauth2); pip install 'billeting[identity]' for Keystone and the "
              "openstack CLI", flush=True)
    print("ready; Ctrl-C stops", flush=True)
    done.wait()
    print("stopping", flush=True)
    everything.stop()
    lock.release()
    print("stopped", flush=True)
    return 0
