"""Billeting: a Placement-compatible control plane."""
