"""JSON schemas for request bodies, one module per resource, by microversion."""
