"""The Placement HTTP API: one module per resource, cross-cutting layers once each."""
