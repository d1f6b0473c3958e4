"""Shared fixtures: a fresh database for the run, cleaned between tests,
and an in-process HTTP client that goes through the whole WSGI stack.

``BILLETING_TEST_DB`` picks the backend: ``sqlite`` (default), ``postgresql``
or ``mysql`` (the local servers of the README), or a full server URL whose
path is ignored. Each run (each xdist worker) creates its own database and
drops it at the end, so runs never see each other's data.
"""
from __future__ import annotations

import os
import uuid as uuidlib
from dataclasses import dataclass

import falcon.testing
import orjson
import pytest
from sqlalchemy import create_engine, delete, text, update
from sqlalchemy.engine import make_url

from billeting.config import Settings
from billeting.placement.api.app import make_app
from billeting.placement.store import migrate, tables as t
from billeting.common.db.engine import make_engine, normalize_url
from billeting.placement.store.sync import sync_standard_names

# Fixtures shared by the scheduler and control-plane tests.
pytest_plugins = ["tests.scheduler.fixtures"]

SERVER_URLS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/mysql",
}


@dataclass
class TestDatabase:
    url: str
    backend: str
    drop: object


def _create_database(tmp_path_factory) -> TestDatabase:
    choice = os.environ.get("BILLETING_TEST_DB", "sqlite")
    if choice == "sqlite":
        path = tmp_path_factory.mktemp("db") / "placement.sqlite"
        return TestDatabase(f"sqlite:///{path}", "sqlite", lambda: None)
    server_url = make_url(normalize_url(SERVER_URLS.get(choice, choice)))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"billeting_test_{worker}_{uuidlib.uuid4().hex[:8]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    backend = server_url.get_backend_name()
    with admin.connect() as conn:
        if backend == "mysql":
            conn.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"))
        else:
            conn.execute(text(f"CREATE DATABASE {name}"))

    def drop() -> None:
        with admin.connect() as conn:
            if backend == "postgresql":
                conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            else:
                conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        admin.dispose()

    url = server_url.set(database=name).render_as_string(hide_password=False)
    return TestDatabase(url, backend, drop)


@pytest.fixture(scope="session")
def test_database(tmp_path_factory):
    db = _create_database(tmp_path_factory)
    yield db
    db.drop()


@pytest.fixture(scope="session")
def db_url(test_database) -> str:
    return test_database.url


@pytest.fixture
def private_engine(tmp_path_factory):
    """A migrated database of its own, for tests that break invariants the
    shared one keeps (e.g. deleting the standard names, whose ids caches
    may hold for the life of the process)."""
    db = _create_database(tmp_path_factory)
    eng = make_engine(db.url)
    migrate.upgrade(eng)
    try:
        yield eng
    finally:
        eng.dispose()
        db.drop()


@pytest.fixture(scope="session")
def engine(db_url):
    eng = make_engine(db_url)
    migrate.upgrade(eng)
    sync_standard_names(eng)
    yield eng
    eng.dispose()


def wipe(engine) -> None:
    """Remove everything users created; keep the synced standard names."""
    with engine.begin() as conn:
        for table in t.USER_DATA_TABLES:
            conn.execute(delete(table))
        conn.execute(update(t.resource_providers).values(root_provider_id=None, parent_provider_id=None))
        conn.execute(delete(t.resource_providers))
        conn.execute(delete(t.resource_classes).where(t.resource_classes.c.id >= t.CUSTOM_RC_START_ID))
        conn.execute(delete(t.traits).where(t.traits.c.name.like("CUSTOM\\_%", escape="\\")))


@pytest.fixture(autouse=True)
def _clean_database(request):
    yield
    if "engine" in request.fixturenames:
        wipe(request.getfixturevalue("engine"))


@pytest.fixture(autouse=True, scope="session")
def _verify_statement_cache():
    """Every hit of the candidates engine's statement cache is rebuilt and
    compared, in every test: a builder that forgets to mark a structural
    choice fails loudly instead of reusing a statement of another shape."""
    from billeting.placement.candidates import sql

    sql.verify_cache = True
    yield
    sql.verify_cache = False


@pytest.fixture(params=["one-query", "cached"])
def summary_paths(request, monkeypatch):
    """Runs a candidates test twice: with provider summaries read in one query
    (small answers) and through the per-process summary cache (large ones)."""
    from billeting.placement.candidates import summary_cache

    summary_cache.clear()
    if request.param == "cached":
        monkeypatch.setattr(summary_cache, "MIN_SCOPE", 0)
    yield request.param
    summary_cache.clear()


@pytest.fixture
def settings(db_url) -> Settings:
    return Settings(db=db_url)


@pytest.fixture
def app(settings, engine):
    return make_app(settings, engine)


class Response:
    """What a test looks at: status, headers, parsed JSON."""

    def __init__(self, status: int, headers: list[tuple[str, str]], content: bytes) -> None:
        self.status = status
        self.headers: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            self.headers[key] = f"{self.headers[key]}, {value}" if key in self.headers else value
        self.content = content
        self.text = content.decode("utf-8", errors="replace")

    @property
    def json(self):
        return orjson.loads(self.content)

    @property
    def error(self) -> dict:
        """The single error object of a Placement error body."""
        errors = self.json["errors"]
        assert len(errors) == 1
        return errors[0]

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.text[:300]}>"


