"""The verification checks: a small registry, and what turns its results into a diagnosis and a verdict.

A check is one function registered with ``@check``, next to the causes and fixes that explain its failures:

    @check("runtime_default", "container runtime's default runtime is nvidia", kinds=(GPU_NODE,),
           concerns=("nvidia_container_toolkit", "container_runtime"),
           causes=[cause("docker_default_not_nvidia", when={"engine": "docker"}, cause="...", fix="...",
                         source="...")])
    def runtime_default(seen, want, done):
        ...
        return failed("docker default runtime is runc, not nvidia", engine="docker", default_runtime="runc")

What a check reads and when it applies are said in ``@check``, not repeated in its body: ``applies`` (a key of
``want`` that must be non-empty, or a function of ``(seen, want)``) gives no line in the report when false;
``reads`` names what must have been read before the check can judge (``"api"``: the API server answered, else
``skipped: no API``; ``"node"``: the API also has the node's object, else ``skipped: node not registered``). The
check's function runs only when both hold.

``seen`` is what the host shows (verify.verify_observed), ``want`` what it should show (verify.verify_expected),
``done`` the results of the checks registered before it (``done.status("runtime_registered")``). A check returns
None (it does not apply to this host: no line in the report), one result (``ok``, ``warn``, ``failed``,
``skipped``) or a list of them (one per extender, per DaemonSet ...). ``kinds`` says which hosts it runs on
(GPU nodes, control planes); ``concerns`` the concerns (kgn_state_<concern>) whose change makes it pass, so that
a check-mode run that would change one reports the failure as pending, not failed.

A cause is matched on the result's evidence: ``when`` (equality, a list = one of, ``{regex: ..}``, ``{not: ..}``,
``{nonempty: bool}``), ``with_failed`` (other checks that failed on the host), ``status`` (only for that status),
``fallback`` (used only when nothing more specific matched). ``{name}`` in cause and fix is the evidence value.

The checks live in checks_node.py (GPU, driver, MIG), checks_runtime.py (the container runtime), checks_cluster.py
(kubelet's device plugins and the API's view of the node), checks_smoke.py (a workload proves the GPU) and
checks_control_plane.py (kube-scheduler, the stacks);
verify.py imports them all, in that order, which is the order of the report. docs/architecture.md, "Verification",
says how to add one.
"""

import re
import string

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

GPU_NODE = "gpu_node"
CONTROL_PLANE = "control_plane"
# ok: as expected; warn: degrades the host (no GPU on a lab node); waived: a failure the inventory waives
# (gpu_node_verify_waived_checks), shown but not held against the host; failed: GPU pods will not work as intended;
# skipped: could not be checked (the summary says why); pending: failed, but a concern it depends on is what this
# check-mode run would change.
STATUSES = ("ok", "warn", "waived", "failed", "skipped", "pending")
VERDICTS = ("ok", "degraded", "pending", "failed")
NO_GPU = "no NVIDIA GPU present on this node"
NO_API = "skipped: no API"
NOT_READ = "skipped: not read (the host stopped earlier in the run; see host_reached)"
# A source that causes of several check files name.
SOURCE_NVML_DEFAULT_RUNTIME = ("docs/field-notes.md, CentOS 7.9 + Docker 18.09 + Kubernetes 1.16; "
                               "https://github.com/NVIDIA/k8s-device-plugin/issues/168")

REGISTRY = {}


def api_view(seen):
    """The API server's view of the host (verify.api_view), None when the API server did not answer."""
    api = seen.get("api") or {}
    return api if api.get("reachable") else None


def _no_api(seen):
    return skipped(NO_API, reason=(seen.get("api") or {}).get("error") or "")


def _reads_api(seen):
    return _no_api(seen) if api_view(seen) is None else None


def _reads_node(seen):
    """The node's API object: the same answer node_registered gives (skipped without an API, failed without the
    node), read from ``seen`` so that a check does not depend on the order of the checks."""
    if api_view(seen) is None:
        return _no_api(seen)
    return None if api_view(seen).get("node") else skipped("skipped: node not registered")


