"""inventories: an index by class that covers the admission test

Candidate searches read every inventory of the requested classes. With the
capacity columns in the index (PostgreSQL INCLUDE), PostgreSQL answers them
with index-only scans instead of visiting the table's pages. It leads with
resource_class_id, so it replaces the single-column index (which MySQL's
foreign key may then use instead).

Revision ID: 0002
Revises: 0001
"""
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

_CAPACITY = ['total', 'reserved', 'min_unit', 'max_unit', 'step_size', 'allocation_ratio']


def upgrade() -> None:
    op.create_index('ix_inventories_class_capacity', 'inventories', ['resource_class_id', 'resource_provider_id'],
                    postgresql_include=_CAPACITY)
    op.drop_index('ix_inventories_resource_class_id', table_name='inventories')


def downgrade() -> None:
    op.create_index('ix_inventories_resource_class_id', 'inventories', ['resource_class_id'])
    op.drop_index('ix_inventories_class_capacity', table_name='inventories')
