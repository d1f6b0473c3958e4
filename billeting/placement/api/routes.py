"""The route table (docs/design/placement-http.md#routes): path template → resource class, loaded by name.

Routes match exactly; a trailing slash is a 404.
"""
from __future__ import annotations

import importlib

_TABLE = [
    ("/", "root:Root"),
    ("/resource_classes", "resource_classes:ResourceClasses"),
    ("/resource_classes/{name}", "resource_classes:ResourceClass"),
    ("/resource_providers", "resource_providers:ResourceProviders"),
    ("/resource_providers/{uuid}", "resource_providers:ResourceProvider"),
    ("/resource_providers/{uuid}/inventories", "inventories:Inventories"),
    ("/resource_providers/{uuid}/inventories/{resource_class}", "inventories:Inventory"),
    ("/resource_providers/{uuid}/usages", "usages:ProviderUsages"),
    ("/resource_providers/{uuid}/aggregates", "aggregates:ProviderAggregates"),
    ("/resource_providers/{uuid}/allocations", "allocations:ProviderAllocations"),
    ("/resource_providers/{uuid}/traits", "traits:ProviderTraits"),
    ("/allocations", "allocations:AllocationsBulk"),
    ("/allocations/{consumer_uuid}", "allocations:ConsumerAllocations"),
    ("/allocation_candidates", "allocation_candidates:AllocationCandidates"),
    ("/traits", "traits:Traits"),
    ("/traits/{name}", "traits:Trait"),
    ("/usages", "usages:Usages"),
    ("/reshaper", "reshaper:Reshaper"),
]


def load_routes() -> tuple[list[tuple[str, type]], list[str]]:
    """Return the loadable routes and the paths whose module is not written yet.

    ``tests/placement/api/test_routes.py`` asserts the second list is empty, so a
    missing handler module can never ship unnoticed.
    """
    routes, missing = [], []
    for path, ref in _TABLE:
        module_name, class_name = ref.split(":")
        full_name = f"billeting.placement.api.{module_name}"
        try:
            module = importlib.import_module(full_name)
        except ModuleNotFoundError as exc:
            if exc.name != full_name:
                raise
            missing.append(path)
            continue
        routes.append((path, getattr(module, class_name)))
    return routes, missing
