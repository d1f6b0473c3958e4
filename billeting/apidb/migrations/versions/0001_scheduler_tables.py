"""the scheduler's tables: aggregates it knows (domains, zones, metadata),
topology domains, server groups and members, host reports

Revision ID: 0001
Revises:
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('aggregates',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_aggregates')),
    sa.UniqueConstraint('name', name=op.f('uq_aggregates_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_aggregates_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('directory_generation',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('generation', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_directory_generation')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('host_reports',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('service_host', sa.String(length=255), nullable=True),
    sa.Column('cell', sa.String(length=255), nullable=True),
    sa.Column('enabled', sa.Boolean(), nullable=True),
    sa.Column('up', sa.Boolean(), nullable=True),
    sa.Column('last_heartbeat', sa.DateTime(), nullable=True),
    sa.Column('failed_builds', sa.Integer(), nullable=True),
    sa.Column('num_instances', sa.Integer(), nullable=True),
    sa.Column('num_io_ops', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_host_reports')),
    sa.UniqueConstraint('name', name=op.f('uq_host_reports_name')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('server_groups',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=False),
    sa.Column('policy', sa.String(length=32), nullable=False),
    sa.Column('max_server_per_host', sa.Integer(), nullable=True),
    sa.Column('scope', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_server_groups')),
    sa.UniqueConstraint('uuid', name=op.f('uq_server_groups_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_server_groups_project_id'), 'server_groups', ['project_id'], unique=False)
    op.create_table('aggregate_hosts',
    sa.Column('aggregate_id', sa.Integer(), nullable=False),
    sa.Column('provider_uuid', sa.String(length=36), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('scope', sa.String(length=64), nullable=False),
    sa.ForeignKeyConstraint(['aggregate_id'], ['aggregates.id'], name=op.f('fk_aggregate_hosts_aggregate_id_aggregates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('aggregate_id', 'provider_uuid', name=op.f('pk_aggregate_hosts')),
    sa.UniqueConstraint('scope', 'provider_uuid', name=op.f('uq_aggregate_hosts_scope_provider_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('aggregate_metadata',
    sa.Column('aggregate_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('value', sa.String(length=255), nullable=False),
    sa.ForeignKeyConstraint(['aggregate_id'], ['aggregates.id'], name=op.f('fk_aggregate_metadata_aggregate_id_aggregates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('aggregate_id', 'key', name=op.f('pk_aggregate_metadata')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_aggregate_metadata_key_value'), 'aggregate_metadata', ['key', 'value'], unique=False)
    op.create_table('server_group_members',
    sa.Column('group_id', sa.Integer(), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['group_id'], ['server_groups.id'], name=op.f('fk_server_group_members_group_id_server_groups'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('group_id', 'instance_uuid', name=op.f('pk_server_group_members')),
    sa.UniqueConstraint('instance_uuid', name=op.f('uq_server_group_members_instance_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('topology_domains',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('aggregate_id', sa.Integer(), nullable=False),
    sa.Column('level', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('parent_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['aggregate_id'], ['aggregates.id'], name=op.f('fk_topology_domains_aggregate_id_aggregates'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['parent_id'], ['topology_domains.id'], name=op.f('fk_topology_domains_parent_id_topology_domains'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topology_domains')),
    sa.UniqueConstraint('aggregate_id', name=op.f('uq_topology_domains_aggregate_id')),
    sa.UniqueConstraint('level', 'name', name=op.f('uq_topology_domains_level_name')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_topology_domains_parent_id'), 'topology_domains', ['parent_id'], unique=False)
    # The one row every Directory polls (see billeting.apidb.generation).
    op.execute(sa.text("INSERT INTO directory_generation (id, generation) VALUES (1, 0)"))


def downgrade() -> None:
    # Dropping a table drops its indexes (MySQL refuses to drop one a foreign key uses first).
    op.drop_table('topology_domains')
    op.drop_table('server_group_members')
    op.drop_table('aggregate_metadata')
    op.drop_table('aggregate_hosts')
    op.drop_table('server_groups')
    op.drop_table('host_reports')
    op.drop_table('directory_generation')
    op.drop_table('aggregates')
