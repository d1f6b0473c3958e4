"""Identity for the all-in-one: a real Keystone beside ``billeting up``.

``billeting up`` runs Keystone (the ``keystone`` package, the optional
``billeting[identity]`` extra) in a child process on SQLite in the state
directory, turns keystonemiddleware on for the compute API, Placement and
the scheduler, and writes a ``clouds.yaml`` so that the ``openstack`` CLI
and openstacksdk work unchanged. ``layout`` names the files, ``keystone_server``
is the child, ``process`` starts and stops it. Production deployments point
keystonemiddleware at the operator's own Keystone instead
(docs/operator/identity.md).
"""
