"""The scheduler as a service: its state in the API database and the
operations its front doors (HTTP, RPC, CLI) share.

* ``runtime``  — ``SchedulerService``: Placement client + API database +
  directory + catalog + ``Scheduler``, and ``select`` with server groups;
* ``topology`` — failure domains (define from hosts or members, remove, list);
* ``zones``    — availability zones as aggregates;
* ``metadata`` — metadata on any aggregate (tenant isolation, multipliers);
* ``groups``   — server groups;
* ``hosts``    — host reports;
* ``sync``     — keeping Placement's aggregate memberships in step.

Operations raise ``billeting.scheduler.errors.SchedulerError`` subclasses
that carry an HTTP status and an error code, so every front door reports
them the same way.
"""
