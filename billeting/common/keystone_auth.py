"""keystonemiddleware in front of a service (every API under ``--auth keystone``, and the all-in-one's).

The same ``auth_token`` layer production runs, reading its
``[keystone_authtoken]`` section from the file given through a private
oslo.config object (never the global ``cfg.CONF``, which a Keystone in this
process would own). The version documents stay open, as in Nova and
Glance: clients read them before they have a token.
"""
from __future__ import annotations

# What each API lets through without a token: its version documents and,
# for the compute API, the metrics scrape (scrapers carry no token).
# Placement and the scheduler API open their root document only
# (billeting.common.http.auth.ROOT_PATHS).
COMPUTE_OPEN = frozenset({"", "/", "/v2.1", "/v2.1/", "/v2", "/v2/", "/metrics"})
IMAGE_OPEN = frozenset({"", "/", "/v2", "/v2/"})


def keystone_protected(app, config_file: str | None, open_paths: frozenset[str]):
    from keystonemiddleware import auth_token
    from oslo_config import cfg

    class _OpenVersions(auth_token.AuthProtocol):
        def __call__(self, environ, start_response):
            if environ.get("PATH_INFO", "") in open_paths:
                return self._app(environ, start_response)
            return super().__call__(environ, start_response)

    conf = cfg.ConfigOpts()
    # Only the named file: never files found by oslo.config's default search.
    conf([], project="billeting", default_config_files=[config_file] if config_file else [])
    return _OpenVersions(app, {"oslo_config_config": conf})
