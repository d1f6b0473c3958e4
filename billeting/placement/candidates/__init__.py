"""The allocation candidates engine (docs/design/allocation-candidates.md): parsed request groups in,
allocation requests and provider summaries out. See ``engine`` for how a
search is planned and ``model`` for the interface types."""
from billeting.placement.candidates.engine import find
from billeting.placement.candidates.model import (
    AllocationRequest,
    CandidateRequest,
    CandidateResult,
    Capacity,
    ProviderSummary,
    RequestGroup,
    SingleProviderRequests,
)

__all__ = ["find", "AllocationRequest", "CandidateRequest", "CandidateResult", "Capacity",
           "ProviderSummary", "RequestGroup", "SingleProviderRequests"]