READS = {"api": _reads_api, "node": _reads_node}


class Check:
    def __init__(self, check_id, title, kinds, concerns, causes, function, applies=None, reads=()):
        self.id, self.title, self.kinds, self.concerns = check_id, title, tuple(kinds), tuple(concerns)
        self.causes, self.function, self.applies, self.reads = list(causes), function, applies, tuple(reads)

    def run(self, seen, want, done):
        """None when the check does not apply; the result that says what could not be read; else the check's own."""
        if isinstance(self.applies, str) and not want.get(self.applies):
            return None
        if callable(self.applies) and not self.applies(seen, want):
            return None
        for what in self.reads:
            unread = READS[what](seen)
            if unread is not None:
                return unread
        return self.function(seen, want, done)


def cause(cause_id, cause, fix, source="", when=None, with_failed=(), status=None, fallback=False):
    """One known cause of a check's failure and its fix (see the module docstring)."""
    entry = {"id": cause_id, "cause": cause, "fix": fix, "source": source, "when": dict(when or {}),
             "with_failed": list(with_failed), "fallback": bool(fallback)}
    if status:
        entry["status"] = status
    return entry


def check(check_id, title, kinds, concerns=(), causes=(), applies=None, reads=()):
    """Register the decorated function as the check ``check_id`` (see the module docstring)."""
    if not set(kinds) <= {GPU_NODE, CONTROL_PLANE} or not kinds:
        raise KgnError(f"check {check_id}: kinds must name {GPU_NODE} and/or {CONTROL_PLANE}")
    if not set(reads) <= set(READS):
        raise KgnError(f"check {check_id}: reads must name {' and/or '.join(READS)}, got {reads!r}")

    def register(function):
        if check_id in REGISTRY:
            raise KgnError(f"check {check_id} is registered twice")
        for entry in causes:
            if not all(entry.get(k) for k in ("id", "cause", "fix")):
                raise KgnError(f"check {check_id}: cause {entry!r} needs id, cause and fix")
        REGISTRY[check_id] = Check(check_id, title, kinds, concerns, causes, function, applies, reads)
        return function

    return register


class Result(dict):
    """A check's result before the runner names it: status, summary, evidence."""


def _result(status, summary, evidence):
    return Result(status=status, summary=summary, evidence=evidence)


def ok(summary, **evidence):
    return _result("ok", summary, evidence)


def warn(summary, **evidence):
    return _result("warn", summary, evidence)


def failed(summary, **evidence):
    return _result("failed", summary, evidence)


def skipped(summary, **evidence):
    return _result("skipped", summary, evidence)


class Done:
    """The checks run so far on the host, for a check that depends on another's outcome."""

    def __init__(self):
        self.results = []

    def all(self, check_id):
        return [r for r in self.results if r["id"] == check_id]

    def status(self, check_id):
        """The status of the check (the worst of several), or None when it did not run."""
        found = [r["status"] for r in self.all(check_id)]
        for status in ("failed", "pending", "warn", "waived", "skipped", "ok"):
            if status in found:
                return status
        return None

    def failed(self, *check_ids):
        return any(self.status(c) == "failed" for c in check_ids)

    def first(self, check_id):
        found = self.all(check_id)
        return found[0] if found else {}


