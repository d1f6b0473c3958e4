"""instance lifecycle: longer vm states (shelved_offloaded), the lock columns

Revision ID: 0003
Revises: 0002

"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.alter_column('vm_state', existing_type=sa.String(16), type_=sa.String(32), existing_nullable=False)
        batch.add_column(sa.Column('locked_by', sa.String(16), nullable=True))
        batch.add_column(sa.Column('locked_reason', sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('instances') as batch:
        batch.drop_column('locked_reason')
        batch.drop_column('locked_by')
        batch.alter_column('vm_state', existing_type=sa.String(32), type_=sa.String(16), existing_nullable=False)
