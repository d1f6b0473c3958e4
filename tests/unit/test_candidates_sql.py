"""The statement cache of the candidates engine never hands out a statement
built for a different shape: every hit is rebuilt and compared."""
from __future__ import annotations

import datetime
import random

import pytest

from billeting.placement.candidates import sql
from tests.placement.api.test_allocation_candidates_fleet import Fleet
from tests.unit.test_candidates_engine import build, random_query


@pytest.fixture
def verified_cache(monkeypatch):
    monkeypatch.setattr(sql, "verify_cache", True)


@pytest.mark.parametrize("sharing", [False, True])
def test_cached_statements_match_fresh_ones(client, verified_cache, sharing):
    fleet = Fleet(client)
    build(fleet, 21, trees=4, sharing=sharing)
    rnd = random.Random(5)
    for _ in range(40):
        q = random_query(rnd, sharing)
        for suffix in ("", "&limit=2"):
            for mv in ("1.39", "1.28", "1.26", "1.16"):
                if mv < "1.36" and (q.same_subtree or q.root_required or q.root_forbidden):
                    continue
                if mv < "1.33" and any(s and not s.isdigit() for s in q.groups):
                    continue
                if mv == "1.16" and (len(q.groups) > 1 or "" not in q.groups or "required" in q.string()
                                     or "member_of" in q.string()):
                    continue
                if mv < "1.39" and "in:" in q.string().replace("member_of", ""):
                    continue
                if mv < "1.32" and "!in:" in q.string():
                    continue
                resp = client.get(f"/allocation_candidates?{q.string()}{suffix}", mv=mv)
                assert resp.status == 200, (q.string(), mv, resp)


def test_ids_in_forms():
    gappy = range(0, 2000, 2)
    for dialect, token in (("postgresql", "unnest"), ("sqlite", "json"), ("mysql", "in")):
        plan = sql.Plan(dialect, build=True)
        sql.ids_in(plan, sql.P.c.id, gappy)
        assert plan.shape == [(token,)]
        # Every id of a range (a window of the fleet): the range itself.
        plan = sql.Plan(dialect, build=True)
        sql.ids_in(plan, sql.P.c.id, range(1000))
        assert plan.shape == [("range",)]
        # As many ids as the range is long, but one twice and one missing: not a range.
        plan = sql.Plan(dialect, build=True)
        sql.ids_in(plan, sql.P.c.id, [0, 0, *range(2, 1000)])
        assert plan.shape == [(token,)]
    plan = sql.Plan("postgresql", build=False)
    assert sql.ids_in(plan, sql.P.c.id, []) is None and plan.shape == [("none",)]


def test_every_form_of_ids_in_selects_exactly_its_ids(engine):
    """On the database under test: a range, a set with gaps and a short
    list each select exactly the ids given, however they are bound."""
    from sqlalchemy import insert, select

    from billeting.placement.store import tables as t

    with engine.begin() as conn:
        conn.execute(insert(t.resource_providers), [
            {"uuid": f"00000000-0000-4000-8000-{i:012d}", "name": f"ids-in-{i}", "generation": 0,
             "created_at": datetime.datetime(2026, 1, 1)} for i in range(600)])
        ids = list(conn.execute(select(sql.P.c.id).where(sql.P.c.name.like("ids-in-%")).order_by(sql.P.c.id))
                   .scalars())
    forms = set()
    for wanted in (ids[50:550], ids[::2], ids[:300] + ids[301:], ids[:10], [ids[0], ids[0]] + ids[2:400]):
        plan = sql.Plan(engine.dialect.name, build=False)
        sql.ids_in(plan, sql.P.c.id, wanted)
        forms.update(plan.shape)
        statement, values = sql.prepare("test_ids_in", engine.dialect.name,
                                        lambda plan: select(sql.P.c.id).where(
                                            sql.ids_in(plan, sql.P.c.id, wanted)).order_by(sql.P.c.id))
        with engine.connect() as conn:
            assert list(conn.execute(statement, values).scalars()) == sorted(set(wanted)), plan.shape
    assert ("range",) in forms and len(forms) >= 2  # (MySQL binds the others alike)
