"""Nova's extra-spec operators: does a host's value meet a flavor's requirement?

A requirement is a value, or an operator and its operands separated by
spaces (docs/design/filters-and-weighers.md#extra-spec-operators):

* ``=`` numeric *at least* (a long-standing quirk), ``==``, ``!=``, ``>=``,
  ``<=`` numeric;
* ``s==``, ``s!=``, ``s<``, ``s<=``, ``s>``, ``s>=`` string comparison;
* ``<in> x`` the value contains ``x``; ``<all-in> x y`` it contains each;
* ``<or> a <or> b`` the value is one of them;
* anything else: the value equals the requirement exactly.

A numeric operator on a value that is not a number does not match.
"""
from __future__ import annotations

import operator
from collections.abc import Callable

_NUMERIC: dict[str, Callable[[float, float], bool]] = {
    "=": operator.ge, "==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le}
_STRING: dict[str, Callable[[str, str], bool]] = {
    "s==": operator.eq, "s!=": operator.ne, "s<": operator.lt, "s<=": operator.le, "s>": operator.gt,
    "s>=": operator.ge}


def matches(value: str, requirement: str) -> bool:
    words = requirement.split()
    if len(words) < 2:
        return value == requirement.strip()
    op, operands = words[0], words[1:]
    if op in _NUMERIC:
        try:
            return _NUMERIC[op](float(value), float(operands[0]))
        except ValueError:
            return False
    if op in _STRING:
        return _STRING[op](value, operands[0])
    if op == "<in>":
        return operands[0] in value
    if op == "<all-in>":
        return all(word in value for word in operands)
    if op == "<or>":
        return value in words[1::2]
    return value == requirement
