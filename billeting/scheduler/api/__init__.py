"""The scheduler's HTTP API (``billeting scheduler serve``): one module per
resource, the cross-cutting layers (request ids, auth, policy, errors,
JSON schemas) shared with Placement's API.

    POST   /selections                     place instances (or dry-run)
    POST   /server_groups, GET /server_groups, GET|DELETE /server_groups/{uuid}
    GET    /topology, GET /topology/{level}, PUT|GET|DELETE /topology/{level}/{name}
    GET    /availability_zones, PUT|GET|DELETE /availability_zones/{name}
    GET    /aggregates, PUT|GET|DELETE /aggregates/{uuid}
    GET    /hosts, PUT|GET|DELETE /hosts/{name}
    GET    /                               version document (no auth)
"""
