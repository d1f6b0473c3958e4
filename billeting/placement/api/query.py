"""Parsers for the query expressions shared by ``GET /resource_providers`` and
``GET /allocation_candidates``: ``resources``, ``member_of`` and ``required``.

They turn strings into typed, still name-based values; resolving names to
ids (and the "no such" errors) happens where the database is at hand.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from billeting.placement.api.errors import HTTPProblem
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
    """``RC:AMOUNT[,RC:AMOUNT]`` → {RC: amount}; a repeated class keeps its last amount."""
    if not value:
        raise HTTPProblem(400, _RESOURCES_FORM + "empty string.")
    result: dict[str, int] = {}
    for element in value.split(","):
        parts = element.split(":")
        if len(parts) != 2:
            raise HTTPProblem(400, _RESOURCES_FORM + f"{element}.")
        rc, raw = parts[0].strip(), parts[1].strip()
        try:
            amount = int(raw)
        except ValueError:
            raise HTTPProblem(
                400, f"Requested resource {rc} expected positive integer amount. Got: {raw}.") from None
        if amount < 1:
            raise HTTPProblem(400, f"Requested resource {rc} requires amount >= 1. Got: {amount}.")
        result[rc] = amount
    return result


def parse_member_of(values: list[str], mv: tuple[int, int], key: str = "member_of") -> MemberOfExpr:
    """All occurrences of a ``member_of`` key (AND-ed from 1.24)."""
    if len(values) > 1 and mv < (1, 24):
        raise HTTPProblem(400, f"Multiple {key} parameters are not supported")
    expr = MemberOfExpr()
    for value in values:
        forbidden = value.startswith("!")
        if forbidden and mv < (1, 32):
            raise HTTPProblem(
                400, "Forbidden member_of parameters are not supported in the specified microversion")
        body = value[1:] if forbidden else value
        if body.startswith("in:"):
            uuids = body[3:].split(",")
        elif "," in body:
            raise HTTPProblem(
                400, f"Multiple values for '{key}' must be prefixed with the 'in:' or '!in:' keyword "
                     f"using the valid microversion. Got: {value}")
        else:
            uuids = [body]
        if not uuids or not all(is_uuid_like(u) for u in uuids):
            raise HTTPProblem(
                400, f"Invalid query string parameters: Expected '{key}' parameter to contain "
                     f"valid UUID(s). Got: {value}")
        if forbidden:
            expr.forbidden.update(uuids)
        else:
            expr.required.append(set(uuids))
    return expr


def parse_required(values: list[str], mv: tuple[int, int], key: str = "required") -> TraitExpr:
    """A ``required`` key's occurrences: last only before 1.39, all AND-ed after."""
    if mv < (1, 39):
        values = values[-1:]
    expr = TraitExpr()
    example = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if mv >= (1, 22) else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
    for value in values:
        if value.startswith("in:"):
            if mv < (1, 39):
                raise HTTPProblem(
                    400, "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
                         f"only supported since microversion 1.39. Got: {value}")
            names = value[3:].split(",")
            if any(not n for n in names):
                raise HTTPProblem(
                    400, f"Invalid query string parameters: Expected '{key}' parameter value of the "
                         f"form: {example}. Got an empty trait in: {value}")
            if any(n.startswith("!") for n in names):
                raise HTTPProblem(
                    400, "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
                         f"does not support forbidden traits. Got: {value}")
            expr.required.append(set(names))
            continue
        names = value.split(",")
        if any(not n.lstrip("!") for n in names):
            raise HTTPProblem(
                400, f"Invalid query string parameters: Expected '{key}' parameter value of the "
                     f"form: {example}. Got an empty trait in: {value}")
        for name in names:
            if name.startswith("!"):
                if mv < (1, 22):
                    raise HTTPProblem(
                        400, f"Invalid query string parameters: Expected '{key}' parameter value of "
                             f"the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}")
                expr.forbidden.add(name.lstrip("!"))
            else:
                expr.required.append({name})
    return expr


def validate_uuid_param(value: str, key: str) -> str:
    if not is_uuid_like(value):
        raise HTTPProblem(400, f"Invalid query string parameters: '{value}' is not a 'uuid'")
    return value
