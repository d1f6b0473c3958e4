"""inventories.used: each (provider, class)'s usage kept beside its capacity

Until now every read of usage summed the allocations table, which grows with
every instance: at a fleet's fill the candidates query and the provider
summaries spent most of their time there. The column is kept in step by the
allocation writes (in their own transactions) and filled here from the
allocations already stored. The capacity index covers it on PostgreSQL, so
candidate searches stay index-only.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

_CAPACITY = ['total', 'reserved', 'min_unit', 'max_unit', 'step_size', 'allocation_ratio']


def upgrade() -> None:
    op.add_column('inventories', sa.Column('used', sa.BigInteger(), nullable=False, server_default='0'))
    op.execute(
        "UPDATE inventories SET used = (SELECT COALESCE(SUM(a.used), 0) FROM allocations a"
        " WHERE a.resource_provider_id = inventories.resource_provider_id"
        " AND a.resource_class_id = inventories.resource_class_id)")
    if op.get_bind().dialect.name == 'postgresql':
        _capacity_index(_CAPACITY + ['used'])


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        _capacity_index(_CAPACITY)
    op.drop_column('inventories', 'used')


def _capacity_index(covered: list[str]) -> None:
    op.drop_index('ix_inventories_class_capacity', table_name='inventories')
    op.create_index('ix_inventories_class_capacity', 'inventories', ['resource_class_id', 'resource_provider_id'],
                    postgresql_include=covered)
