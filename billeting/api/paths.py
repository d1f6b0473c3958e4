"""Path checks the HTTP APIs share."""
from __future__ import annotations


def names_nothing(path: str) -> bool:
    """Does ``path`` hold a segment no stored id or name can match?

    A NUL (PostgreSQL cannot even compare with one) or whitespace at either
    end of a segment (no id or name has it, yet MariaDB's comparisons ignore
    trailing spaces and would find ``x`` for ``x%20``): such a path is a 404
    alike on every backend, before any lookup."""
    return "\x00" in path or any(part != part.strip() for part in path.split("/"))
