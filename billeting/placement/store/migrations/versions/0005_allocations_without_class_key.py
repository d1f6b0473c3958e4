"""allocations: no foreign key to resource_classes

Every allocation row a claim inserted was checked against resource_classes:
an index probe per row (two rows read for each) and, on PostgreSQL, a
FOR KEY SHARE lock on the class row, which every concurrent claim takes on
the same few rows (VCPU, MEMORY_MB, DISK_GB): shared locks held by several
transactions at once become multixacts, work that grows with concurrency.
The key guarded nothing the write path does not already guarantee: an
allocation is admitted only where an inventory of its class exists, in the
same snapshot that compare-and-sets the provider's generation, and every
inventory has its own foreign key to the class (a class in use in an
inventory cannot be deleted). The index on resource_class_id stays.

Revision ID: 0005
Revises: 0004
"""
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

_NAME = 'fk_allocations_resource_class_id_resource_classes'


def upgrade() -> None:
    # (SQLite cannot drop a constraint: batch mode rebuilds the table)
    with op.batch_alter_table('allocations') as batch:
        batch.drop_constraint(_NAME, type_='foreignkey')


def downgrade() -> None:
    with op.batch_alter_table('allocations') as batch:
        batch.create_foreign_key(_NAME, 'resource_classes', ['resource_class_id'], ['id'])
