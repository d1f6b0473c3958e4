"""The allocation candidates engine (docs/design/allocation-candidates.md): parsed request groups in,
allocation requests and provider summaries out. See ``engine`` for how a
search is planned and ``model`` for the interface types."""
from billeting.placement.candidates.engine import find
from billeting.placement.candidates.model import (
    CandidateRequest,
    CandidateResult,
    EngineAllocation,
    EngineCapacity,
    EngineSummary,
    ResolvedGroup,
    SingleProviderRequests,
)

__all__ = ["find", "CandidateRequest", "CandidateResult", "EngineAllocation", "EngineCapacity",
           "EngineSummary", "ResolvedGroup", "SingleProviderRequests"]
