"""No import cycles between billeting's modules (module-level imports only).

The graph is read from source with ``ast``; nothing is imported.  An edge
A -> B exists when A's module-level code imports B: top-level statements,
those nested in top-level ``if``/``try``/``with``/loop blocks and in class
bodies count; imports inside functions and methods and in ``if
TYPE_CHECKING:`` blocks don't (they run late or never, so they cannot meet a
half-initialised module).  ``from pkg import name`` points at ``pkg.name``
when that is a submodule, at ``pkg`` otherwise.  Importing ``a.b.c`` also
runs ``a`` and ``a.b``; those implied package edges are not recorded.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from pathlib import Path

import billeting

ROOT = Path(billeting.__file__).resolve().parent


def _module_names(root: Path) -> dict[str, Path]:
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _module_level_imports(tree: ast.Module):
    """The import statements that run when the module body runs."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            blocks = [node.orelse] if _is_type_checking(node.test) else [node.body, node.orelse]
            for block in reversed(blocks):
                stack.extend(reversed(block))
        elif isinstance(node, (ast.Try, ast.TryStar)):
            blocks = [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
            for block in reversed(blocks):
                stack.extend(reversed(block))
        elif isinstance(node, (ast.With, ast.For, ast.While, ast.ClassDef)):
            stack.extend(reversed(getattr(node, "orelse", [])))
            stack.extend(reversed(node.body))
        # FunctionDef / AsyncFunctionDef: their bodies run when called.


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


@functools.cache
def import_graph(root: Path = ROOT) -> dict[str, dict[str, tuple[str, list[int]]]]:
    """module -> {imported module -> (importer's file, line numbers)}, within ``root``'s package."""
    modules = _module_names(root)
    graph: dict[str, dict[str, tuple[str, list[int]]]] = {m: {} for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        shown = str(path.relative_to(root.parent))
        for node in _module_level_imports(tree):
            for target in _targets(module, path, node, modules):
                graph[module].setdefault(target, (shown, []))[1].append(node.lineno)
    return graph


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom, modules) -> list[str]:
    """The package's modules one import statement names."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = _base(module, path.name == "__init__.py", node)
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    found = []
    for target in targets:
        while target and target not in modules:  # outside the package, or a name in a module
            target = target.rpartition(".")[0]
        if target:
            found.append(target)
    return found


@functools.cache
def every_import(root: Path = ROOT) -> dict[str, dict[str, tuple[str, list[int]]]]:
    """As ``import_graph``, but with every import statement, those inside
    functions and ``TYPE_CHECKING`` blocks too: what a module may reach at all."""
    modules = _module_names(root)
    found: dict[str, dict[str, tuple[str, list[int]]]] = {m: {} for m in modules}
    for module, path in modules.items():
        shown = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, path, node, modules):
                    found[module].setdefault(target, (shown, []))[1].append(node.lineno)
    return found


def strongly_connected(graph) -> list[list[str]]:
    """Tarjan's algorithm, iterative; each component's modules sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(sorted(graph[node]))))

    for root in sorted(graph):
        if root in index:
            continue
        work: list = []
        visit(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    visit(child)
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while not component or component[-1] != node:
                    component.append(stack.pop())
                    on_stack.discard(component[-1])
                components.append(sorted(component))
    return components


def find_cycles(graph) -> dict[tuple[str, ...], list[str]]:
    """Each cycle (a component of several modules, or a module importing
    itself) -> its edges as 'importer -> imported  (file:lines)'."""
    cycles = {}
    for component in strongly_connected(graph):
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        edges = []
        for module in component:
            for target, (shown, lines) in sorted(graph[module].items()):
                if target in component:
                    edges.append(f"{module} -> {target}  ({shown}:{', '.join(map(str, lines))})")
        cycles[tuple(component)] = edges
    return cycles


def test_no_import_cycles():
    cycles = find_cycles(import_graph())
    report = []
    for component, edges in sorted(cycles.items()):
        report.append(f"cycle among {len(component)} module(s): {', '.join(component)}")
        report.extend(f"    {edge}" for edge in edges)
    assert not cycles, (
        "import cycles between billeting modules (module-level imports); each edge is "
        "'importer -> imported  (file:line)'. Break one edge per cycle, usually by moving the "
        "shared name down into a module both can import:\n" + "\n".join(report))


def test_apidb_sits_below_the_conductor():
    # The API database's records are shared by the API and the move tasks;
    # the conductor reads them, never the other way round.
    upward = [f"{module} -> {target}  ({shown}:{', '.join(map(str, lines))})"
              for module, edges in import_graph().items() if module.startswith("billeting.apidb")
              for target, (shown, lines) in edges.items() if target.startswith("billeting.conductor")]
    assert not upward, upward


def test_the_graph_sees_billeting():
    # A parser that found nothing would pass the cycle check vacuously.
    graph = import_graph()
    assert len(graph) > 200
    assert "billeting.config" in graph["billeting.commands.placement"]
    assert "billeting.commands.common" in graph["billeting.cli"]
    assert "billeting.scheduler.claiming" in graph["billeting.scheduler.core"]  # from pkg import submodule


def test_which_imports_count(tmp_path):
    files = {
        "pkg/__init__.py": "from . import a\n",
        "pkg/a.py": """
            from typing import TYPE_CHECKING
            from pkg.sub import b
            try:
                import pkg.c
            except ImportError:
                pass
            if TYPE_CHECKING:
                from pkg import d
            else:
                from pkg.sub.b import helper
            class K:
                from pkg import e
                def method(self):
                    from pkg import f
            def late():
                import pkg.g
        """,
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from .. import a\nfrom ..sub import name_in_init\nimport os.path\n",
        **{f"pkg/{m}.py": "" for m in "cdefg"},
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    graph = import_graph(tmp_path / "pkg")
    assert {m: sorted(e) for m, e in graph.items() if e} == {
        "pkg": ["pkg.a"],
        "pkg.a": ["pkg.c", "pkg.e", "pkg.sub.b"],
        "pkg.sub.b": ["pkg.a", "pkg.sub"],
    }
    assert graph["pkg.a"]["pkg.sub.b"] == ("pkg/a.py", [3, 11])
    assert find_cycles(graph) == {("pkg.a", "pkg.sub.b"): [
        "pkg.a -> pkg.sub.b  (pkg/a.py:3, 11)",
        "pkg.sub.b -> pkg.a  (pkg/sub/b.py:1)",
    ]}


def test_tarjan_finds_rings_and_self_imports():
    graph = {"a": {"b": 0}, "b": {"c": 0}, "c": {"a": 0}, "d": {"d": 0}, "e": {"a": 0}, "f": {}}
    assert sorted(map(tuple, strongly_connected(graph))) == [("a", "b", "c"), ("d",), ("e",), ("f",)]
    assert set(find_cycles({m: {t: ("x.py", [1]) for t in e} for m, e in graph.items()})) == {
        ("a", "b", "c"), ("d",)}


def test_common_sits_below_every_service():
    # Shared plumbing (database, HTTP context, GC pause, policy) imports no
    # service, so a change inside a service cannot reach the others through it.
    upward = [f"{module} -> {target}  ({shown}:{', '.join(map(str, lines))})"
              for module, edges in import_graph().items() if module.startswith("billeting.common")
              for target, (shown, lines) in edges.items()
              if target.startswith("billeting.") and not target.startswith("billeting.common")]
    assert not upward, upward


def test_only_placement_counts_its_transactions():
    # Other services run their transactions through billeting.common.db.tx;
    # Placement's module counts retries in Placement's metrics.
    strays = [f"{module} ({shown}:{', '.join(map(str, lines))})"
              for module, edges in import_graph().items()
              if not module.startswith(("billeting.placement.", "billeting.placement_client.", "billeting.commands.placement"))
              for target, (shown, lines) in edges.items() if target == "billeting.placement.store.tx"]
    assert not strays, strays


# Who may use Placement's HTTP layer from outside Placement, and why: the
# commands that serve Placement's application, and the in-process client that
# runs its handlers without a socket. Everyone else takes the shared HTTP
# plumbing (error document, request helpers, auth layers, Authorizer) from
# billeting.common.http.
_PLACEMENT_HTTP_USERS = {
    "billeting.commands.placement": "billeting serve builds Placement's application",
    "billeting.commands.up": "the all-in-one mounts Placement's application",
    "billeting.placement_client.inprocess": "runs Placement's handlers in this process",
}


def _placement_http_imports():
    return {module: sorted(f"{target}  ({shown}:{', '.join(map(str, lines))})"
                           for target, (shown, lines) in edges.items()
                           if target == "billeting.placement.api" or target.startswith("billeting.placement.api."))
            for module, edges in every_import().items()
            if module != "billeting.placement" and not module.startswith("billeting.placement.")}


def test_only_placement_uses_placement_http_layer():
    strays = {module: found for module, found in _placement_http_imports().items()
              if found and module not in _PLACEMENT_HTTP_USERS}
    assert not strays, ("modules outside billeting.placement import Placement's HTTP layer "
                        "(use billeting.common.http): " + repr(strays))


def test_the_placement_http_exceptions_are_still_needed():
    # An entry nobody needs any more would let a new stray in unnoticed.
    found = _placement_http_imports()
    assert all(found[module] for module in _PLACEMENT_HTTP_USERS), {m: found[m] for m in _PLACEMENT_HTTP_USERS}


def test_every_import_sees_function_local_imports(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/a.py").write_text("def f():\n    from pkg import b\n")
    (tmp_path / "pkg/b.py").write_text("")
    assert every_import(tmp_path / "pkg")["pkg.a"] == {"pkg.b": ("pkg/a.py", [2])}
    assert import_graph(tmp_path / "pkg")["pkg.a"] == {}
