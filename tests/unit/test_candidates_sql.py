"""The statement cache of the candidates engine never hands out a statement
built for a different shape: every hit is rebuilt and compared."""
from __future__ import annotations

import random

import pytest

from billeting.placement.candidates import sql
from tests.api.test_allocation_candidates_fleet import Fleet
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
    for dialect, token in (("postgresql", "unnest"), ("sqlite", "json"), ("mysql", "in")):
        plan = sql.Plan(dialect, build=True)
        sql.ids_in(plan, sql.P.c.id, range(1000))
        assert plan.shape == [(token,)]
    plan = sql.Plan("postgresql", build=False)
    assert sql.ids_in(plan, sql.P.c.id, []) is None and plan.shape == [("none",)]