def run_checks(seen, want):
    """Every registered check that applies to the host's kinds, in registration order, as plain dicts
    ``{id, title, status, summary, evidence}``; then the inventory's waivers and the check-mode pendings."""
    kinds = want.get("kinds") or []
    if not isinstance(kinds, list) or not kinds or not set(kinds) <= {GPU_NODE, CONTROL_PLANE}:
        raise KgnError(f"verify: expected.kinds must be a non-empty list of '{GPU_NODE}' and/or '{CONTROL_PLANE}', "
                       f"got {kinds!r}; the gpu_node_verify role sets it from the host's groups")
    waived = list(want.get("waived") or [])
    unknown = sorted(set(waived) - set(REGISTRY))
    if unknown:
        raise KgnError(f"verify: waived checks {unknown} do not exist; known: {', '.join(REGISTRY)}")
    done = Done()
    for entry in REGISTRY.values():
        if not set(entry.kinds) & set(kinds):
            continue
        found = entry.run(seen, want, done)
        for result in found if isinstance(found, list) else [] if found is None else [found]:
            if result.get("status") not in ("ok", "warn", "failed", "skipped"):
                raise KgnError(f"check {entry.id} returned {result!r}; return ok(), warn(), failed() or skipped()")
            done.results.append({"id": entry.id, "title": entry.title, "status": result["status"],
                                 "summary": result["summary"], "evidence": dict(result.get("evidence") or {})})
    pending = set(want.get("pending") or [])
    for result in done.results:
        # a failure this inventory cannot avoid (e.g. no extender runs in a lab): shown, not held against the host
        if result["status"] == "failed" and result["id"] in waived:
            result["status"] = "waived"
            result["summary"] = f"{result['summary']} (waived on this inventory)"
        would = sorted(pending.intersection(REGISTRY[result["id"]].concerns))
        if result["status"] == "failed" and would:
            result["status"] = "pending"
            result["summary"] = f"{result['summary']} (pending: this check-mode run would change {', '.join(would)})"
    return done.results


def _matches(condition, value):
    if isinstance(condition, dict):
        if "regex" in condition:
            return value is not None and re.search(condition["regex"], str(value)) is not None
        if "not" in condition:
            return not _matches(condition["not"], value)
        if "nonempty" in condition:
            return bool(value) == bool(condition["nonempty"])
        raise KgnError(f"diagnose: unknown condition {condition!r}; use regex, not or nonempty")
    if isinstance(condition, list):
        return value in condition
    return value == condition


class _Blank(dict):
    def __missing__(self, key):
        return "?"


def _fill(text, result):
    values = _Blank({k: (", ".join(map(str, v)) if isinstance(v, list) else v)
                     for k, v in (result.get("evidence") or {}).items()})
    values.setdefault("summary", result.get("summary"))
    try:
        return string.Formatter().vformat(str(text), (), values)
    except (ValueError, IndexError):
        return str(text)


def explain(result, causes, failed_ids):
    """The causes (``[{id, cause, fix, source}]``) that explain one failed, warn or waived result."""
    if result.get("status") not in ("failed", "warn", "waived"):
        return []
    status = "failed" if result["status"] == "waived" else result["status"]
    found, fallback = [], []
    evidence = result.get("evidence") or {}
    for entry in causes:
        if entry.get("status", status) != status:
            continue
        if not all(_matches(cond, evidence.get(key)) for key, cond in entry["when"].items()):
            continue
        if not set(entry["with_failed"]) <= failed_ids:
            continue
        item = {"id": entry["id"], "cause": _fill(entry["cause"], result), "fix": _fill(entry["fix"], result),
                "source": entry.get("source", "")}
        (fallback if entry["fallback"] else found).append(item)
    return found or fallback


def diagnose(results):
    """The results with ``diagnosis`` (the registered causes that explain each failure) added to each."""
    failed_ids = {r["id"] for r in results if r["status"] == "failed"}
    diagnosed = []
    for result in results:
        causes = REGISTRY[result["id"]].causes if result["id"] in REGISTRY else []
        diagnosed.append(dict(result, diagnosis=explain(result, causes, failed_ids)))
    return diagnosed


def verdict(results):
    """``failed`` if a check failed, ``pending`` if one is pending (what a check-mode run would fix), ``degraded``
    if one warned, else ``ok`` (skipped and waived checks count for nothing)."""
    bad = [r for r in results if not isinstance(r, dict) or r.get("status") not in STATUSES]
    if bad:
        raise KgnError(f"verify: checks need a status in {STATUSES}, got {bad[0]!r}")
    statuses = {r["status"] for r in results}
    for status, word in (("failed", "failed"), ("pending", "pending"), ("warn", "degraded")):
        if status in statuses:
            return word
    return "ok"
