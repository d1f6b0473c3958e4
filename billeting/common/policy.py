"""oslo.policy enforcement shared by the services (Placement, scheduler API, compute API).

Each service names its own default rules; this module loads them with an
optional operator policy file, answers "is this allowed" for a set of
credentials, and follows edits of the policy file while the service runs.
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy as oslo_policy

LOG = logging.getLogger(__name__)

_MAX_CACHED_DECISIONS = 10_000


def scope_is_configurable() -> bool:
    """Whether the installed oslo.policy still has ``[oslo_policy] enforce_scope``
    (from oslo.policy 5 scope is always enforced and the option is gone)."""
    return any(opt.name == "enforce_scope" for opt in policy_opts._options)


class PolicyFileError(ValueError):
    """The policy file cannot be read or parsed; one line naming it."""


def _one_line(exc: BaseException) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def _hashable(value):
    return tuple(sorted(value)) if isinstance(value, (list, tuple, set, frozenset)) else value


class RuleEnforcer:
    """Evaluates a named rule for credentials and a target.

    The rules are loaded once into an oslo.policy enforcer and then frozen:
    the enforcer never re-reads files by itself. When the operator's policy
    file changes, a new enforcer is built from it and swapped in; if the new
    file cannot be read or parsed the old rules stay in force, the problem is
    logged once, and requests are answered as before (never a 500).

    ``defaults`` makes the service's rule defaults afresh for each enforcer;
    ``log``: the service's logger, that reloads and refusals are logged under.
    """

    def __init__(self, defaults: Callable[[], list[oslo_policy.RuleDefault]], *, policy_file: str | None = None,
                 legacy: bool = False, enforce_scope: bool = True, log: logging.Logger = LOG) -> None:
        # Absolute: oslo.policy would look a relative name up in its config
        # directories, not where the operator is.
        self._policy_file = os.path.abspath(policy_file) if policy_file else None
        self._defaults = defaults
        self._log = log
        self._legacy = legacy
        self._enforce_scope = enforce_scope
        self._lock = threading.Lock()
        self._policy_stamp = self._file_stamp()
        self._enforcer = self._build()  # raises PolicyFileError at start-up
        # oslo.policy spends ~300 µs per check (file look-ups, argspec
        # introspection); a decision depends only on the rule, the
        # credentials and the target, so identical questions are answered
        # from here until the rules change.
        self._decisions: dict[tuple, bool] = {}

    def _build(self) -> oslo_policy.Enforcer:
        if self._policy_file:
            try:
                with open(self._policy_file, "rb"):
                    pass
            except OSError as exc:
                raise PolicyFileError(f"cannot read policy file {self._policy_file}: {exc.strerror}") from None
        conf = cfg.ConfigOpts()
        conf([], project="billeting", default_config_files=[])
        policy_opts.set_defaults(conf)
        # Per-object overrides: set_defaults() would change oslo.policy's
        # module-wide defaults for every enforcer in the process.
        conf.set_override("enforce_new_defaults", not self._legacy, group="oslo_policy")
        if scope_is_configurable():
            conf.set_override("enforce_scope", self._enforce_scope, group="oslo_policy")
        # Rules come from the named file only: no policy.d directories and no
        # policy.yaml found by searching ~ or /etc.
        conf.set_override("policy_dirs", [], group="oslo_policy")
        conf.set_override("policy_file", self._policy_file or os.devnull, group="oslo_policy")
        enforcer = oslo_policy.Enforcer(conf, policy_file=self._policy_file or os.devnull, use_conf=True)
        # As upstream: the deprecated alternatives are OR-ed in legacy mode
        # without a warning per rule (start-up logs one line instead).
        enforcer.suppress_default_change_warnings = True
        enforcer.register_defaults(self._defaults())
        try:
            # use_conf must be on here: oslo.policy only merges the registered
            # defaults into its rule set while loading from configuration.
            enforcer.load_rules()
        except Exception as exc:  # noqa: BLE001 - anything a broken file makes oslo.policy raise
            raise PolicyFileError(f"policy file {self._policy_file}: {_one_line(exc)}") from None
        enforcer.use_conf = False  # frozen: enforce() no longer looks at the file
        return enforcer

    def _file_stamp(self) -> tuple[int, int] | None:
        if not self._policy_file:
            return None
        try:
            info = os.stat(self._policy_file)
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size)

    def _follow_policy_file(self) -> None:
        stamp = self._file_stamp()
        if stamp == self._policy_stamp:
            return
        with self._lock:
            if stamp == self._policy_stamp:
                return
            self._policy_stamp = stamp  # a failure is reported once per version of the file
            if stamp is None:
                self._log.error("policy file %s cannot be read any more; keeping the previous rules",
                          self._policy_file)
                return
            try:
                enforcer = self._build()
            except PolicyFileError as exc:
                self._log.error("%s; keeping the previous rules", exc)
                return
            self._enforcer = enforcer
            self._decisions = {}
            self._log.info("policy file %s reloaded", self._policy_file)

    def check(self, creds: dict, rule: str, target: dict) -> bool:
        """Whether ``rule`` allows ``creds`` (oslo.policy's credential keys) on ``target``."""
        if self._policy_file:
            self._follow_policy_file()
        key = (rule, tuple((k, _hashable(v)) for k, v in sorted(creds.items())),
               tuple(sorted(target.items())))
        decisions = self._decisions
        decision = decisions.get(key)
        if decision is None:
            decision = self._evaluate(creds, rule, target)
            if len(decisions) >= _MAX_CACHED_DECISIONS:
                decisions.clear()
            decisions[key] = decision
        return decision

    def _evaluate(self, creds: dict, rule: str, target: dict) -> bool:
        try:
            return bool(self._enforcer.authorize(rule, target, creds, do_raise=False))
        except oslo_policy.InvalidScope:
            return False


# The persona base rules Placement and the scheduler API build on (their
# operation rules name these, and an operator's file may override them).
ADMIN = "role:admin"
BASE_RULES = [
    ("admin_api", "role:admin"),
    ("service_api", "role:service"),
    ("admin_or_service_api", "role:admin or role:service"),
    ("project_reader_api", "role:reader and project_id:%(project_id)s"),
    ("admin_or_project_reader_or_service_api",
     "role:admin or rule:project_reader_api or role:service"),
]

Operation = tuple[str, str, str, str]  # (rule name, check, method, path)


def persona_defaults(operations: list[Operation], *, deprecation_reason: str) -> list[oslo_policy.RuleDefault]:
    """The base rules, each with its deprecated alternative ``role:admin``
    (in force in legacy mode), then one documented rule per operation."""
    rules: list[oslo_policy.RuleDefault] = []
    for name, check in BASE_RULES:
        deprecated = oslo_policy.DeprecatedRule(
            name=name, check_str=ADMIN, deprecated_reason=deprecation_reason,
            deprecated_since="1.0")
        rules.append(oslo_policy.RuleDefault(
            name, check, description=f"Base rule {name}.", deprecated_rule=deprecated,
            scope_types=["project"]))
    for name, check, method, path in operations:
        rules.append(oslo_policy.DocumentedRuleDefault(
            name, check, description=f"{method} {path}",
            operations=[{"method": method, "path": path}], scope_types=["project"]))
    return rules


def describe(*, legacy: bool, enforce_scope: bool = True) -> str:
    """One line for the start-up log: which defaults are in force."""
    if legacy:
        rules = ("legacy policy defaults in force (enforce_new_defaults = False): every base "
                 "rule also accepts its deprecated alternative role:admin")
    else:
        rules = "new policy defaults in force (enforce_new_defaults = True): admin, service and project reader"
    if enforce_scope:
        scope = "system-scoped tokens refused"
    elif scope_is_configurable():
        scope = "scope not enforced (enforce_scope = False)"
    else:
        scope = ("system-scoped tokens refused (enforce_scope = False has no effect: this "
                 "oslo.policy always enforces scope)")
    return f"{rules}; {scope}"
