"""listing indexes: instances by creation time (and uuid), within a project too

Revision ID: 0004
Revises: 0003

A page of a listing reads the first rows of each cell in the listing's
order after the marker: with these, the default order (newest first) is an
index range scan whatever the cell holds.
"""
from alembic import op


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f('ix_instances_created_at_uuid'), 'instances', ['created_at', 'uuid'], unique=False)
    op.create_index(op.f('ix_instances_project_id_created_at_uuid'), 'instances',
                    ['project_id', 'created_at', 'uuid'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_instances_project_id_created_at_uuid'), table_name='instances')
    op.drop_index(op.f('ix_instances_created_at_uuid'), table_name='instances')
