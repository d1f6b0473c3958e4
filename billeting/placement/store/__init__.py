"""Persistence: tables, engines, transactions, migrations."""
