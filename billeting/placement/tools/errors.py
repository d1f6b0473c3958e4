"""The one error type of the operator tools."""
from __future__ import annotations


class ToolError(Exception):
    """A failure the operator can act on; ``billeting`` prints it as one line
    and exits with ``exit_code`` (1: a runtime failure, as for every command)."""

    exit_code = 1
