"""Service code decodes and converts msgspec types only through
``billeting.typeinfo`` (issue 28): a type's decoding info built on a request
thread, by two threads at once, crashed the process. A new ``msgspec.convert``
or typed decode elsewhere fails here."""
from __future__ import annotations

import ast
from pathlib import Path

import billeting

PACKAGE = Path(billeting.__file__).parent
# Commands that decode in their own single thread, never on a request or message thread.
SINGLE_THREADED = ("typeinfo.py", "commands/scheduler.py", "sim/", "placement/tools/")
BUILDS_INFO = {"convert", "Decoder", "decode"}  # decode builds info only when given a type


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _offending(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("msgspec"):
            found += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if a.name in BUILDS_INFO]
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if not name.startswith("msgspec.") or name.rsplit(".", 1)[-1] not in BUILDS_INFO:
            continue
        typed = len(node.args) > 1 or any(k.arg == "type" for k in node.keywords)
        if name.endswith(".decode") and not typed:
            continue
        found.append(f"line {node.lineno}: {name}")
    return found


def test_service_code_decodes_msgspec_types_only_through_typeinfo():
    offending = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(SINGLE_THREADED):
            continue
        if found := _offending(ast.parse(path.read_text(), str(path))):
            offending[relative] = found
    assert not offending, f"use billeting.typeinfo.decoder/converter at module level: {offending}"


def test_the_scan_sees_each_form():
    source = ("import msgspec\nfrom msgspec.json import Decoder\nmsgspec.convert(x, T)\n"
              "msgspec.json.decode(b, type=T)\nmsgspec.msgpack.Decoder(T)\nmsgspec.json.decode(b)\n")
    assert _offending(ast.parse(source)) == [
        "line 2: from msgspec.json import Decoder", "line 3: msgspec.convert",
        "line 4: msgspec.json.decode", "line 5: msgspec.msgpack.Decoder"]
