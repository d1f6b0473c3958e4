"""Database plumbing every service shares: engines, transactions with retry, outage reasons."""
