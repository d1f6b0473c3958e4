"""SQLAlchemy Core tables of the API database (the single source of its schema).

Alembic migrations create exactly these tables; a test compares the two.
Table names never collide with Placement's, so both schemas may share one
database. Names follow Placement's conventions (naming convention, binary
collation on MySQL so names compare case-sensitively everywhere).
"""
from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# Placement's conventions: constraint names and MySQL table options.
from billeting.common.db.schema import MYSQL, NAMING

metadata = MetaData(naming_convention=NAMING)

# Kinds of aggregates the scheduler knows. A domain's or a zone's
# membership is managed by the scheduler (it writes Placement); a plain
# aggregate only carries metadata and its membership is someone else's.
KIND_DOMAIN = "domain"
KIND_ZONE = "zone"
KIND_PLAIN = "plain"
# ``aggregate_hosts.scope`` of availability-zone members (a domain's
# members use the domain's level), so a host is in one zone at most.
ZONE_SCOPE = "availability_zone"


def _timestamps() -> list[Column]:
    return [Column("created_at", DateTime), Column("updated_at", DateTime)]


# A counter bumped by every write that changes what a Directory answers, so
# every scheduler process notices another's change with one cheap read.
directory_generation = Table(
    "directory_generation",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("generation", Integer, nullable=False),
    **MYSQL,
)

aggregates = Table(
    "aggregates",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False),
    # Unique across domains, zones and named plain aggregates: "r1" names one thing.
    Column("name", String(255), nullable=True),
    Column("kind", String(16), nullable=False),
    *_timestamps(),
    UniqueConstraint("uuid"),
    UniqueConstraint("name"),
    **MYSQL,
)

