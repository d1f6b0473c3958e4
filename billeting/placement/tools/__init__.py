"""Operator tools for any Placement service, behind ``billeting placement``:
``export`` and ``import`` of a whole fleet as JSON, and ``audit``."""
