"""A service's policy rules checked for the caller of a request; a refusal is a 403."""
from __future__ import annotations

from billeting.common.http.context import RequestContext
from billeting.common.http.errors import HTTPProblem
from billeting.common.policy import RuleEnforcer


class Authorizer(RuleEnforcer):
    """``RuleEnforcer`` for a ``RequestContext``: the target defaults to the
    caller's own project and user."""

    def allowed(self, ctx: RequestContext, rule: str, target: dict | None = None) -> bool:
        target = target if target is not None else {
            "project_id": ctx.project_id, "user_id": ctx.user_id}
        return self.check(ctx.policy_creds(), rule, target)

    def authorize(self, ctx: RequestContext, rule: str, target: dict | None = None) -> None:
        if not self.allowed(ctx, rule, target):
            raise HTTPProblem(403, f"Policy does not allow {rule} to be performed.")
