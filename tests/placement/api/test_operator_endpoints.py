"""GET /healthcheck, GET /openapi.json and GET /metrics, and what the metrics count."""
from __future__ import annotations

import orjson
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from billeting.config import Settings
from billeting.placement import openapi
from billeting.placement.api.app import make_app
from billeting.placement.api.request_metrics import UNMATCHED, RouteLabels
from billeting.placement.api.routes import load_routes
from billeting.common.db.engine import make_engine
from billeting.placement.store.tx import RetriesExhausted, Retry, run_write
from tests.conftest import PlacementClient, new_uuid
from tests.support.ports import free_port


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client: PlacementClient) -> dict[tuple[str, tuple], float]:
    resp = client.get("/metrics", token=None)
    assert resp.status == 200, resp
    assert resp.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


# --- /healthcheck -----------------------------------------------------------------

def test_healthcheck_needs_no_token(client):
    resp = client.get("/healthcheck", token=None)
    assert resp.status == 200
    assert resp.json == {"status": "ok"}
    assert resp.headers["content-type"] == "application/json"
    assert resp.headers["x-openstack-request-id"].startswith("req-")
    head = client.request("HEAD", "/healthcheck", token=None)
    assert head.status == 200 and head.content == b""


def test_healthcheck_refuses_other_methods_in_the_error_format(client):
    resp = client.post("/healthcheck", json={}, token=None)
    assert resp.status == 405
    assert resp.headers["allow"] == "GET, HEAD"
    assert resp.error["title"] == "Method Not Allowed"
    assert resp.error["request_id"] == resp.headers["x-openstack-request-id"]


@pytest.mark.parametrize("kind", ["sqlite-missing-directory", "postgresql-refused"])
def test_healthcheck_is_503_when_the_database_does_not_answer(kind):
    if kind == "sqlite-missing-directory":
        url = "sqlite:////nonexistent-dir/placement.sqlite"
    else:  # a port nobody listens on: the connection is refused
        url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/placement?connect_timeout=2"
    engine = make_engine(url, pool_size=1)
    try:
        client = PlacementClient(make_app(Settings(db=url), engine), token=None)
        resp = client.get("/healthcheck")
    finally:
        engine.dispose()
    assert resp.status == 503
    assert resp.error["status"] == 503
    assert resp.error["title"] == "Service Unavailable"
    assert resp.error["detail"] == "The database did not answer."
    assert "127.0.0.1" not in resp.text and "nonexistent" not in resp.text


# --- /openapi.json ----------------------------------------------------------------

def test_openapi_document_needs_no_token(client):
    resp = client.get("/openapi.json", token=None)
    assert resp.status == 200
    assert resp.headers["content-type"] == "application/json"
    assert resp.content == openapi.document_bytes()
    assert resp.json["openapi"].startswith("3.1")


# --- /metrics ---------------------------------------------------------------------

def test_requests_are_counted_by_route_template_not_by_path(client, create_provider):
    uuid = create_provider()["uuid"]
    before = value("billeting_placement_http_requests_total",
                   route="/resource_providers/{uuid}", method="GET", status="200")
    before_404 = value("billeting_placement_http_requests_total", route=UNMATCHED, method="GET", status="404")
    for _ in range(2):
        assert client.get(f"/resource_providers/{uuid}").status == 200
    assert client.get(f"/no/such/{uuid}").status == 404
    samples = scrape(client)
    key = ("billeting_placement_http_requests_total",
           (("method", "GET"), ("route", "/resource_providers/{uuid}"), ("status", "200")))
    assert samples[key] == before + 2
    assert samples[("billeting_placement_http_requests_total",
                    (("method", "GET"), ("route", UNMATCHED), ("status", "404")))] == before_404 + 1
    assert samples[("billeting_placement_http_request_duration_seconds_count",
                    (("method", "GET"), ("route", "/resource_providers/{uuid}")))] >= 2
    # No raw path ever becomes a label value.
    assert uuid not in client.get("/metrics", token=None).text


def test_unauthenticated_and_odd_methods_are_counted_too(client):
    before = value("billeting_placement_http_requests_total", route="/traits", method="GET", status="401")
    before_other = value("billeting_placement_http_requests_total", route="/traits", method="other", status="405")
    assert client.get("/traits", token=None).status == 401
    assert client.request("BREW", "/traits", mv="1.6").status == 405
    assert value("billeting_placement_http_requests_total", route="/traits", method="GET", status="401") == before + 1
    assert value("billeting_placement_http_requests_total",
                 route="/traits", method="other", status="405") == before_other + 1


def test_route_labels_follow_the_route_table():
    labels = RouteLabels([path for path, _ in load_routes()[0]])
    assert labels.label("/") == "/"
    assert labels.label("") == "/"
    assert labels.label("/resource_providers") == "/resource_providers"
    assert labels.label(f"/resource_providers/{new_uuid()}/inventories/VCPU") == \
        "/resource_providers/{uuid}/inventories/{resource_class}"
    assert labels.label("/allocations/x") == "/allocations/{consumer_uuid}"
    assert labels.label("/resource_providers/") == UNMATCHED  # trailing slash: a 404 route
    assert labels.label("/resource_providers/a/b") == UNMATCHED


def test_allocation_candidates_returned_are_counted(client, create_provider):
    for _ in range(3):
        uuid = create_provider()["uuid"]
        body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}
        assert client.put(f"/resource_providers/{uuid}/inventories", json=body).status == 200
    count = value("billeting_placement_allocation_candidates_returned_count")
    total = value("billeting_placement_allocation_candidates_returned_sum")
    resp = client.get("/allocation_candidates?resources=VCPU:2", mv="1.39")
    assert len(resp.json["allocation_requests"]) == 3
    assert client.get("/allocation_candidates?resources=VCPU:100", mv="1.39").json["allocation_requests"] == []
    assert value("billeting_placement_allocation_candidates_returned_count") == count + 2
    assert value("billeting_placement_allocation_candidates_returned_sum") == total + 3