def call_wsgi(app, environ: dict) -> Response:
    """Call the app as a WSGI server would. (Falcon's test client would add
    wsgiref's validator, which insists on a Content-Type even for a body-less
    201; Placement sends none there, docs/design/placement-http.md#content-negotiation.)"""
    captured: dict = {}

    def start_response(status, headers, exc_info=None):
        captured["status"] = int(status.split(" ", 1)[0])
        captured["headers"] = headers
        return lambda data: None

    chunks = app(environ, start_response)
    try:
        content = b"".join(chunks)
    finally:
        if hasattr(chunks, "close"):
            chunks.close()
    return Response(captured["status"], captured["headers"], content)


def one_line(capsys) -> str:
    """The one line a command wrote on stderr (and no traceback)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


class PlacementClient:
    """Drives the WSGI app in-process. ``mv`` sets the microversion header."""

    def __init__(self, app, token: str | None = "admin", mv: str | None = None) -> None:
        self.app = app
        self.token = token
        self.mv = mv

    def request(self, method: str, path: str, *, json=None, body: bytes | str | None = None,
                mv: str | None = None, headers: dict | None = None, token: object = ...,
                content_type: str | None = ...) -> Response:
        hdrs = {}
        token = self.token if token is ... else token
        if token is not None:
            hdrs["X-Auth-Token"] = token
        version = mv if mv is not None else self.mv
        if version is not None:
            hdrs["OpenStack-API-Version"] = f"placement {version}"
        if json is not None:
            body = orjson.dumps(json)
            if content_type is ...:
                content_type = "application/json"
        if content_type not in (..., None):
            hdrs["Content-Type"] = content_type
        hdrs.update(headers or {})
        path, _, query = path.partition("?")
        environ = falcon.testing.create_environ(
            path=path, query_string=query, method=method, headers=hdrs, body=body or b"")
        return call_wsgi(self.app, environ)

    def get(self, path, **kw) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path, json=None, **kw) -> Response:
        return self.request("POST", path, json=json, **kw)

    def put(self, path, json=None, **kw) -> Response:
        return self.request("PUT", path, json=json, **kw)

    def delete(self, path, **kw) -> Response:
        return self.request("DELETE", path, **kw)


@pytest.fixture
def client(app) -> PlacementClient:
    return PlacementClient(app)


@pytest.fixture
def make_client(app):
    """Build clients with another token or a fixed microversion."""

    def build(token: str | None = "admin", mv: str | None = None) -> PlacementClient:
        return PlacementClient(app, token=token, mv=mv)

    return build


def new_uuid() -> str:
    return str(uuidlib.uuid4())


@pytest.fixture
def create_provider(client):
    """Create a provider at 1.20+ and return its representation."""

    def create(name: str | None = None, *, uuid: str | None = None, parent: str | None = None) -> dict:
        body = {"name": name or f"rp-{uuidlib.uuid4().hex[:8]}"}
        if uuid:
            body["uuid"] = uuid
        if parent:
            body["parent_provider_uuid"] = parent
        resp = client.post("/resource_providers", json=body, mv="1.20")
        assert resp.status == 200, resp
        return resp.json

    return create


# --- RabbitMQ ---------------------------------------------------------------

AMQP_BASE = os.environ.get("BILLETING_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672")


def _rabbitmqctl(*args: str) -> None:
    import subprocess

    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def amqp_vhost_factory():
    """Makes RabbitMQ virtual hosts of this run's own (removed at the end).
    Unreachable RabbitMQ: the test is skipped locally and fails in CI."""
    import shutil
    import socket

    from urllib.parse import urlsplit

    parts = urlsplit(AMQP_BASE)
    try:
        socket.create_connection((parts.hostname, parts.port or 5672), timeout=2).close()
        reachable = shutil.which("rabbitmqctl") is not None
    except OSError:
        reachable = False
    if not reachable:
        if os.environ.get("CI") == "true":
            pytest.fail("RabbitMQ (and rabbitmqctl) is needed on 127.0.0.1:5672 in CI")
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672 (see README: starting the local servers)")
    made: list[str] = []

    def make() -> str:
        name = f"billeting_test_{uuidlib.uuid4().hex[:10]}"
        _rabbitmqctl("add_vhost", name)
        _rabbitmqctl("set_permissions", "-p", name, parts.username or "guest", ".*", ".*", ".*")
        made.append(name)
        return f"{AMQP_BASE}/{name}"

    yield make
    for name in made:
        try:
            _rabbitmqctl("delete_vhost", name)
        except Exception:  # noqa: BLE001 - cleanup must not mask the run's result
            pass


@pytest.fixture(params=["memory", "amqp"])
def bus_url(request):
    """A messaging space of the test's own, on each transport."""
    if request.param == "memory":
        return f"memory:///test-{uuidlib.uuid4().hex[:10]}"
    return request.getfixturevalue("amqp_vhost_factory")()
