"""image disk format: what a compute's driver must be able to boot (request filter 3)

Revision ID: 0004
Revises: 0003

"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: images added before this revision have no format, and ask for none.
    with op.batch_alter_table('images') as batch:
        batch.add_column(sa.Column('disk_format', sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('images') as batch:
        batch.drop_column('disk_format')
