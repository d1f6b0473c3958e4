"""MkDocs hook: the API and command references, generated at build time.

The API pages are rendered from the OpenAPI documents the services serve at
``GET /openapi.json`` and the command page from the argument parsers of
``billeting.cli``, so neither can drift from the code. The pages do not exist
in ``docs/``; ``on_files`` adds them to the build under ``reference/``.
"""
from __future__ import annotations

import argparse
import html
import json
import os
from collections.abc import Callable, Iterator

from mkdocs.structure.files import File, Files

_METHODS = ("get", "head", "post", "put", "patch", "delete")


# --- OpenAPI → Markdown ------------------------------------------------------

def _placement_document() -> dict:
    from billeting.placement.openapi import document_bytes
    return json.loads(document_bytes())


def _scheduler_document() -> dict:
    from billeting.scheduler.api.openapi import document
    return document()


def _compute_document() -> dict:
    from billeting.api.compute.openapi import document
    return document()


API_PAGES: dict[str, tuple[str, Callable[[], dict]]] = {
    "reference/placement-api.md": ("billeting serve", _placement_document),
    "reference/scheduler-api.md": ("billeting scheduler serve", _scheduler_document),
    "reference/compute-api.md": ("billeting compute-api serve", _compute_document),
}


def _resolve(document: dict, node: dict) -> dict:
    """Follow a local ``$ref`` (``#/components/...``) one level."""
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node
    target = document
    for part in ref[2:].split("/"):
        target = target[part]
    return target


def _ref_name(node: dict) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code_cell(text: str) -> str:
    """Code in a table cell: HTML with every character Markdown or the table
    syntax would act on written as an entity (a backquoted span cannot hold a pipe)."""
    escaped = html.escape(text)
    for char in "|[]*_`\\":
        escaped = escaped.replace(char, f"&#{ord(char)};")
    return f"<code>{escaped}</code>"


def _versions(node: dict) -> str:
    span = node.get("x-openstack-microversions")
    return f"{span.get('min', '')}–{span.get('max', '')}" if span else ""


def _schema_summary(document: dict, schema: dict) -> str:
    """A short description of a body schema: its component's name (linked), or its type."""
    name = _ref_name(schema)
    if name is not None:
        return f"[`{name}`](#schema-{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            parts = [_schema_summary(document, alt) for alt in schema[key]]
            return " or ".join(p for p in parts if p) or key
    return f"`{schema.get('type', 'object')}`" if schema else ""


def _body_schema(content: dict | None) -> dict | None:
    if not content:
        return None
    media = content.get("application/json") or next(iter(content.values()))
    return media.get("schema")


def _json_block(value: object) -> list[str]:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return ["```json", *text.splitlines(), "```", ""]


def _operation(document: dict, path: str, method: str, op: dict) -> list[str]:
    out = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        out += [_cell(op["summary"]), ""]
    if op.get("description"):
        out += [op["description"], ""]
    facts = []
    if _versions(op):
        facts.append(f"microversions {_versions(op)}")
    if op.get("x-openstack-policy"):
        facts.append(f"policy rule `{op['x-openstack-policy']}`")
    if op.get("security") == []:
        facts.append("no token needed")
    if facts:
        out += ["; ".join(facts).capitalize() + ".", ""]
    params = [_resolve(document, p) for p in op.get("parameters", [])]
    if params:
        out += ["| Parameter | In | Required | Schema | Description |", "|---|---|---|---|---|"]
        for p in params:
            schema = json.dumps(p.get("schema", {}), sort_keys=True, ensure_ascii=False)
            desc = p.get("description", "")
            if _versions(p):
                desc = f"{desc} (microversions {_versions(p)})".strip()
            out.append(f"| `{p['name']}` | {p.get('in', '')} | {'yes' if p.get('required') else 'no'} "
                       f"| {_code_cell(schema)} | {_cell(desc)} |")
        out.append("")
    body = op.get("requestBody")
    if body:
        body = _resolve(document, body)
        schema = _body_schema(body.get("content"))
        out += ["Request body" + (f" (microversions {_versions(body)})" if _versions(body) else "") + ":", ""]
        if schema is not None and _ref_name(schema) is not None:
            out += [_schema_summary(document, schema), ""]
        elif schema is not None:
            out += ['??? note "Schema"', ""] + ["    " + line for line in _json_block(schema)]
    responses = op.get("responses", {})
    if responses:
        inline = []  # answer bodies without a named schema: shown whole below the table
        out += ["| Status | Meaning | Body |", "|---|---|---|"]
        for status in sorted(responses, key=str):
            answer = _resolve(document, responses[status])
            schema = _body_schema(answer.get("content"))
            if schema is not None and _ref_name(schema) is None:
                inline.append((status, schema))
                summary = "below"
            else:
                summary = _schema_summary(document, schema) if schema else ""
            out.append(f"| {status} | {_cell(answer.get('description', ''))} | {summary} |")
        out.append("")
        for status, schema in inline:
            out += [f'??? note "{status} body"', ""] + ["    " + line for line in _json_block(schema)]
    return out


def render_openapi(document: dict, command: str) -> str:
    info = document.get("info", {})
    out = [f"# {info.get('title', 'API')}", "",
           "!!! note \"Generated\"",
           f"    Rendered at build time from the OpenAPI document `{command}` serves at "
           "`GET /openapi.json` (version "
           f"{info.get('version', '?')}). Edit the code, not this page.", ""]
    if info.get("description"):
        out += [info["description"], ""]
    operations = [(path, method, item[method]) for path, item in sorted(document.get("paths", {}).items())
                  for method in _METHODS if method in item]
    out += ["## Operations", "", "| Method | Path | Summary |", "|---|---|---|"]
    for path, method, op in operations:
        out.append(f"| {method.upper()} | `{path}` | {_cell(op.get('summary', ''))} |")
    out += [""]
    for path, method, op in operations:
        out += _operation(document, path, method, op)
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        out += ["## Schemas", ""]
        for name in sorted(schemas):
            out += [f"### {name} {{#schema-{name.lower()}}}", ""]
            out += _json_block(schemas[name])
    return "\n".join(out) + "\n"


# --- argparse → Markdown ------------------------------------------------------

def _commands(parser: argparse.ArgumentParser, words: list[str]) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, words + [name])


def render_commands() -> str:
    from billeting.cli import build_parser
    out = ["# Commands", "",
           "!!! note \"Generated\"",
           "    Rendered at build time from the argument parsers of `billeting/cli.py` and the command "
           "modules it registers: each section is that command's `--help`. Edit the code, not this page.", ""]
    old_columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: one width for every build
    try:
        for words, parser in _commands(build_parser(), ["billeting"]):
            out += [f"## `{' '.join(words)}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    finally:
        if old_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_columns
    return "\n".join(out) + "\n"


def generated_pages() -> dict[str, str]:
    pages = {path: render_openapi(load(), command) for path, (command, load) in API_PAGES.items()}
    pages["reference/commands.md"] = render_commands()
    return pages


def on_files(files: Files, config) -> Files:
    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    return files
