"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-22 06:39:58.788368
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('consumer_types',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_consumer_types')),
    sa.UniqueConstraint('name', name=op.f('uq_consumer_types_name')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('placement_aggregates',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_placement_aggregates')),
    sa.UniqueConstraint('uuid', name=op.f('uq_placement_aggregates_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('projects',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('external_id', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_projects')),
    sa.UniqueConstraint('external_id', name=op.f('uq_projects_external_id')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('resource_classes',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_resource_classes')),
    sa.UniqueConstraint('name', name=op.f('uq_resource_classes_name')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('resource_providers',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('generation', sa.Integer(), nullable=False),
    sa.Column('root_provider_id', sa.Integer(), nullable=True),
    sa.Column('parent_provider_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['parent_provider_id'], ['resource_providers.id'], name=op.f('fk_resource_providers_parent_provider_id_resource_providers')),
    sa.ForeignKeyConstraint(['root_provider_id'], ['resource_providers.id'], name=op.f('fk_resource_providers_root_provider_id_resource_providers')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_resource_providers')),
    sa.UniqueConstraint('name', name=op.f('uq_resource_providers_name')),
    sa.UniqueConstraint('uuid', name=op.f('uq_resource_providers_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_resource_providers_parent_provider_id'), 'resource_providers', ['parent_provider_id'], unique=False)
    op.create_index(op.f('ix_resource_providers_root_provider_id'), 'resource_providers', ['root_provider_id'], unique=False)
    op.create_table('traits',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_traits')),
    sa.UniqueConstraint('name', name=op.f('uq_traits_name')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('users',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('external_id', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_users')),
    sa.UniqueConstraint('external_id', name=op.f('uq_users_external_id')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_table('consumers',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('uuid', sa.String(length=36), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('generation', sa.Integer(), nullable=False),
    sa.Column('consumer_type_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['consumer_type_id'], ['consumer_types.id'], name=op.f('fk_consumers_consumer_type_id_consumer_types')),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_consumers_project_id_projects')),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_consumers_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_consumers')),
    sa.UniqueConstraint('uuid', name=op.f('uq_consumers_uuid')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_consumers_consumer_type_id'), 'consumers', ['consumer_type_id'], unique=False)
    op.create_index(op.f('ix_consumers_project_id_user_id'), 'consumers', ['project_id', 'user_id'], unique=False)
    op.create_table('inventories',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('resource_provider_id', sa.Integer(), nullable=False),
    sa.Column('resource_class_id', sa.Integer(), nullable=False),
    sa.Column('total', sa.BigInteger(), nullable=False),
    sa.Column('reserved', sa.BigInteger(), nullable=False),
    sa.Column('min_unit', sa.BigInteger(), nullable=False),
    sa.Column('max_unit', sa.BigInteger(), nullable=False),
    sa.Column('step_size', sa.BigInteger(), nullable=False),
    sa.Column('allocation_ratio', sa.Double(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['resource_class_id'], ['resource_classes.id'], name=op.f('fk_inventories_resource_class_id_resource_classes')),
    sa.ForeignKeyConstraint(['resource_provider_id'], ['resource_providers.id'], name=op.f('fk_inventories_resource_provider_id_resource_providers')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_inventories')),
    sa.UniqueConstraint('resource_provider_id', 'resource_class_id', name=op.f('uq_inventories_resource_provider_id_resource_class_id')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_inventories_resource_class_id'), 'inventories', ['resource_class_id'], unique=False)
    op.create_table('resource_provider_aggregates',
    sa.Column('resource_provider_id', sa.Integer(), nullable=False),
    sa.Column('aggregate_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['aggregate_id'], ['placement_aggregates.id'], name=op.f('fk_resource_provider_aggregates_aggregate_id_placement_aggregates')),
    sa.ForeignKeyConstraint(['resource_provider_id'], ['resource_providers.id'], name=op.f('fk_resource_provider_aggregates_resource_provider_id_resource_providers')),
    sa.PrimaryKeyConstraint('resource_provider_id', 'aggregate_id', name=op.f('pk_resource_provider_aggregates')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_resource_provider_aggregates_aggregate_id'), 'resource_provider_aggregates', ['aggregate_id'], unique=False)
    op.create_table('resource_provider_traits',
    sa.Column('resource_provider_id', sa.Integer(), nullable=False),
    sa.Column('trait_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['resource_provider_id'], ['resource_providers.id'], name=op.f('fk_resource_provider_traits_resource_provider_id_resource_providers')),
    sa.ForeignKeyConstraint(['trait_id'], ['traits.id'], name=op.f('fk_resource_provider_traits_trait_id_traits')),
    sa.PrimaryKeyConstraint('resource_provider_id', 'trait_id', name=op.f('pk_resource_provider_traits')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_resource_provider_traits_trait_id'), 'resource_provider_traits', ['trait_id'], unique=False)
    op.create_table('allocations',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('resource_provider_id', sa.Integer(), nullable=False),
    sa.Column('consumer_id', sa.Integer(), nullable=False),
    sa.Column('resource_class_id', sa.Integer(), nullable=False),
    sa.Column('used', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('updated_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['consumer_id'], ['consumers.id'], name=op.f('fk_allocations_consumer_id_consumers')),
    sa.ForeignKeyConstraint(['resource_class_id'], ['resource_classes.id'], name=op.f('fk_allocations_resource_class_id_resource_classes')),
    sa.ForeignKeyConstraint(['resource_provider_id'], ['resource_providers.id'], name=op.f('fk_allocations_resource_provider_id_resource_providers')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_allocations')),
    mysql_charset='utf8mb4',
    mysql_collate='utf8mb4_bin',
    mysql_engine='InnoDB'
    )
    op.create_index(op.f('ix_allocations_consumer_id'), 'allocations', ['consumer_id'], unique=False)
    op.create_index(op.f('ix_allocations_resource_class_id'), 'allocations', ['resource_class_id'], unique=False)
    op.create_index(op.f('ix_allocations_resource_provider_id_resource_class_id_used'), 'allocations', ['resource_provider_id', 'resource_class_id', 'used'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_allocations_resource_provider_id_resource_class_id_used'), table_name='allocations')
    op.drop_index(op.f('ix_allocations_resource_class_id'), table_name='allocations')
    op.drop_index(op.f('ix_allocations_consumer_id'), table_name='allocations')
    op.drop_table('allocations')
    op.drop_index(op.f('ix_resource_provider_traits_trait_id'), table_name='resource_provider_traits')
    op.drop_table('resource_provider_traits')
    op.drop_index(op.f('ix_resource_provider_aggregates_aggregate_id'), table_name='resource_provider_aggregates')
    op.drop_table('resource_provider_aggregates')
    op.drop_index(op.f('ix_inventories_resource_class_id'), table_name='inventories')
    op.drop_table('inventories')
    op.drop_index(op.f('ix_consumers_project_id_user_id'), table_name='consumers')
    op.drop_index(op.f('ix_consumers_consumer_type_id'), table_name='consumers')
    op.drop_table('consumers')
    op.drop_table('users')
    op.drop_table('traits')
    op.drop_index(op.f('ix_resource_providers_root_provider_id'), table_name='resource_providers')
    op.drop_index(op.f('ix_resource_providers_parent_provider_id'), table_name='resource_providers')
    op.drop_table('resource_providers')
    op.drop_table('resource_classes')
    op.drop_table('projects')
    op.drop_table('placement_aggregates')
    op.drop_table('consumer_types')
