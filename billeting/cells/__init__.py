"""Cells: each cell has its own database and its own messaging space.

``tables``/``migrate``: the cell database schema (Alembic, own version table);
``instances``, ``services``: typed reads and writes of instance records and
service/compute-node records; ``moves``: migration records; ``hosts``: what a
scheduler reads about hosts;
``messages``/``rpc``: the typed casts on a cell bus; ``wiring``: the only
handles a cell's processes get (their cell database, their cell bus,
Placement); ``handoff``: what the API level calls to hand a build or a delete
to a cell; ``audit``: finds and removes orphaned allocations.
"""
