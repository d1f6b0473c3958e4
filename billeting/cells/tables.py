"""The cell database schema (SQLAlchemy Core): one set per cell, cell0 too.

What lives here is what a cell's own processes need and nothing of the API
level: instance records and their faults, compute services with their
heartbeats, compute nodes with the figures the scheduler reads, and
migration records (moves use their uuid as the Placement consumer of the
source allocation). Alembic creates exactly these tables, tracking its
revision in ``cell_alembic_version`` so a cell database can even share a
server database with Placement without the two histories colliding.

Structured values (flavor, selections, retry history) are stored as JSON
text written and read by msgspec, so no layer above sees a dict.
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
    Text,
    UniqueConstraint,
)

# Placement's conventions: constraint names and MySQL table options.
from billeting.common.db.schema import MYSQL, NAMING
VERSION_TABLE = "cell_alembic_version"

metadata = MetaData(naming_convention=NAMING)

services = Table(
    "services",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("host", String(255), nullable=False),
    Column("binary", String(64), nullable=False),
    Column("disabled", Boolean, nullable=False, default=False),
    Column("disabled_reason", String(255), nullable=True),
    # An operator's statement that the service is down, whatever its heartbeat says.
    Column("forced_down", Boolean, nullable=False, default=False),
    Column("report_count", Integer, nullable=False, default=0),
    Column("created_at", DateTime, nullable=False),
    # The heartbeat: a service is up while this is recent enough.
    Column("updated_at", DateTime, nullable=False),
    UniqueConstraint("host", "binary"),
    **MYSQL,
)

compute_nodes = Table(
    "compute_nodes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # = the root resource provider's uuid in Placement (the scheduler's join key)
    Column("uuid", String(36), nullable=False),
    Column("hypervisor_hostname", String(255), nullable=False),
    Column("host", String(255), nullable=False),
    Column("hypervisor_type", String(64), nullable=False),
    # What the hypervisor is and can run (the scheduler's capability filters);
    # NULL until a compute that reports them saves the row.
    Column("hypervisor_version", Integer, nullable=True),  # Nova's encoding: 6.2.0 is 6002000
    Column("cpu_info", Text, nullable=True),               # JSON object
    Column("supported_instances", Text, nullable=True),    # JSON list of [arch, hypervisor type, vm mode]
    Column("stats", Text, nullable=True),                  # JSON object of strings
    Column("vcpus", Integer, nullable=False, default=0),
    Column("memory_mb", Integer, nullable=False, default=0),
    Column("local_gb", Integer, nullable=False, default=0),
    Column("vcpus_used", Integer, nullable=False, default=0),
    Column("memory_mb_used", Integer, nullable=False, default=0),
    Column("local_gb_used", Integer, nullable=False, default=0),
    # Consecutive failed builds, reset by a successful one (the build-failure weigher).
    Column("failed_builds", Integer, nullable=False, default=0),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    UniqueConstraint("uuid"),
    UniqueConstraint("hypervisor_hostname"),
    Index(None, "host"),
    **MYSQL,
)

instances = Table(
    "instances",
    metadata,
    Column("uuid", String(36), primary_key=True),
    Column("name", String(255), nullable=False, default=""),
    Column("project_id", String(255), nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("vm_state", String(32), nullable=False),  # (shelved_offloaded is 17)
    Column("task_state", String(32), nullable=True),
    # Where the current build attempt was sent (None once it failed for good).
    Column("host", String(255), nullable=True),
    Column("node", String(255), nullable=True),
    Column("compute_node_uuid", String(36), nullable=True),
    Column("availability_zone", String(255), nullable=True),
    Column("flavor", Text, nullable=False),            # scheduler.nova.Flavor
    Column("image", Text, nullable=True),              # scheduler.nova.Image
    Column("request", Text, nullable=False),           # messages.RequestSummary
    Column("selection", Text, nullable=True),          # the claimed Selection of this attempt
    Column("alternates", Text, nullable=False),        # list[Selection], unclaimed
    Column("num_attempts", Integer, nullable=False, default=0),
    Column("hosts_tried", Text, nullable=False),       # list[HostNode]
    Column("last_failure", Text, nullable=True),       # why the previous attempt failed
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    Column("launched_at", DateTime, nullable=True),
    Column("deleted_at", DateTime, nullable=True),
    # A locked server refuses actions from non-admins: "owner" or "admin", and why.
    Column("locked_by", String(16), nullable=True),
    Column("locked_reason", String(255), nullable=True),
    Index(None, "host", "vm_state"),
    Index(None, "vm_state", "task_state", "updated_at"),
    Index(None, "node"),
    # Listings: newest first across all projects, and within one (see cells.listing).
    Index(None, "created_at", "uuid"),
    Index(None, "project_id", "created_at", "uuid"),
    **MYSQL,
)

instance_faults = Table(
    "instance_faults",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("instance_uuid", String(36), ForeignKey("instances.uuid"), nullable=False),
    Column("code", Integer, nullable=False),
    Column("message", String(255), nullable=False),
    Column("details", Text, nullable=False, default=""),
    Column("host", String(255), nullable=True),
    Column("created_at", DateTime, nullable=False),
    Index(None, "instance_uuid"),
    **MYSQL,
)

migrations = Table(
    "migrations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # The Placement consumer that holds the source allocation during a move.
    Column("uuid", String(36), nullable=False),
    Column("instance_uuid", String(36), nullable=False),
    Column("migration_type", String(32), nullable=False),
    Column("status", String(32), nullable=False),
    Column("source_compute", String(255), nullable=True),
    Column("source_node", String(255), nullable=True),
    Column("dest_compute", String(255), nullable=True),
    Column("dest_node", String(255), nullable=True),
    Column("old_flavor", Text, nullable=True),
    Column("new_flavor", Text, nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    UniqueConstraint("uuid"),
    Index(None, "instance_uuid"),
    Index(None, "status"),
    **MYSQL,
)

# Everything a test may wipe, children first.
ALL_TABLES = (instance_faults, migrations, instances, compute_nodes, services)
