"""The Keystone child of ``billeting up``: bootstrap, then serve until told to stop.

    python -m billeting.identity.keystone_server --config-file F --host H --port P \
        --compute-url U --placement-url U --image-url U

The admin password comes in ``BILLETING_IDENTITY_PASSWORD`` (not argv, which
``ps`` shows). One interpreter does what ``keystone-manage db_sync``,
``fernet_setup`` and ``bootstrap`` would do in three, then registers the
all-in-one's services in the catalog and serves Keystone's own WSGI app
through the same front as every other Billeting service. It prints
``ready URL`` once it answers, and exits when its stdin closes (the parent
stopped or died: no orphan keeps the port) or on SIGTERM.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
import uuid
import warnings

import orjson

PASSWORD_ENV = "BILLETING_IDENTITY_PASSWORD"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m billeting.identity.keystone_server")
    p.add_argument("--config-file", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--public-url", required=True, help="Keystone's own URL in the catalog (ends in /v3)")
    p.add_argument("--region", required=True)
    p.add_argument("--compute-url", required=True)
    p.add_argument("--placement-url", required=True)
    p.add_argument("--image-url", required=True)
    return p


def _configure(config_file: str) -> None:
    """``keystone.server.configure``, but with no command line of its own to
    parse (that one reads sys.argv, which holds ours)."""
    import keystone.conf
    from keystone.common import sql

    keystone.conf.configure()
    sql.initialize()
    keystone.conf.set_config_defaults()
    keystone.conf.CONF(args=[], project="keystone", default_config_files=[config_file])
    keystone.conf.setup_logging()
    # Keystone logs every migration and key at INFO; its log file keeps warnings.
    logging.getLogger().setLevel(logging.WARNING)


def _bootstrap(args: argparse.Namespace, password: str) -> None:
    """A fresh database, key repositories, the admin user, project and roles,
    and the catalog (identity, compute, placement, image)."""
    import keystone.conf
    from keystone.cmd.bootstrap import Bootstrapper
    from keystone.common import fernet_utils, provider_api
    from keystone.common.sql import upgrades

    conf = keystone.conf.CONF
    upgrades.offline_sync_database_to_version()
    # (keystone-manage credential_setup keeps three credential keys: no option sets it)
    for group, active in (("fernet_tokens", conf.fernet_tokens.max_active_keys),
                          ("fernet_receipts", conf.fernet_receipts.max_active_keys), ("credential", 3)):
        keys = fernet_utils.FernetUtils(getattr(conf, group).key_repository, active, group)
        keys.create_key_directory(None, None)
        if keys.validate_key_repository(requires_write=True):
            keys.initialize_key_repository(None, None)
    boot = Bootstrapper()  # (loads Keystone's backends, once per process)
    boot.admin_username, boot.admin_password, boot.project_name = "admin", password, "admin"
    boot.admin_role_name, boot.service_name = "admin", "keystone"
    boot.region_id, boot.public_url = args.region, args.public_url
    boot.immutable_roles = True
    boot.bootstrap()
    catalog = provider_api.ProviderAPIs.catalog_api
    for kind, name, url in (("compute", "nova", args.compute_url), ("placement", "placement", args.placement_url),
                            ("image", "glance", args.image_url)):
        service_id = uuid.uuid4().hex
        catalog.create_service(service_id, {"id": service_id, "name": name, "type": kind, "enabled": True})
        endpoint_id = uuid.uuid4().hex
        catalog.create_endpoint(endpoint_id, {"id": endpoint_id, "interface": "public", "url": url,
                                              "service_id": service_id, "region_id": args.region,
                                              "enabled": True})


def _application():
    """Keystone's WSGI app, as ``keystone.server.flask.core.initialize_application``
    builds it after configuration (done already, with the backends loaded)."""
    from keystone.server.flask import application, core

    return core.setup_app_middleware(application.application_factory("public"))


def render_error(status: int, code: str, detail: str):
    """Errors the HTTP front answers itself, in Keystone's error format."""
    from billeting.serving.options import ErrorBody, reason_phrase

    body = {"error": {"code": status, "title": reason_phrase(status), "message": detail}}
    return ErrorBody("application/json", orjson.dumps(body))


def _exit_with_parent() -> None:
    """Exit the moment stdin reaches EOF: the parent closed it to stop us,
    or died. Started first, so a parent killed mid-bootstrap leaves no Keystone."""

    def watch() -> None:
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _exit_with_parent()
    # oslo.service imports eventlet only to warn that it is deprecated; nothing here uses it.
    warnings.filterwarnings("ignore", message=".*[Ee]ventlet")
    password = os.environ.pop(PASSWORD_ENV, "")
    if not password:
        print(f"{PASSWORD_ENV} is not set", file=sys.stderr)
        return 2
    from billeting.serving.in_thread import ThreadedServer
    from billeting.serving.options import ServeOptions

    began = time.monotonic()
    _configure(args.config_file)
    configured = time.monotonic()
    _bootstrap(args, password)
    bootstrapped = time.monotonic()
    app = _application()
    # One line in keystone.log: where a slow first start went.
    print(f"keystone: configured in {configured - began:.1f} s, bootstrapped in {bootstrapped - configured:.1f} s, "
          f"app built in {time.monotonic() - bootstrapped:.1f} s", file=sys.stderr, flush=True)
    server = ThreadedServer(app, ServeOptions(host=args.host, port=args.port, threads=8,
                                                         graceful_timeout=2.0, process_name="up-identity",
                                                         render_error=render_error))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(f"ready {server.url}", flush=True)
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    # os._exit: Keystone's libraries leave non-daemon threads behind that would keep a finished process alive.
    try:
        code = main()
    except BaseException:  # noqa: BLE001 - logged by Keystone's handler, then gone
        import traceback

        traceback.print_exc()
        code = 1
    sys.stderr.flush()
    os._exit(code)
