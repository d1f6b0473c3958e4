"""Input checks the HTTP APIs (Placement, scheduler, compute) share."""
from __future__ import annotations


def plausible_id(value: str) -> bool:
    """Could a user or project id be ``value``? None is empty, longer than the
    columns that keep one (255), has edge whitespace (MariaDB would take
    "p " for "p") or a NUL."""
    return bool(value) and len(value) <= 255 and value == value.strip() and "\x00" not in value


def names_nothing(path: str) -> bool:
    """Does ``path`` hold a segment no stored id or name can match?

    A NUL (PostgreSQL cannot even compare with one) or whitespace at either
    end of a segment (no id or name has it, yet MariaDB's comparisons ignore
    trailing spaces and would find ``x`` for ``x%20``): such a path is a 404
    alike on every backend, before any lookup."""
    return "\x00" in path or any(part != part.strip() for part in path.split("/"))


def nul_at(value: object) -> tuple[tuple[str | int, ...], bool] | None:
    """Where a parsed JSON document holds a NUL in a string or an object key:
    the keys and indexes leading there, and whether the last key itself holds
    it; None when nothing does. No backend may see one: PostgreSQL rejects
    it and the others would store it, so each API answers 400 (in its own
    notation for the place)."""
    if isinstance(value, str):
        return ((), False) if "\x00" in value else None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if isinstance(key, str) and "\x00" in key:
            return (key,), True
        found = nul_at(item)
        if found is not None:
            return (key, *found[0]), found[1]
    return None
