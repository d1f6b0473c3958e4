"""SQLAlchemy Core table definitions: the single source of the schema.

Alembic migrations create exactly these tables; tests compare the two.
Internal integer ids never leave the service. MySQL tables use a binary
collation so names compare case-sensitively, as they do on the other
backends; migration 0003 moves the tables with string columns to a NO PAD
binary collation, so that trailing spaces count there too.
"""
from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from billeting.common.db.schema import MYSQL, NAMING

metadata = MetaData(naming_convention=NAMING)

# Custom resource classes are numbered from here; standard ones use their
# index in os_resource_classes.STANDARDS.
CUSTOM_RC_START_ID = 10000


def _timestamps() -> list[Column]:
    return [Column("created_at", DateTime), Column("updated_at", DateTime)]


resource_providers = Table(
    "resource_providers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False),
    Column("name", String(200), nullable=False),
    Column("generation", Integer, nullable=False, default=0),
    Column("root_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=True),
    Column("parent_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=True),
    *_timestamps(),
    # Every inventory of the provider with its usage, as one text, kept in
    # step by every inventory and usage write (placement/stock.py): a sampled
    # candidate search reads one row per provider. NULL: read the inventories.
    Column("stock", Text, nullable=True),
    UniqueConstraint("uuid"),
    UniqueConstraint("name"),
    Index(None, "root_provider_id"),
    Index(None, "parent_provider_id"),
    **MYSQL,
)

resource_classes = Table(
    "resource_classes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", String(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("name"),
    **MYSQL,
)

# What the capacity test reads of an inventory row (covered by its class index).
INVENTORY_CAPACITY_COLUMNS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio", "used")

inventories = Table(
    "inventories",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("resource_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=False),
    Column("resource_class_id", Integer, ForeignKey("resource_classes.id"), nullable=False),
    Column("total", BigInteger, nullable=False),
    Column("reserved", BigInteger, nullable=False),
    Column("min_unit", BigInteger, nullable=False),
    Column("max_unit", BigInteger, nullable=False),
    Column("step_size", BigInteger, nullable=False),
    Column("allocation_ratio", Double, nullable=False),
    # The sum of the allocations of this (provider, class), kept in step by
    # every allocation write in the same transaction (allocations.py), so
    # that reads ask one row instead of summing a table that grows with
    # every instance. Allocations stay the truth: admission sums them.
    Column("used", BigInteger, nullable=False, server_default="0"),
    *_timestamps(),
    UniqueConstraint("resource_provider_id", "resource_class_id"),
    # Candidate searches read every inventory of a class: on PostgreSQL this
    # index holds all the columns the capacity test needs (index-only scans).
    Index("ix_inventories_class_capacity", "resource_class_id", "resource_provider_id",
          postgresql_include=list(INVENTORY_CAPACITY_COLUMNS)),
    **MYSQL,
)

traits = Table(
    "traits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("name"),
    **MYSQL,
)

resource_provider_traits = Table(
    "resource_provider_traits",
    metadata,
    Column("resource_provider_id", Integer, ForeignKey("resource_providers.id"), primary_key=True),
    Column("trait_id", Integer, ForeignKey("traits.id"), primary_key=True),
    *_timestamps(),
    Index(None, "trait_id"),
    **MYSQL,
)

placement_aggregates = Table(
    "placement_aggregates",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False),
    *_timestamps(),
    UniqueConstraint("uuid"),
    **MYSQL,
)

resource_provider_aggregates = Table(
    "resource_provider_aggregates",
    metadata,
    Column("resource_provider_id", Integer, ForeignKey("resource_providers.id"), primary_key=True),
    Column("aggregate_id", Integer, ForeignKey("placement_aggregates.id"), primary_key=True),
    *_timestamps(),
    Index(None, "aggregate_id"),
    **MYSQL,
)

projects = Table(
    "projects",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("external_id", String(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("external_id"),
    **MYSQL,
)

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("external_id", String(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("external_id"),
    **MYSQL,
)

consumer_types = Table(
    "consumer_types",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False),
    *_timestamps(),
    UniqueConstraint("name"),
    **MYSQL,
)

consumers = Table(
    "consumers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("generation", Integer, nullable=False, default=0),
    Column("consumer_type_id", Integer, ForeignKey("consumer_types.id"), nullable=True),
    *_timestamps(),
    UniqueConstraint("uuid"),
    Index(None, "project_id", "user_id"),
    Index(None, "consumer_type_id"),
    **MYSQL,
)

allocations = Table(
    "allocations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("resource_provider_id", Integer, ForeignKey("resource_providers.id"), nullable=False),
    Column("consumer_id", Integer, ForeignKey("consumers.id"), nullable=False),
    # No foreign key to resource_classes: admission requires an inventory of
    # the class, which has its own (migration 0005 says why).
    Column("resource_class_id", Integer, nullable=False),
    Column("used", BigInteger, nullable=False),
    *_timestamps(),
    Index(None, "resource_provider_id", "resource_class_id", "used"),
    Index(None, "consumer_id"),
    Index(None, "resource_class_id"),
    **MYSQL,
)

# Tables whose rows belong to users (everything but the synced standard names).
USER_DATA_TABLES = (
    allocations,
    consumers,
    consumer_types,
    projects,
    users,
    resource_provider_aggregates,
    placement_aggregates,
    resource_provider_traits,
    inventories,
)
