"""claims in flight: the scheduler's record of claims of requests not yet answered

Revision ID: 0006
Revises: 0005

"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'claims_in_flight',
        sa.Column('instance_uuid', sa.String(length=36), nullable=False),
        sa.Column('request_id', sa.String(length=36), nullable=False),
        sa.Column('owner', sa.String(length=255), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('renewed_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('instance_uuid', name=op.f('pk_claims_in_flight')),
        mysql_engine='InnoDB', mysql_charset='utf8mb4', mysql_collate='utf8mb4_bin',
    )
    op.create_index(op.f('ix_claims_in_flight_request_id'), 'claims_in_flight', ['request_id'])
    op.create_index(op.f('ix_claims_in_flight_renewed_at'), 'claims_in_flight', ['renewed_at'])


def downgrade() -> None:
    op.drop_index(op.f('ix_claims_in_flight_renewed_at'), table_name='claims_in_flight')
    op.drop_index(op.f('ix_claims_in_flight_request_id'), table_name='claims_in_flight')
    op.drop_table('claims_in_flight')
