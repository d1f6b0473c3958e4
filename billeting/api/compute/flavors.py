"""``/flavors`` and ``/flavors/{id}/os-extra_specs``."""
from __future__ import annotations

import math
import re
import uuid as uuidlib

import falcon

from billeting.api.compute import paging, schemas, views
from billeting.api.compute.context import ComputeAPIDeps, RequestContext
from billeting.api.compute.errors import NovaError, bad_request, conflict, not_found
from billeting.apidb import flavors
from billeting.scheduler.bounds import MAX_AMOUNT, MAX_VCPUS
from billeting.scheduler.nova import _SPEC_KEY, _valid_class

_AMOUNT = re.compile(r"^[0-9]+$")


def visible(deps: ComputeAPIDeps, ctx: RequestContext, flavor_id: str) -> flavors.StoredFlavor | None:
    """The flavor as Nova lets the caller see it: an admin any, anyone else
    the public ones and the private ones open to their project."""
    return flavors.get_for(deps.api_engine, flavor_id, None if ctx.is_admin else ctx.project_id)


def flavor_or_404(deps: ComputeAPIDeps, ctx: RequestContext, flavor_id: str) -> flavors.StoredFlavor:
    found = visible(deps, ctx, flavor_id)
    if found is None:
        raise not_found(f"Flavor {flavor_id} could not be found.")
    return found


def _is_public_filter(value: str | None) -> bool | None:
    """An admin's ``is_public``: public ones by default, ``none`` every
    flavor, else a boolean (strictly)."""
    if value is None:
        return True
    if value.strip().lower() == "none":
        return None
    try:
        return _bool(value, "is_public")
    except NovaError:
        raise bad_request(f"Invalid is_public filter [{value}]") from None


def _bool(value, field: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on", "t", "y"):
        return True
    if text in ("false", "0", "no", "off", "f", "n"):
        return False
    raise bad_request(f"Invalid input for field/attribute {field}. Value: {value}.")


def check_extra_specs(specs: dict[str, str]) -> None:
    """The Placement terms of extra specs must make sense (the scheduler would skip them silently)."""
    for key, value in specs.items():
        match = _SPEC_KEY.match(key)
        if not match:
            continue
        if match.group(1) == "resources":
            if not _valid_class(match.group(3)) or not _AMOUNT.match(str(value)):
                raise bad_request(f"Validation failed; extra spec {key}={value}: expected a resource class and "
                                  f"a non-negative amount.")
            if int(value) > MAX_AMOUNT:
                raise bad_request(f"Validation failed; extra spec {key}={value}: an amount is at most "
                                  f"{MAX_AMOUNT}, the most Placement holds.")
        elif value not in ("required", "forbidden"):
            raise bad_request(f"Validation failed; extra spec {key}={value}: expected required or forbidden.")


def _check_sizes(vcpus: int, disk: int, ephemeral: int, swap_mb: int) -> None:
    """Bounds beyond the columns': a guest's vCPUs (the mixed CPU policy's
    masks are read per vCPU), and the DISK_GB the scheduler asks Placement
    for (root + ephemeral + swap), which no provider can hold beyond ``MAX_AMOUNT``."""
    if vcpus > MAX_VCPUS:
        raise bad_request(f"Invalid input for field/attribute vcpus. Value: {vcpus}. A flavor has at most "
                          f"{MAX_VCPUS} vCPUs.")
    if disk + ephemeral + math.ceil(swap_mb / 1024) > MAX_AMOUNT:
        raise bad_request(f"Invalid input for field/attribute flavor. disk + ephemeral + swap (in GiB) is at most "
                          f"{MAX_AMOUNT}, the most DISK_GB Placement holds.")


class Flavors:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def _list(self, req, resp, detail: bool) -> None:
        ctx: RequestContext = req.context.nova
        # As Nova: only an admin filters by is_public; everyone (an admin
        # too, by default) sees the public flavors and those open to their project.
        is_public = _is_public_filter(req.params.get("is_public")) if ctx.is_admin else True
        found = flavors.listing(self.deps.api_engine, is_public=is_public, project_id=ctx.project_id)
        for key, attr in (("minRam", "memory_mb"), ("minDisk", "root_gb")):
            if key in req.params:
                try:
                    floor = int(req.params[key])
                except ValueError:
                    raise bad_request(f"Invalid {key} filter [{req.params[key]}]") from None
                found = [f for f in found if getattr(f, attr) >= floor]
        found, links = paging.page(found, req, "flavors/detail" if detail else "flavors", lambda f: f.flavorid)
        resp.media = {"flavors": [views.flavor(f, version=ctx.version, base=req.prefix, detail=detail)
                                  for f in found], **({"flavors_links": links} if links else {})}

    def on_get(self, req, resp) -> None:
        self._list(req, resp, False)

    def on_get_detail(self, req, resp) -> None:
        self._list(req, resp, True)

    def on_post(self, req, resp) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-flavor-manage:create")
        doc = schemas.body(req)
        schemas.check(doc, schemas.FLAVOR_CREATE)
        f = doc["flavor"]
        flavorid = f.get("id")
        flavorid = str(flavorid).strip() if flavorid not in (None, "auto") else str(uuidlib.uuid4())
        if not flavorid:
            raise bad_request("Invalid input for field/attribute id: an id must not be empty.")
        if f.get("description") is not None and not ctx.version.at_least(55):
            raise bad_request("Invalid input for field/attribute flavor: description needs microversion 2.55.")
        swap = f.get("swap", 0)
        swap = int(swap) if swap != "" else 0
        _check_sizes(int(f["vcpus"]), int(f["disk"]), int(f.get("OS-FLV-EXT-DATA:ephemeral", 0)), swap)
        try:
            created = flavors.create(
                self.deps.api_engine, flavorid=flavorid, name=f["name"].strip(), vcpus=int(f["vcpus"]),
                memory_mb=int(f["ram"]), root_gb=int(f["disk"]),
                ephemeral_gb=int(f.get("OS-FLV-EXT-DATA:ephemeral", 0)), swap=swap,
                rxtx_factor=float(f.get("rxtx_factor", 1.0)), description=f.get("description"),
                is_public=_bool(f.get("os-flavor-access:is_public", True), "os-flavor-access:is_public"))
        except flavors.FlavorExists as exc:
            raise conflict(str(exc)) from None
        except (ValueError, OverflowError):
            raise bad_request("Invalid input for field/attribute flavor: numbers out of range.") from None
        resp.media = {"flavor": views.flavor(created, version=ctx.version, base=req.prefix)}


class Flavor:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp, flavor_id: str) -> None:
        ctx: RequestContext = req.context.nova
        resp.media = {"flavor": views.flavor(flavor_or_404(self.deps, ctx, flavor_id), version=ctx.version,
                                             base=req.prefix)}

    def on_delete(self, req, resp, flavor_id: str) -> None:
        req.context.nova.authorize("os_compute_api:os-flavor-manage:delete")
        if not flavors.delete_flavor(self.deps.api_engine, flavor_id):
            raise not_found(f"Flavor {flavor_id} could not be found.")
        resp.status = falcon.HTTP_202


