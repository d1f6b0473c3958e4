"""initial cell schema: services, compute nodes, instances, faults, migrations

Revision ID: 0001
Revises: 
Create Date: 2026-11-23 03:50:34.572110
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('compute_nodes',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('hypervisor_hostname', sa.String(length=255), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('hypervisor_type', sa.String(length=64), nullable=False),
    sa.Column('vcpus', sa.Integer(), nullable=False),
    sa.Column('memory_mb', sa.Integer(), nullable=False),
    sa.Column('local_gb', sa.Integer(), nullable=False),
    sa.Column('vcpus_used', sa.Integer(), nullable=False),
    sa.Column('memory_mb_used', sa.Integer(), nullable=False),
    sa.Column('local_gb_used', sa.Integer(), nullable=False),
    sa.Column('failed_builds', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compute_nodes')),
    sa.UniqueConstraint('hypervisor_hostname', name=op.f('uq_compute_nodes_hypervisor_hostname')),
    sa.UniqueConstraint('uuid', name=op.f('uq_compute_nodes_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_compute_nodes_host'), 'compute_nodes', ['host'], unique=False)
    op.create_table('instances',
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('project_id', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.String(length=255), nullable=False),
    sa.Column('vm_state', sa.String(length=16), nullable=False),
    sa.Column('task_state', sa.String(length=32), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('node', sa.String(length=255), nullable=True),
    sa.Column('compute_node_uuid', sa.String(length=36), nullable=True),
    sa.Column('availability_zone', sa.String(length=255), nullable=True),
    sa.Column('flavor', sa.Text(), nullable=False),
    sa.Column('image', sa.Text(), nullable=True),
    sa.Column('request', sa.Text(), nullable=False),
    sa.Column('selection', sa.Text(), nullable=True),
    sa.Column('alternates', sa.Text(), nullable=False),
    sa.Column('num_attempts', sa.Integer(), nullable=False),
    sa.Column('hosts_tried', sa.Text(), nullable=False),
    sa.Column('last_failure', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('launched_at', sa.DateTime(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('uuid', name=op.f('pk_instances')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_instances_host_vm_state'), 'instances', ['host', 'vm_state'], unique=False)
    op.create_index(op.f('ix_instances_node'), 'instances', ['node'], unique=False)
    op.create_index(op.f('ix_instances_vm_state_task_state_updated_at'), 'instances', ['vm_state', 'task_state', 'updated_at'], unique=False)
    op.create_table('migrations',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('migration_type', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('source_compute', sa.String(length=255), nullable=True),
    sa.Column('source_node', sa.String(length=255), nullable=True),
    sa.Column('dest_compute', sa.String(length=255), nullable=True),
    sa.Column('dest_node', sa.String(length=255), nullable=True),
    sa.Column('old_flavor', sa.Text(), nullable=True),
    sa.Column('new_flavor', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_migrations')),
    sa.UniqueConstraint('uuid', name=op.f('uq_migrations_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_migrations_instance_uuid'), 'migrations', ['instance_uuid'], unique=False)
    op.create_index(op.f('ix_migrations_status'), 'migrations', ['status'], unique=False)
    op.create_table('services',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('binary', sa.String(length=64), nullable=False),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('disabled_reason', sa.String(length=255), nullable=True),
    sa.Column('forced_down', sa.Boolean(), nullable=False),
    sa.Column('report_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_services')),
    sa.UniqueConstraint('host', 'binary', name=op.f('uq_services_host_binary')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('instance_faults',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('instance_uuid', sa.String(length=36), nullable=False),
    sa.Column('code', sa.Integer(), nullable=False),
    sa.Column('message', sa.String(length=255), nullable=False),
    sa.Column('details', sa.Text(), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['instance_uuid'], ['instances.uuid'], name=op.f('fk_instance_faults_instance_uuid_instances')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instance_faults')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_instance_faults_instance_uuid'), 'instance_faults', ['instance_uuid'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_instance_faults_instance_uuid'), table_name='instance_faults')
    op.drop_table('instance_faults')
    op.drop_table('services')
    op.drop_index(op.f('ix_migrations_status'), table_name='migrations')
    op.drop_index(op.f('ix_migrations_instance_uuid'), table_name='migrations')
    op.drop_table('migrations')
    op.drop_index(op.f('ix_instances_vm_state_task_state_updated_at'), table_name='instances')
    op.drop_index(op.f('ix_instances_node'), table_name='instances')
    op.drop_index(op.f('ix_instances_host_vm_state'), table_name='instances')
    op.drop_table('instances')
    op.drop_index(op.f('ix_compute_nodes_host'), table_name='compute_nodes')
    op.drop_table('compute_nodes')
