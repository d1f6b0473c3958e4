"""Statements that match columns against lists of keys, built once per arity.

An expanding ``IN`` is rendered afresh on every execution (the list's length
is part of the SQL text), which costs SQLAlchemy several times what SQLite
spends running a one-row statement. Most calls on the hot paths name one key
(one host per claim, one consumer per release), so each statement here is
built twice per list: with ``column = :key`` for one key, with the expanding
``IN`` for more, and the call picks the form by the lists' lengths.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import bindparam
from sqlalchemy.sql.elements import ColumnElement

ONE, MANY = "one", "many"


def arity(keys: Sequence) -> str:
    return ONE if len(keys) == 1 else MANY


def match(column, name: str, form: str, type_=None) -> ColumnElement[bool]:
    """``column`` equal to the one key bound as ``name``, or in the list."""
    if form == ONE:
        return column == bindparam(name, type_=type_)
    return column.in_(bindparam(name, type_=type_, expanding=True))


class Keyed:
    """A statement whose ``lists`` are matched with ``match``.

    ``build(**forms)`` makes the statement for one arity of each list (the
    keyword arguments are the list names, each ``ONE`` or ``MANY``); it is
    called once per combination of arities. ``bind`` gives the statement and
    its values for one call: a one-key list is bound as its key."""

    __slots__ = ("_build", "_lists", "_built")

    def __init__(self, build: Callable[..., object], *lists: str) -> None:
        self._build = build
        self._lists = lists
        self._built: dict[tuple[str, ...], object] = {}

    def bind(self, values: dict[str, object]) -> tuple[object, dict[str, object]]:
        forms = tuple(arity(values[name]) for name in self._lists)
        statement = self._built.get(forms)
        if statement is None:
            statement = self._built[forms] = self._build(**dict(zip(self._lists, forms)))
        if ONE in forms:
            values = dict(values)
            for name, form in zip(self._lists, forms):
                if form == ONE:
                    values[name] = values[name][0]
        return statement, values
