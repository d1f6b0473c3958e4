"""No import cycles between billeting's modules (module-level imports only).

The graph is read from source with ``ast``; nothing is imported.  An edge
A -> B exists when A's module-level code imports B: top-level statements and
those nested in top-level ``if``/``try``/``with`` blocks count, imports inside
functions or classes' methods and ``if TYPE_CHECKING:`` blocks don't (they
run late or never, so they cannot deadlock a partial import).
``from pkg import name`` points at ``pkg.name`` when that is a submodule, at
``pkg`` otherwise.  Importing ``a.b.c`` also runs ``a`` and ``a.b``, but those
package ``__init__`` edges are implied, so only the named module is recorded.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import billeting

ROOT = Path(billeting.__file__).resolve().parent

# Cycles still present, as sorted tuples of module names.  This list may only
# shrink: remove an entry once its cycle is gone, never add one.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


@functools.cache
def _module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return False


def _module_level_imports(tree: ast.Module):
    """Yield import nodes that run when the module body runs."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                stack.extend(reversed(node.body))
            stack.extend(reversed(node.orelse))
        elif isinstance(node, (ast.Try, ast.TryStar)):
            for block in (node.body, node.orelse, node.finalbody):
                stack.extend(reversed(block))
            for handler in node.handlers:
                stack.extend(reversed(handler.body))
        elif isinstance(node, (ast.With, ast.For, ast.While)):
            stack.extend(reversed(node.body))
            stack.extend(reversed(getattr(node, "orelse", [])))
        # def / class bodies: a class body does run at import, but nothing in
        # billeting imports there; methods run late.  Skipped either way.


def _resolve_base(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_pkg:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    base = ".".join(parts)
    if node.module:
        base = f"{base}.{node.module}" if base else node.module
    return base


def import_graph() -> dict[str, dict[str, list[int]]]:
    """module -> {imported module -> [line numbers]} within billeting."""
    modules = _module_names()
    graph: dict[str, dict[str, list[int]]] = {m: {} for m in modules}
    for module, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in _module_level_imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve_base(module, is_pkg, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                # "import a.b.x" where x is a name, not a module: walk up.
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target:
                    graph[module].setdefault(target, []).append(node.lineno)
    return graph


def strongly_connected(graph: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is a few hundred nodes deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def find_cycles(graph) -> dict[tuple[str, ...], list[str]]:
    """Each cycle (SCC of size > 1, or a self-import) -> its edges, readable."""
    cycles = {}
    for component in strongly_connected(graph):
        members = set(component)
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        edges = []
        for module in component:
            path = _module_names()[module].relative_to(ROOT.parent)
            for target, lines in sorted(graph[module].items()):
                if target in members:
                    at = ", ".join(str(n) for n in lines)
                    edges.append(f"{module} -> {target}  ({path}:{at})")
        cycles[tuple(component)] = edges
    return cycles


def _report(cycles) -> str:
    out = []
    for component, edges in sorted(cycles.items()):
        out.append(f"cycle among {len(component)} module(s): {', '.join(component)}")
        out.extend(f"    {edge}" for edge in edges)
    return "\n".join(out)


def test_the_graph_sees_known_edges():
    # Guards the parser itself: a graph that found nothing would pass vacuously.
    graph = import_graph()
    assert "billeting.config" in graph["billeting.cli"]
    assert len(graph) > 200


def test_no_import_cycles():
    cycles = find_cycles(import_graph())
    new = {c: e for c, e in cycles.items() if c not in KNOWN_CYCLES}
    assert not new, (
        "import cycles between billeting modules (module-level imports).\n"
        "Each edge is 'importer -> imported (file:line)'; break one edge per "
        "cycle, usually by moving the shared name into a lower module both "
        "can import:\n" + _report(new)
    )
    gone = KNOWN_CYCLES - set(cycles)
    assert not gone, f"cycles fixed, drop them from KNOWN_CYCLES: {sorted(gone)}"


def test_tarjan_finds_self_loops_and_rings():
    graph = {
        "a": {"b": [1]},
        "b": {"c": [1]},
        "c": {"a": [1]},
        "d": {"d": [3]},
        "e": {"a": [1]},
    }
    assert set(find_cycles_in(graph)) == {("a", "b", "c"), ("d",)}


def find_cycles_in(graph):
    comps = strongly_connected(graph)
    return [tuple(c) for c in comps if len(c) > 1 or c[0] in graph[c[0]]]


def test_apidb_sits_below_the_conductor():
    # The API database's records are shared by the API and the move tasks;
    # the conductor reads them, never the other way round.
    upward = [f"{m} -> {t} (line {', '.join(map(str, lines))})"
              for m, edges in import_graph().items() if m.startswith("billeting.apidb")
              for t, lines in edges.items() if t.startswith("billeting.conductor")]
    assert not upward, upward
