"""Conductors: the super conductor (API level) and cell conductors."""