aggregate_metadata = Table(
    "aggregate_metadata",
    metadata,
    Column("aggregate_id", Integer, ForeignKey("aggregates.id", ondelete="CASCADE"), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("value", String(255), nullable=False),
    Index(None, "key", "value"),
    **MYSQL,
)

# Hosts the scheduler put in an aggregate itself: the hosts a lowest-level
# domain (or a cell) was defined from, and an availability zone's hosts.
# A wider domain's hosts are not stored: they are its members' hosts.
aggregate_hosts = Table(
    "aggregate_hosts",
    metadata,
    Column("aggregate_id", Integer, ForeignKey("aggregates.id", ondelete="CASCADE"), primary_key=True),
    Column("provider_uuid", String(36), primary_key=True),  # the host's root provider
    Column("host", String(255), nullable=False),  # its name when it was added
    # The topology level, or ZONE_SCOPE: one aggregate per scope and host.
    Column("scope", String(64), nullable=False),
    UniqueConstraint("scope", "provider_uuid"),
    **MYSQL,
)

topology_domains = Table(
    "topology_domains",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("aggregate_id", Integer, ForeignKey("aggregates.id", ondelete="CASCADE"), nullable=False),
    Column("level", String(64), nullable=False),
    Column("name", String(255), nullable=False),
    # The domain one level wider that holds this one.
    Column("parent_id", Integer, ForeignKey("topology_domains.id", ondelete="SET NULL"), nullable=True),
    *_timestamps(),
    UniqueConstraint("aggregate_id"),
    UniqueConstraint("level", "name"),
    Index(None, "parent_id"),
    **MYSQL,
)

server_groups = Table(
    "server_groups",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False),
    Column("name", String(255), nullable=False),
    Column("project_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("policy", String(32), nullable=False),
    Column("max_server_per_host", Integer, nullable=True),  # anti-affinity only
    Column("scope", String(64), nullable=False),  # "host" or a topology level
    *_timestamps(),
    UniqueConstraint("uuid"),
    Index(None, "project_id"),
    **MYSQL,
)

server_group_members = Table(
    "server_group_members",
    metadata,
    Column("group_id", Integer, ForeignKey("server_groups.id", ondelete="CASCADE"), primary_key=True),
    Column("instance_uuid", String(36), primary_key=True),
    Column("created_at", DateTime),
    # An instance belongs to one group at most.
    UniqueConstraint("instance_uuid"),
    **MYSQL,
)

# The small host catalog table: what a host (or its operator) reports.
# Every column left NULL keeps what Placement and the directory say.
host_reports = Table(
    "host_reports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False),  # node name (the root provider's name)
    Column("service_host", String(255), nullable=True),
    Column("cell", String(255), nullable=True),
    Column("enabled", Boolean, nullable=True),
    Column("up", Boolean, nullable=True),
    Column("last_heartbeat", DateTime, nullable=True),
    Column("failed_builds", Integer, nullable=True),
    Column("num_instances", Integer, nullable=True),
    Column("num_io_ops", Integer, nullable=True),
    # What the hypervisor is and can run (ComputeCapabilitiesFilter, ImagePropertiesFilter).
    Column("hypervisor_type", String(255), nullable=True),
    Column("hypervisor_version", Integer, nullable=True),  # Nova's encoding: 6.2.0 is 6002000
    Column("cpu_info", Text, nullable=True),               # JSON object
    Column("supported_instances", Text, nullable=True),    # JSON list of [arch, hypervisor type, vm mode]
    Column("stats", Text, nullable=True),                  # JSON object of strings
    *_timestamps(),
    UniqueConstraint("name"),
    **MYSQL,
)

# --- the compute API's tables -------------------------------------------------------

flavors = Table(
    "flavors",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavorid", String(255), nullable=False),  # the id users see
    Column("name", String(255), nullable=False),
    Column("vcpus", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
    Column("root_gb", Integer, nullable=False),
    Column("ephemeral_gb", Integer, nullable=False),
    Column("swap", Integer, nullable=False),
    Column("rxtx_factor", Float, nullable=False),
    Column("description", Text, nullable=True),
    Column("is_public", Boolean, nullable=False),
    Column("disabled", Boolean, nullable=False),
    *_timestamps(),
    UniqueConstraint("flavorid"),
    UniqueConstraint("name"),
    **MYSQL,
)

flavor_extra_specs = Table(
    "flavor_extra_specs",
    metadata,
    Column("flavor_id", Integer, ForeignKey("flavors.id", ondelete="CASCADE"), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("value", String(255), nullable=False),
    **MYSQL,
)

# The projects a private flavor is open to (os-flavor-access).
flavor_projects = Table(
    "flavor_projects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flavor_id", Integer, ForeignKey("flavors.id", ondelete="CASCADE"), nullable=False),
    Column("project_id", String(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("flavor_id", "project_id"),
    **MYSQL,
)

# Cells: cell0 (database only) and every cell with a bus.
cell_mappings = Table(
    "cell_mappings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False),
    Column("name", String(255), nullable=False),
    Column("database_connection", Text, nullable=False),
    Column("transport_url", Text, nullable=True),
    Column("disabled", Boolean, nullable=False),
    *_timestamps(),
    UniqueConstraint("uuid"),
    UniqueConstraint("name"),
    **MYSQL,
)

host_mappings = Table(
    "host_mappings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("host", String(255), nullable=False),
    Column("cell_id", Integer, ForeignKey("cell_mappings.id", ondelete="CASCADE"), nullable=False),
    *_timestamps(),
    UniqueConstraint("host"),
    **MYSQL,
)

# The cell is NULL until the super conductor has placed the instance
# (then the chosen cell, or cell0 when it could not be scheduled).
instance_mappings = Table(
    "instance_mappings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", String(36), nullable=False),
    Column("cell_id", Integer, ForeignKey("cell_mappings.id", ondelete="SET NULL"), nullable=True),
    Column("project_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("queued_for_delete", Boolean, nullable=False),
    *_timestamps(),
    UniqueConstraint("instance_uuid"),
    Index(None, "project_id"),
    **MYSQL,
)

# What the API shows for an instance no cell holds yet.
build_requests = Table(
    "build_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", String(36), nullable=False),
    Column("project_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("flavor", Text, nullable=False),  # JSON of scheduler.nova.Flavor
    Column("image", Text, nullable=True),    # JSON of scheduler.nova.Image
    Column("availability_zone", String(255), nullable=True),
    *_timestamps(),
    UniqueConstraint("instance_uuid"),
    **MYSQL,
)

request_specs = Table(
    "request_specs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", String(36), nullable=False),
    Column("spec", Text, nullable=False),  # JSON of apidb.request_specs.StoredRequestSpec
    *_timestamps(),
    UniqueConstraint("instance_uuid"),
    **MYSQL,
)

# The small image catalog: an opaque id and the properties the scheduler reads.
images = Table(
    "images",
    metadata,
    Column("id", String(255), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("properties", Text, nullable=False),  # JSON object of str -> str
    Column("disk_format", String(255), nullable=True),  # qcow2, raw, ...; NULL: none given
    *_timestamps(),
    **MYSQL,
)

# Instance actions (create, delete, resize, ...) kept at the API level, so
# moves and deletes are recorded wherever the instance lives.
instance_actions = Table(
    "instance_actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request_id", String(255), nullable=False),
    Column("instance_uuid", String(36), nullable=False),
    Column("action", String(255), nullable=False),
    Column("project_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("message", String(255), nullable=True),
    Column("start_time", DateTime, nullable=False),
    Column("finish_time", DateTime, nullable=True),
    *_timestamps(),
    Index(None, "instance_uuid"),
    **MYSQL,
)

# Claims a scheduler is making or has made for a request not yet answered:
# a row per instance, written before the claim and removed when the answer
# is handed over. A row its process stopped renewing names claims nobody
# was told about; a live scheduler releases them (scheduler/inflight.py).
claims_in_flight = Table(
    "claims_in_flight",
    metadata,
    Column("instance_uuid", String(36), primary_key=True),
    Column("request_id", String(36), nullable=False),  # one request's rows, renewed and removed together
    Column("owner", String(255), nullable=False),      # host:pid, for the log
    Column("created_at", DateTime, nullable=False),
    Column("renewed_at", DateTime, nullable=False),
    Index(None, "request_id"),
    Index(None, "renewed_at"),
    **MYSQL,
)

# Rows users create, children first (for tests that wipe the database).
USER_DATA_TABLES = (claims_in_flight, instance_actions, images, request_specs, build_requests, instance_mappings,
                    host_mappings, cell_mappings, flavor_projects, flavor_extra_specs, flavors,
                    server_group_members, server_groups, host_reports, topology_domains,
                    aggregate_hosts, aggregate_metadata, aggregates)
