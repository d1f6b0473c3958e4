"""Provider trees as parent links, for ordering writes on them: parents are
created before their children, children deleted before their parents."""
from __future__ import annotations

from collections.abc import Mapping


def depth(uuid: str, parent_of: Mapping[str, str | None]) -> int:
    """How many parents above ``uuid`` (0 for a root, or a provider not in ``parent_of``)."""
    steps, parent = 0, parent_of.get(uuid)
    while parent is not None:
        steps += 1
        parent = parent_of.get(parent)
    return steps
