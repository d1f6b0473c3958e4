"""compute node capabilities: hypervisor version, cpu_info, supported_instances, stats

Revision ID: 0002
Revises: 0001

"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

COLUMNS = (
    ('hypervisor_version', sa.Integer()),
    ('cpu_info', sa.Text()),
    ('supported_instances', sa.Text()),
    ('stats', sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table('compute_nodes') as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('compute_nodes') as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
