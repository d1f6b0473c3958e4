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
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
MYSQL = {"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin", "mysql_engine": "InnoDB"}

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
    *_timestamps(),
    UniqueConstraint("name"),
    **MYSQL,
)

# Rows users create, children first (for tests that wipe the database).
USER_DATA_TABLES = (server_group_members, server_groups, host_reports, topology_domains,
                    aggregate_hosts, aggregate_metadata, aggregates)
