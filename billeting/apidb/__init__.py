"""The API database: what the control plane keeps above the cells.

Today it holds what the scheduler needs besides Placement: the aggregates
it gives a meaning to (topology domains, availability zones, metadata such
as tenant isolation and weigher multipliers), server groups and their
members, and host reports (the small host catalog table). The compute API
adds its own tables here later (flavors, build requests, request specs,
instance/host/cell mappings).

Its Alembic history is its own, recorded in the ``apidb_alembic_version``
table, so the API database can live in a database of its own or share one
with Placement's schema. Adding a table: declare it in ``tables.py``, then
write the next numbered file in ``migrations/versions`` (see ``migrate.py``).
"""
