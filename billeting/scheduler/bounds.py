"""The largest numbers a caller may ask the scheduler for. Both APIs (the
scheduler's and the compute API's) refuse more with a 400 naming the bound,
so a request's cost never grows with a number the caller picks and no
request asks Placement for what it can never hold."""
from __future__ import annotations

# Placement's largest amount of one class (its candidates.sql.MAX_AMOUNT;
# a test keeps the two equal): more is a bad request, never "no valid host".
MAX_AMOUNT = 2**31 - 1

# The most vCPUs one guest may have: QEMU/KVM's ceiling on x86, the largest
# of any hypervisor. The mixed CPU policy's masks are read per vCPU.
MAX_VCPUS = 4096


def over_amount(groups) -> tuple[str, int] | None:
    """The first (class, amount) of request groups beyond ``MAX_AMOUNT``, or None."""
    for group in groups:
        for rc, amount in group.resources.items():
            if amount > MAX_AMOUNT:
                return rc, amount
    return None
