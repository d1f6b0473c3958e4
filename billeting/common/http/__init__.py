"""HTTP plumbing every service shares: the request context."""
