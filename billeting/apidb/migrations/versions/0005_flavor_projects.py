"""flavor projects: the projects a private flavor is open to (os-flavor-access)

Revision ID: 0005
Revises: 0004

"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('flavor_projects',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('flavor_id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'], name=op.f('fk_flavor_projects_flavor_id_flavors'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavor_projects')),
    sa.UniqueConstraint('flavor_id', 'project_id', name=op.f('uq_flavor_projects_flavor_id_project_id')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )


def downgrade() -> None:
    op.drop_table('flavor_projects')
