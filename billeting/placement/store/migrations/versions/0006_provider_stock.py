"""resource_providers.stock: every inventory of a provider, with usage, in one row

A sampled candidate search read each candidate's provider row and then one
row per inventory (about 8 rows read per candidate on PostgreSQL). The new
column holds all of a provider's inventories and their kept usage as one
JSON text, recomputed by every inventory and usage write in its own
transaction (billeting/placement/stock.py), so a window of candidates is
one row per provider. Filled here from the inventories already stored;
NULL would only make readers fall back to the inventory rows.

Revision ID: 0006
Revises: 0005
"""
import orjson
import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('resource_providers', sa.Column('stock', sa.Text(), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.text(
        "SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, step_size,"
        " allocation_ratio, used FROM inventories ORDER BY resource_provider_id, resource_class_id")).all()
    by_provider: dict[int, list] = {}
    for provider_id, class_id, total, reserved, min_unit, max_unit, step, ratio, used in rows:
        by_provider.setdefault(provider_id, []).append(
            [class_id, int(total), int(reserved), int(min_unit), int(max_unit), int(step), float(ratio), int(used)])
    ids = conn.execute(sa.text("SELECT id FROM resource_providers")).scalars().all()
    values = [{"id": i, "stock": orjson.dumps(by_provider.get(i, [])).decode()} for i in ids]
    if values:
        conn.execute(sa.text("UPDATE resource_providers SET stock = :stock WHERE id = :id"), values)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        # (SQLite drops a column in place since 3.35; batch mode would rebuild
        # a table other tables refer to)
        op.execute('ALTER TABLE resource_providers DROP COLUMN stock')
    else:
        op.drop_column('resource_providers', 'stock')
