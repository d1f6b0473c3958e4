"""compute api tables: flavors, cells, mappings, build requests, request specs, images, instance actions

Revision ID: 0002
Revises: 0001

"""
from alembic import op
import sqlalchemy as sa


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('build_requests',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('flavor', sa.Text(), nullable=False),
    sa.Column('image', sa.Text(), nullable=True),
    sa.Column('availability_zone', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_build_requests')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_build_requests_instance_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('cell_mappings',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('database_connection', sa.Text(), nullable=False),
    sa.Column('transport_url', sa.Text(), nullable=True),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_cell_mappings')),
    sa.UniqueConstraint('name', name=op.f('uq_cell_mappings_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_cell_mappings_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('flavors',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('flavorid', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('vcpus', sa.Integer(), nullable=False),
    sa.Column('memory_mb', sa.Integer(), nullable=False),
    sa.Column('root_gb', sa.Integer(), nullable=False),
    sa.Column('ephemeral_gb', sa.Integer(), nullable=False),
    sa.Column('swap', sa.Integer(), nullable=False),
    sa.Column('rxtx_factor', sa.Float(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('is_public', sa.Boolean(), nullable=False),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_flavors')),
    sa.UniqueConstraint('flavorid', name=op.f('uq_flavors_flavorid')),
    sa.UniqueConstraint('name', name=op.f('uq_flavors_name')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('images',
    sa.Column('id', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('properties', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_images')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('instance_actions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('request_id', sa.String(length=255), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('action', sa.String(length=255), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=False),
    sa.Column('message', sa.String(length=255), nullable=True),
    sa.Column('start_time', sa.DateTime(), nullable=False),
    sa.Column('finish_time', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_actions')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_instance_actions_instance_uuid'), 'instance_actions', ['instance_uuid'], unique=False)
    op.create_table('request_specs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('spec', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_request_specs')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_request_specs_instance_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('flavor_extra_specs',
    sa.Column('flavor_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=False),
    sa.ForeignKeyConstraint(['flavor_id'], ['flavors.id'], name=op.f('fk_flavor_extra_specs_flavor_id_flavors'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('flavor_id', 'key', name=op.f('pk_flavor_extra_specs')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('host_mappings',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('cell_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['cell_id'], ['cell_mappings.id'], name=op.f('fk_host_mappings_cell_id_cell_mappings'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_host_mappings')),
    sa.UniqueConstraint('host', name=op.f('uq_host_mappings_host')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('instance_mappings',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('cell_id', sa.Integer(), nullable=True),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=False),
    sa.Column('queued_for_delete', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['cell_id'], ['cell_mappings.id'], name=op.f('fk_instance_mappings_cell_id_cell_mappings'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_mappings')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_instance_mappings_instance_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_instance_mappings_project_id'), 'instance_mappings', ['project_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_instance_mappings_project_id'), table_name='instance_mappings')
    op.drop_table('instance_mappings')
    op.drop_table('host_mappings')
    op.drop_table('flavor_extra_specs')
    op.drop_table('request_specs')
    op.drop_index(op.f('ix_instance_actions_instance_uuid'), table_name='instance_actions')
    op.drop_table('instance_actions')
    op.drop_table('images')
    op.drop_table('flavors')
    op.drop_table('cell_mappings')
    op.drop_table('build_requests')