def test_summary_cache_hits_and_size_are_reported(client, create_provider, summary_paths):
    uuid = create_provider()["uuid"]
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}
    assert client.put(f"/resource_providers/{uuid}/inventories", json=body).status == 200
    hits = value("billeting_placement_summary_cache_lookups_total", result="hit")
    misses = value("billeting_placement_summary_cache_lookups_total", result="miss")
    for _ in range(2):
        # (limited: small answers only take the cache when the fixture says so)
        assert client.get("/allocation_candidates?resources=VCPU:1&limit=10", mv="1.39").status == 200
    if summary_paths == "cached":
        assert value("billeting_placement_summary_cache_lookups_total", result="miss") == misses + 1
        assert value("billeting_placement_summary_cache_lookups_total", result="hit") == hits + 1
        assert value("billeting_placement_summary_cache_entries") >= 1
    else:  # small answers do not go through the cache at all
        assert value("billeting_placement_summary_cache_lookups_total", result="hit") == hits
        assert value("billeting_placement_summary_cache_lookups_total", result="miss") == misses


def _claim(client, consumer, rp, amount, generation):
    return client.put(f"/allocations/{consumer}", mv="1.39", json={
        "allocations": {rp: {"resources": {"VCPU": amount}}}, "project_id": "p", "user_id": "u",
        "consumer_generation": generation, "consumer_type": "INSTANCE"})


def test_allocation_write_conflicts_are_counted_by_reason(client, create_provider):
    rp = create_provider()["uuid"]
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}}
    assert client.put(f"/resource_providers/{rp}/inventories", json=body).status == 200
    route = "/allocations/{consumer_uuid}"
    generation = value("billeting_placement_allocation_write_conflicts_total", route=route, reason="generation")
    capacity = value("billeting_placement_allocation_write_conflicts_total", route=route, reason="capacity")
    consumer = new_uuid()
    assert _claim(client, consumer, rp, 1, None).status == 204
    assert _claim(client, consumer, rp, 1, 7).status == 409       # stale consumer generation
    assert _claim(client, new_uuid(), rp, 9, None).status == 409  # more than the capacity
    assert value("billeting_placement_allocation_write_conflicts_total",
                 route=route, reason="generation") == generation + 1
    assert value("billeting_placement_allocation_write_conflicts_total",
                 route=route, reason="capacity") == capacity + 1


def test_transaction_retries_and_exhaustion_are_counted(engine):
    retries = value("billeting_placement_transaction_retries_total", kind="write", reason="generation")
    exhausted = value("billeting_placement_transaction_retries_exhausted_total", kind="write")
    attempts = []

    def lose_once(conn):
        attempts.append(1)
        if len(attempts) == 1:
            raise Retry("provider generation changed")
        return "done"

    assert run_write(engine, lose_once) == "done"
    with pytest.raises(RetriesExhausted):
        run_write(engine, lambda conn: (_ for _ in ()).throw(Retry("always")), retries=2)
    assert value("billeting_placement_transaction_retries_total",
                 kind="write", reason="generation") == retries + 1 + 2
    assert value("billeting_placement_transaction_retries_exhausted_total", kind="write") == exhausted + 1


def test_pool_gauges_show_connections_open_and_none_left_in_use(client, create_provider):
    rp = create_provider()["uuid"]
    assert client.get(f"/resource_providers/{rp}").status == 200
    samples = scrape(client)
    assert samples[("billeting_placement_db_pool_connections_in_use", ())] == 0
    assert samples[("billeting_placement_db_pool_connections_open", ())] >= 1
    assert samples[("billeting_placement_db_pool_size", ())] >= 1


@pytest.fixture
def policy_client(settings, engine):
    settings.metrics_access = "policy"
    return lambda token: PlacementClient(make_app(settings, engine), token=token)


def test_metrics_under_policy_need_an_admitted_token(policy_client):
    assert policy_client(None).get("/metrics").status == 401
    denied = policy_client("someone").get("/metrics")
    assert denied.status == 403
    assert denied.error["detail"] == "Policy does not allow billeting:metrics to be performed."
    allowed = policy_client("admin").get("/metrics")
    assert allowed.status == 200
    assert "billeting_placement_http_requests_total" in allowed.text
    # The other operator endpoints stay open.
    assert policy_client(None).get("/healthcheck").status == 200
    assert orjson.loads(policy_client(None).get("/openapi.json").content)["openapi"].startswith("3.1")


def test_metrics_access_comes_from_flag_environment_or_file(tmp_path):
    from billeting.cli import build_parser
    from billeting.commands.common import CliError, settings_from_args

    parse = build_parser().parse_args
    assert settings_from_args(parse(["serve"]), {}).metrics_access == "open"
    assert settings_from_args(parse(["serve", "--metrics-access", "policy"]), {}).metrics_access == "policy"
    assert settings_from_args(parse(["serve"]), {"BILLETING_METRICS_ACCESS": "policy"}).metrics_access == "policy"
    conf = tmp_path / "billeting.conf"
    conf.write_text("[billeting]\nmetrics_access = policy\n")
    assert settings_from_args(parse(["serve", "--config-file", str(conf)]), {}).metrics_access == "policy"
    with pytest.raises(CliError, match="metrics_access must be open or policy, not 'nope'"):
        settings_from_args(parse(["serve"]), {"BILLETING_METRICS_ACCESS": "nope"})