def _spec_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _set_specs(deps: ComputeAPIDeps, flavor_id: str, specs: dict[str, str]) -> dict[str, str] | None:
    try:
        return flavors.set_extra_specs(deps.api_engine, flavor_id, specs)
    except flavors.SpecsTooLarge as exc:
        raise bad_request(f"Validation failed; {exc}") from None


class ExtraSpecs:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp, flavor_id: str) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-flavor-extra-specs:index")
        resp.media = {"extra_specs": flavor_or_404(self.deps, ctx, flavor_id).extra_specs}

    def on_post(self, req, resp, flavor_id: str) -> None:
        req.context.nova.authorize("os_compute_api:os-flavor-extra-specs:create")
        doc = schemas.body(req)
        schemas.check(doc, schemas.EXTRA_SPECS)
        specs = {k: _spec_text(v) for k, v in doc["extra_specs"].items()}
        check_extra_specs(specs)
        if _set_specs(self.deps, flavor_id, specs) is None:
            raise not_found(f"Flavor {flavor_id} could not be found.")
        resp.media = {"extra_specs": specs}


class ExtraSpec:
    def __init__(self, deps: ComputeAPIDeps) -> None:
        self.deps = deps

    def on_get(self, req, resp, flavor_id: str, key: str) -> None:
        ctx: RequestContext = req.context.nova
        ctx.authorize("os_compute_api:os-flavor-extra-specs:show")
        specs = flavor_or_404(self.deps, ctx, flavor_id).extra_specs
        if key not in specs:
            raise not_found(f"Flavor {flavor_id} has no extra specs with key {key}.")
        resp.media = {key: specs[key]}

    def on_put(self, req, resp, flavor_id: str, key: str) -> None:
        req.context.nova.authorize("os_compute_api:os-flavor-extra-specs:update")
        doc = schemas.body(req)
        schemas.check(doc, schemas.EXTRA_SPEC_ONE)
        if key not in doc:
            raise bad_request("Request body and URI mismatch")
        value = _spec_text(doc[key])
        check_extra_specs({key: value})
        if _set_specs(self.deps, flavor_id, {key: value}) is None:
            raise not_found(f"Flavor {flavor_id} could not be found.")
        resp.media = {key: value}

    def on_delete(self, req, resp, flavor_id: str, key: str) -> None:
        req.context.nova.authorize("os_compute_api:os-flavor-extra-specs:delete")
        done = flavors.delete_extra_spec(self.deps.api_engine, flavor_id, key)
        if done is None:
            raise not_found(f"Flavor {flavor_id} could not be found.")
        if not done:
            raise NovaError(404, f"Flavor {flavor_id} has no extra specs with key {key}.")
