"""Serve the scheduler: its HTTP API and, with a transport URL, its RPC topic.

Each worker process builds everything after the fork (``load_app``): its
API-database engine, its Placement client, its ``SchedulerService`` and,
when ``transport_url`` is set, an RPC server on the ``scheduler`` topic,
so ``--workers 4`` is four schedulers competing for one queue.
"""
from __future__ import annotations

import functools
import logging

from billeting.scheduler.service.config import ServiceConfig

LOG = logging.getLogger("billeting")


def render_server_error(status: int, code: str, detail: str):
    """Errors the HTTP server answers itself (malformed, too large, too slow),
    in Placement's document like every scheduler API error, always with a
    code: ``billeting.request_too_large``, ``billeting.header_timeout``, ..."""
    from billeting.common.http.auth import new_request_id
    from billeting.common.http.errors import error_document
    from billeting.serving import ErrorBody

    request_id = new_request_id()
    return ErrorBody("application/json", error_document(status, detail, request_id, code=f"billeting.{code}"),
                     (("x-openstack-request-id", request_id),))


def placement_client(config: ServiceConfig):
    """In-process Placement on ``placement_db``, or HTTP to ``placement_url``
    (a static token for noauth2, or keystoneauth from ``[placement]``)."""
    if config.placement_db:
        from billeting.config import Settings
        from billeting.common.db.engine import make_engine
        from billeting.placement_client.inprocess import InProcessPlacementClient

        engine = make_engine(config.placement_db, pool_size=max(2, config.threads + config.rpc_threads))
        return InProcessPlacementClient(engine, Settings(db=config.placement_db))
    from billeting.placement_client import Auth, HttpTransport, PlacementClient

    return PlacementClient(HttpTransport(config.placement_url), auth=keystone_auth(config) or Auth(
        config.placement_token))


def keystone_auth(config: ServiceConfig):
    """A keystoneauth session from the config file's ``[placement]`` section
    (``auth_type``, ``auth_url``, ``username`` ...), when it names an auth type."""
    import configparser

    if not config.config_file:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(config.config_file)
    if not parser.has_option("placement", "auth_type"):
        return None
    from keystoneauth1 import loading
    from oslo_config import cfg

    from billeting.placement_client import KeystoneAuth

    conf = cfg.ConfigOpts()
    loading.register_auth_conf_options(conf, "placement")
    loading.register_session_conf_options(conf, "placement")
    conf([], project="billeting", default_config_files=[config.config_file])
    auth = loading.load_auth_from_conf_options(conf, "placement")
    return KeystoneAuth(loading.load_session_from_conf_options(conf, "placement", auth=auth))


def api_db_url(config: ServiceConfig) -> str:
    from billeting.apidb.engine import default_url

    return config.db or default_url()


def build_service(config: ServiceConfig):
    from billeting.apidb.engine import make_engine, normalize_url
    from billeting.scheduler.inflight import InFlight
    from billeting.scheduler.service.runtime import SchedulerService

    url = api_db_url(config)
    engine = make_engine(url, pool_size=max(2, config.threads + config.rpc_threads))
    # The very SQLite file of an in-process Placement: a group's decision
    # must not hold that file's write lock while claiming in it.
    shared_sqlite = bool(config.placement_db) and url.startswith("sqlite") and \
        normalize_url(url) == normalize_url(config.placement_db)
    client = placement_client(config)
    # Every scheduler process records its claims in flight and sweeps those
    # of processes that died before answering.
    inflight = InFlight(engine, client, grace_s=config.orphaned_claims_grace_s)
    inflight.start()
    reports = cell_reports(engine, config)
    service = SchedulerService(client, engine, config.scheduler_settings(),
                               down_after_s=config.service_down_time, directory_check_s=config.directory_check_s,
                               group_lock_in_process=shared_sqlite, reports=reports, inflight=inflight)
    if reports is not None:
        from billeting.conductor.cell_reports import refresh_on_recovery

        # A cell back: its hosts' records (shown down meanwhile) are read again now.
        refresh_on_recovery(reports.cells.health, service.catalog.invalidate)
    return service


def cell_reports(engine, config: ServiceConfig):
    """With cells mapped in the API database (a distributed deployment), host
    records come from the cell databases as in the all-in-one: which cell a
    host is in, whether its compute is up and enabled, its failed builds.
    Cells mapped after the start are seen after a restart. None: the API
    database's host-report table alone."""
    from billeting.apidb import cell_mappings, migrate

    try:
        if migrate.current_revision(engine) is None or not cell_mappings.listing(engine):
            return None
    except Exception:  # noqa: BLE001 - an API database without the tables yet
        return None
    from billeting.apidb.cell_directory import CellCatalog
    from billeting.apidb.host_reports import HostReportLoader
    from billeting.conductor.cell_reports import CellHostReports

    cells = CellCatalog.open(engine)
    LOG.info("host records from cell(s) %s", ", ".join(sorted(cells.cells())) or "none")
    return CellHostReports(engine, cells, base=HostReportLoader(engine, down_after_s=config.service_down_time),
                           down_time_s=config.service_down_time)


def load_app(config: ServiceConfig):
    """Runs in each worker after the fork."""
    from billeting.scheduler.api.app import make_app

    service = build_service(config)
    if config.transport_url:
        from billeting.messaging import Bus
        from billeting.scheduler import rpc

        rpc.serve(Bus(config.transport_url), service, threads=config.rpc_threads)
    return make_app(service, auth_strategy=config.auth, config_file=config.config_file,
                    policy_file=config.policy_file, legacy_policy=config.legacy_policy)


def run(config: ServiceConfig) -> None:
    """Serve the scheduler API (and its RPC topic) until a signal. Workers
    share one directory of metric files (``GET /metrics`` adds them up),
    which the master removes when it stops."""
    from billeting.serving import ServeOptions, metrics
    from billeting.serving import run as serve_http

    serve_http(ServeOptions(host=config.host, port=config.port, workers=config.workers, threads=config.threads,
                            log_level=config.log_level, process_name="billeting-scheduler",
                            on_ready=lambda url: LOG.info("ready: %s", url), render_error=render_server_error,
                            **metrics.master_hooks(LOG)),
               functools.partial(load_app, config))
