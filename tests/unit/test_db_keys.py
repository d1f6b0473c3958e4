"""Statements matched against key lists: one key binds a plain "=", more an
expanding IN, and both forms return the same rows."""
from __future__ import annotations

import sqlalchemy as sa

from billeting.common.db.keys import MANY, ONE, Keyed, arity, match

_md = sa.MetaData()
_things = sa.Table("things", _md, sa.Column("id", sa.Integer, primary_key=True), sa.Column("kind", sa.String(8)))
_BY_IDS = Keyed(lambda ids, kinds: sa.select(_things.c.id).where(match(_things.c.id, "ids", ids),
                                                                  match(_things.c.kind, "kinds", kinds))
                .order_by(_things.c.id), "ids", "kinds")


def _engine():
    engine = sa.create_engine("sqlite://")
    _md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(_things.insert(), [{"id": i, "kind": "ab"[i % 2]} for i in range(10)])
    return engine


def test_arity_names_one_key_and_every_other_length():
    assert (arity([7]), arity([1, 2]), arity([])) == (ONE, MANY, MANY)


def test_one_key_is_bound_as_its_value_and_matched_with_equality():
    statement, values = _BY_IDS.bind({"ids": [3], "kinds": ["b", "a"]})
    text = str(statement.compile())
    assert "things.id = :ids" in text and "things.kind IN" in text
    assert values == {"ids": 3, "kinds": ["b", "a"]}


def test_each_form_is_built_once_and_reused():
    first, _ = _BY_IDS.bind({"ids": [1], "kinds": ["a"]})
    again, _ = _BY_IDS.bind({"ids": [5], "kinds": ["b"]})
    many, _ = _BY_IDS.bind({"ids": [1, 5], "kinds": ["b"]})
    assert first is again and many is not first


def test_both_forms_find_the_same_rows():
    with _engine().connect() as conn:
        def ids(**values):
            return list(conn.execute(*_BY_IDS.bind(values)).scalars())
        assert ids(ids=[3], kinds=["b"]) == [3] == ids(ids=[3, 3], kinds=["b", "b"])
        assert ids(ids=[3], kinds=["a"]) == [] == ids(ids=[3, 3], kinds=["a", "a"])
        assert ids(ids=[2, 3, 4], kinds=["a"]) == [2, 4]
