"""Settings of ``billeting scheduler serve``: one object, built once.

Precedence, highest first: flags, ``BILLETING_SCHEDULER_*`` environment
variables, the INI config file (``--config-file``), defaults. The file
sections are the scheduler's own, so one file can configure Placement
(``[api]``, ``[database]``) and the scheduler side by side:

    [scheduler_api]       host, port, workers, threads, auth_strategy
    [scheduler_database]  connection
    [placement]           endpoint, connection, token (+ keystoneauth options)
    [messaging]           transport_url
    [scheduler]           topology_levels, max_placement_results, default_cell, catalog_refresh_s,
                          service_down_time, orphaned_claims_grace_s, limit_tenants_to_placement_aggregate,
                          placement_aggregate_required_for_tenants,
                          enable_isolated_aggregate_filtering, image_metadata_prefilter,
                          query_placement_for_image_type_support, coalesce_requests
    [filter_scheduler]    enabled_filters, weighers, host_subset_size,
                          shuffle_best_same_weighed_hosts, alternates_from (spread|next),
                          candidate_sample (adaptive|all|N),
                          max_instances_per_host, max_io_ops_per_host,
                          image_properties_default_architecture, <name>_weight_multiplier
    [oslo_policy]         policy_file
    [billeting]           log_level, legacy_policy, auto_upgrade
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields

from billeting.config import LOG_LEVELS, SettingsError, convert_setting, read_config_file
from billeting.scheduler.settings import DEFAULT_MULTIPLIERS, SchedulerSettings
from billeting.serving.options import MAX_THREADS, MAX_WORKERS

DEFAULT_PORT = 8780
DEFAULT_PLACEMENT_URL = "http://127.0.0.1:8778"
ENV_PREFIX = "BILLETING_SCHEDULER_"


@dataclass
class ServiceConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    workers: int = 1
    threads: int = 4
    db: str = ""  # empty: the embedded SQLite file
    auto_upgrade: bool = False
    placement_url: str = DEFAULT_PLACEMENT_URL
    placement_db: str = ""  # set: run Placement in-process on this database instead
    placement_token: str = "admin"
    transport_url: str = ""  # set: also serve the scheduler RPC topic on this bus
    rpc_threads: int = 4
    auth: str = "noauth2"
    policy_file: str | None = None
    legacy_policy: bool = False
    config_file: str | None = None
    log_level: str = "INFO"
    topology_levels: list[str] = field(default_factory=lambda: ["rack", "row", "room"])
    max_placement_results: int = 1000
    default_cell: str = "cell1"
    catalog_refresh_s: float = 60.0
    service_down_time: float = 60.0
    # Claims of a request whose scheduler stopped before answering are
    # released once its record went this long without renewal (``inflight``).
    orphaned_claims_grace_s: float = 60.0
    directory_check_s: float = 1.0
    limit_tenants_to_placement_aggregate: bool = False
    placement_aggregate_required_for_tenants: bool = False
    enable_isolated_aggregate_filtering: bool = False
    image_metadata_prefilter: bool = False
    query_placement_for_image_type_support: bool = False
    coalesce_requests: bool = True
    enabled_filters: list[str] = field(default_factory=list)  # empty: every built-in filter
    weighers: list[str] = field(default_factory=list)  # empty: every built-in weigher
    host_subset_size: int = 1
    shuffle_best_same_weighed_hosts: bool = False
    alternates_from: str = "spread"
    candidate_sample: str = "adaptive"
    max_instances_per_host: int = 50
    max_io_ops_per_host: int = 8
    image_properties_default_architecture: str = ""  # empty: none
    multipliers: dict[str, float] = field(default_factory=dict)

    def scheduler_settings(self) -> SchedulerSettings:
        return SchedulerSettings(
            max_placement_results=self.max_placement_results, default_cell=self.default_cell,
            topology_levels=tuple(self.topology_levels), catalog_refresh_s=self.catalog_refresh_s,
            limit_tenants_to_placement_aggregate=self.limit_tenants_to_placement_aggregate,
            placement_aggregate_required_for_tenants=self.placement_aggregate_required_for_tenants,
            enable_isolated_aggregate_filtering=self.enable_isolated_aggregate_filtering,
            image_metadata_prefilter=self.image_metadata_prefilter,
            query_placement_for_image_type_support=self.query_placement_for_image_type_support,
            coalesce_requests=self.coalesce_requests,
            enabled_filters=tuple(self.enabled_filters) or None, weighers=tuple(self.weighers) or None,
            multipliers={**DEFAULT_MULTIPLIERS, **self.multipliers}, host_subset_size=self.host_subset_size,
            shuffle_best_same_weighed_hosts=self.shuffle_best_same_weighed_hosts,
            alternates_from=self.alternates_from, candidate_sample=self.candidate_sample,
            max_instances_per_host=self.max_instances_per_host,
            max_io_ops_per_host=self.max_io_ops_per_host,
            image_properties_default_architecture=self.image_properties_default_architecture.strip() or None)


_FILE_KEYS = {
    "scheduler_api.host": "host", "scheduler_api.port": "port", "scheduler_api.workers": "workers",
    "scheduler_api.threads": "threads", "scheduler_api.auth_strategy": "auth",
    "scheduler_database.connection": "db", "placement.endpoint": "placement_url",
    "placement.connection": "placement_db", "placement.token": "placement_token",
    "messaging.transport_url": "transport_url", "messaging.rpc_threads": "rpc_threads",
    "oslo_policy.policy_file": "policy_file", "billeting.log_level": "log_level",
    "billeting.legacy_policy": "legacy_policy", "billeting.auto_upgrade": "auto_upgrade",
    "scheduler.topology_levels": "topology_levels", "scheduler.max_placement_results": "max_placement_results",
    "scheduler.default_cell": "default_cell", "scheduler.catalog_refresh_s": "catalog_refresh_s",
    "scheduler.service_down_time": "service_down_time", "scheduler.directory_check_s": "directory_check_s",
    "scheduler.orphaned_claims_grace_s": "orphaned_claims_grace_s",
    "scheduler.limit_tenants_to_placement_aggregate": "limit_tenants_to_placement_aggregate",
    "scheduler.placement_aggregate_required_for_tenants": "placement_aggregate_required_for_tenants",
    "scheduler.enable_isolated_aggregate_filtering": "enable_isolated_aggregate_filtering",
    "scheduler.image_metadata_prefilter": "image_metadata_prefilter",
    "scheduler.query_placement_for_image_type_support": "query_placement_for_image_type_support",
    "scheduler.coalesce_requests": "coalesce_requests",
    "filter_scheduler.enabled_filters": "enabled_filters", "filter_scheduler.weighers": "weighers",
    "filter_scheduler.host_subset_size": "host_subset_size",
    "filter_scheduler.shuffle_best_same_weighed_hosts": "shuffle_best_same_weighed_hosts",
    "filter_scheduler.alternates_from": "alternates_from",
    "filter_scheduler.candidate_sample": "candidate_sample",
    "filter_scheduler.max_instances_per_host": "max_instances_per_host",
    "filter_scheduler.max_io_ops_per_host": "max_io_ops_per_host",
    "filter_scheduler.image_properties_default_architecture": "image_properties_default_architecture",
}
_TYPES = {f.name: f.type for f in fields(ServiceConfig)}


def _convert(name: str, raw: str) -> object:
    return convert_setting(name, _TYPES[name], raw)


def load(flags: dict[str, object], environ: dict[str, str] | None = None) -> ServiceConfig:
    environ = os.environ if environ is None else environ
    config = ServiceConfig()
    config_file = flags.get("config_file") or environ.get(ENV_PREFIX + "CONFIG_FILE") \
        or environ.get("BILLETING_CONFIG_FILE")
    if config_file:
        config.config_file = str(config_file)
        # One line naming the file (and line) for a missing, binary or malformed file, as for serve.
        parser = read_config_file(str(config_file))
        for key, attr in _FILE_KEYS.items():
            section, option = key.split(".")
            if parser.has_option(section, option):
                setattr(config, attr, _convert(attr, parser.get(section, option)))
        if parser.has_section("filter_scheduler"):
            for option, value in parser.items("filter_scheduler"):
                if option.endswith("_weight_multiplier"):
                    try:
                        number = float(value)
                    except ValueError:
                        number = math.nan
                    if not math.isfinite(number):
                        raise SettingsError(f"invalid value for {option}: {value!r} (a finite number)")
                    config.multipliers[option] = number
    for f in fields(ServiceConfig):
        env_name = ENV_PREFIX + f.name.upper()
        if env_name in environ and f.name not in ("config_file", "multipliers"):
            setattr(config, f.name, _convert(f.name, environ[env_name]))
    for name, value in flags.items():
        if value is not None and hasattr(config, name):
            setattr(config, name, value)
    check(config)
    return config


def check(config: ServiceConfig) -> None:
    if config.auth not in ("noauth2", "keystone"):
        raise SettingsError(f"auth must be noauth2 or keystone, not {config.auth!r}")
    if not 1 <= config.port <= 65535:
        raise SettingsError(f"port must be between 1 and 65535, not {config.port}")
    for name in ("workers", "threads", "rpc_threads", "host_subset_size", "max_placement_results"):
        if getattr(config, name) < 1:
            raise SettingsError(f"{name} must be at least 1, not {getattr(config, name)}")
    for name, most in (("workers", MAX_WORKERS), ("threads", MAX_THREADS)):
        if getattr(config, name) > most:
            raise SettingsError(f"{name} must be at most {most}, not {getattr(config, name)}")
    for name in ("catalog_refresh_s", "service_down_time", "directory_check_s"):
        if getattr(config, name) < 0:
            raise SettingsError(f"{name} must not be negative")
    if not config.placement_db:
        from billeting.placement_client.transport import check_url

        try:
            check_url(config.placement_url)
        except ValueError:
            raise SettingsError(f"placement_url {config.placement_url!r}: expected http://HOST:PORT or "
                                "https://HOST[:PORT][/PATH]") from None
    if not config.orphaned_claims_grace_s > 0:
        raise SettingsError("orphaned_claims_grace_s must be positive")
    config.log_level = str(config.log_level).upper()
    if config.log_level not in LOG_LEVELS:
        raise SettingsError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
    try:
        config.scheduler_settings().check()
        from billeting.scheduler import filters, weighers

        filters.build(tuple(config.enabled_filters) or None)
        weighers.build(tuple(config.weighers) or None)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
