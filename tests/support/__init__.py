"""Helpers the test folders share: waiting for a condition, a free port,
stopping a process. One of each, with one signature (docs/contributor/tests.md)."""
