"""Small pieces shared by the services (below them: they import nothing of a service)."""
