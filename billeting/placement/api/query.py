"""Parsers for the query expressions shared by ``GET /resource_providers`` and
``GET /allocation_candidates``: ``resources``, ``member_of`` and ``required``.

They turn strings into typed, still name-based values; resolving names to
ids (and the "no such" errors) happens where the database is at hand.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from billeting.common.http.errors import HTTPProblem
from billeting.placement.api.util import is_uuid_like

_RESOURCES_FORM = ("Badly formed resources parameter. Expected resources query string "
                   "parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: ")


@dataclass(slots=True)
class MemberOfExpr:
    required: list[set[str]] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)


@dataclass(slots=True)
class TraitExpr:
    required: list[set[str]] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)

    def names(self) -> set[str]:
        found = set(self.forbidden)
        for any_of in self.required:
            found |= any_of
        return found


def parse_resources(value: str) -> dict[str, int]:
    """``RC:AMOUNT[,RC:AMOUNT]`` → {RC: amount}; a repeated class keeps its last amount.

    Class names are taken as written (" VCPU" is no class), as upstream does.
    """
    if not value.strip():
        raise HTTPProblem(400, _RESOURCES_FORM + "empty string.")
    result: dict[str, int] = {}
    for element in value.split(","):
        parts = element.split(":")
        if len(parts) != 2:
            raise HTTPProblem(400, _RESOURCES_FORM + f"{element}.")
        rc, raw = parts
        try:
            amount = int(raw)
        except ValueError:
            raise HTTPProblem(
                400, f"Requested resource {rc} expected positive integer amount. Got: {raw}.") from None
        if amount < 1:
            raise HTTPProblem(400, f"Requested resource {rc} requires amount >= 1. Got: {amount}.")
        result[rc] = amount
    return result


def _member_of_value(value: str) -> tuple[list[str], list[str]]:
    """One ``member_of`` value → (any-of uuids, forbidden uuids)."""
    if "," in value and not value.startswith(("in:", "!in:")):
        raise HTTPProblem(
            400, "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword "
                 f"using the valid microversion. Got: {value}")
    required: list[str] = []
    forbidden: list[str] = []
    if value.startswith("!in:"):
        forbidden = value[4:].split(",")
    elif value.startswith("!"):
        forbidden = [value[1:]]
    elif value.startswith("in:"):
        required = value[3:].split(",")
    else:
        required = [value]
    for uuid in required + forbidden:
        if not is_uuid_like(uuid):
            raise HTTPProblem(
                400, "Invalid query string parameters: Expected 'member_of' parameter to contain "
                     f"valid UUID(s). Got: {uuid}")
    return required, forbidden


def parse_member_of(values: list[str], mv: tuple[int, int], suffix: str = "") -> MemberOfExpr:
    """All occurrences of a ``member_of<suffix>`` key (AND-ed from 1.24)."""
    if len(values) > 1 and mv < (1, 24):
        raise HTTPProblem(400, f"Multiple member_of{suffix} parameters are not supported")
    expr = MemberOfExpr()
    for value in values:
        required, forbidden = _member_of_value(value)
        if required:
            expr.required.append(set(required))
        if forbidden:
            if mv < (1, 32):
                raise HTTPProblem(400, f"Forbidden member_of{suffix} parameters are not supported "
                                       "in the specified microversion")
            expr.forbidden.update(forbidden)
    return expr


_ANY_OF_FORM = "in:HW_CPU_X86_VMX,CUSTOM_MAGIC"
_WITH_FORBIDDEN_FORM = "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
_PLAIN_FORM = "HW_CPU_X86_VMX,CUSTOM_MAGIC"


def parse_trait_value(value: str, *, allow_forbidden: bool, allow_any_of: bool) -> TraitExpr:
    """One ``required``-style value: ``A,!B`` or (from 1.39) ``in:A,B``.

    Names are stripped of surrounding blanks and any number of leading
    ``!`` mark a forbidden trait (Quirk docs/design/placement-quirks.md#q4), as upstream parses them.
    """
    expr = TraitExpr()
    if value.startswith("in:"):
        if not allow_any_of:
            raise HTTPProblem(
                400, f"Invalid query string parameters: The format '{_ANY_OF_FORM}' only supported "
                     f"since microversion 1.39. Got: {value}")
        any_of = {name.strip() for name in value[3:].split(",")}
        if not all(any_of):
            raise HTTPProblem(
                400, "Invalid query string parameters: Expected 'required' parameter value of the "
                     f"form: {_ANY_OF_FORM}. Got an empty trait in: {value}")
        if any(name.startswith("!") for name in any_of):
            raise HTTPProblem(
                400, f"Invalid query string parameters: The format '{_ANY_OF_FORM}' does not support "
                     f"forbidden traits. Got: {value}")
        expr.required.append(any_of)
        return expr
    names = [name.strip() for name in value.split(",")]
    forbidden = {name.lstrip("!") for name in names if name.startswith("!")}
    if not all(names) or not all(forbidden):
        form = _WITH_FORBIDDEN_FORM if allow_forbidden else _PLAIN_FORM
        raise HTTPProblem(
            400, "Invalid query string parameters: Expected 'required' parameter value of the "
                 f"form: {form}. Got an empty trait in: {value}")
    if forbidden and not allow_forbidden:
        raise HTTPProblem(
            400, "Invalid query string parameters: Expected 'required' parameter value of the "
                 f"form: {_PLAIN_FORM}. Got: {value}")
    expr.required = [{name} for name in names if not name.startswith("!")]
    expr.forbidden = forbidden
    return expr


def parse_required(values: list[str], mv: tuple[int, int]) -> TraitExpr:
    """A ``required`` key's occurrences: last only before 1.39, all AND-ed after."""
    if mv < (1, 39):
        values = values[-1:]
    expr = TraitExpr()
    for value in values:
        one = parse_trait_value(value, allow_forbidden=mv >= (1, 22), allow_any_of=mv >= (1, 39))
        expr.required.extend(one.required)
        expr.forbidden |= one.forbidden
    return expr
