"""The pod smoke through the API server (I/O only): what to run and what it means is decided in smoke_pod.py.

The gpu_pod_smoke module is run_pod_smoke behind an argument spec; ``api(args, data=None)``, the one way to the API
server (kube.py's kubectl), is passed in.
"""

import datetime
import json
import time

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import smoke_pod
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stack_catalog

POLL = 1
# After GRACE seconds without any scheduler acting on a pod (no PodScheduled condition), the wait ends early when no
# kube-scheduler holds its lease, or its holder stopped renewing it LEASE_STALE seconds ago (kube-scheduler's
# lease lasts 15 s; a new leader takes over within it): no pod can be scheduled, so the timeout is not waited out.
GRACE = 2
LEASE_STALE = 60
TAIL = 2000
POD_RANK = {"failed": 3, "no_gpu": 2, "ok": 1, "skipped": 0}


def _json(text):
    try:
        return json.loads(text)
    except ValueError:
        return {}


def _words(rc, out, err):
    text = (err or out).strip()
    return text.splitlines()[0][:300] if text else ("kubectl not found" if rc is None else f"exit code {rc}")


def _kinds(specs):
    return "pods" + (",resourceclaimtemplates.resource.k8s.io" if any(s["claim"] for s in specs) else "")


def delete(api, p, selector, specs):
    """Delete the smoke objects of the node and wait for them to go: ``(ok, error)``."""
    rc, out, err = api(["delete", _kinds(specs), "-n", p["namespace"], "-l", selector,
                                       "--ignore-not-found", "--wait=true", "--timeout=60s"])
    return rc == 0, "" if rc == 0 else _words(rc, out, err)


def read_pods(api, p, selector):
    rc, out, _ = api(["get", "pods", "-n", p["namespace"], "-l", selector, "--output=json"])
    return {i["metadata"]["name"]: i for i in (_json(out).get("items") or [])} if rc == 0 else None


def remaining(api, p, selector, specs):
    """The names of the node's smoke objects still in the API (None when the API did not answer)."""
    rc, out, _ = api(["get", _kinds(specs), "-n", p["namespace"], "-l", selector, "--output=name"])
    return [line for line in out.splitlines() if line.strip()] if rc == 0 else None


def events_of(api, p, name):
    rc, out, _ = api(["get", "events", "-n", p["namespace"], "--field-selector",
                                     f"involvedObject.kind=Pod,involvedObject.name={name}", "--output=json"])
    return _json(out).get("items") or [] if rc == 0 else []


def log_of(api, p, name):
    rc, out, _ = api(["logs", "-n", p["namespace"], name, "--tail=400"])
    return out if rc == 0 else ""


def lease(api):
    """The default scheduler's leader lease: ``{holder, renewed_ago}``, or {} when there is none."""
    rc, out, _ = api(["get", "leases.coordination.k8s.io", "-n", "kube-system", "kube-scheduler",
                                     "--output=json"])
    spec = _json(out).get("spec") or {} if rc == 0 else {}
    if not spec.get("holderIdentity"):
        return {}
    stamp = str(spec.get("renewTime") or "")
    try:
        renewed = datetime.datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
        ago = int((datetime.datetime.now(datetime.timezone.utc) - renewed).total_seconds())
    except ValueError:
        ago = None
    return {"holder": spec["holderIdentity"], "renewed_ago": ago}


def _moment(pod):
    """What changed about a pod worth recording: its phase, the PodScheduled condition, a container state."""
    status = (pod or {}).get("status") or {}
    scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    state = ((status.get("containerStatuses") or [{}])[0].get("state") or {})
    container = next(iter(state), "")
    reason = (state.get(container) or {}).get("reason") or ""
    condition = f"{scheduled.get('status', '')} {scheduled.get('reason', '')}".strip()
    return {"phase": smoke_pod.pod_phase(pod), "scheduled": condition,
            "node": (pod.get("spec") or {}).get("nodeName") or "", "container": f"{container} {reason}".strip()}


def _unscheduled(pod, condition=False):
    """A Pending pod of the default scheduler without a node (and, with ``condition``, without a PodScheduled
    condition: no scheduler has looked at it). The API server defaults schedulerName to default-scheduler; a
    stand-in may leave it empty."""
    spec = (pod or {}).get("spec") or {}
    if pod is None or smoke_pod.pod_phase(pod) != "Pending" or spec.get("nodeName"):
        return False
    if condition and any(c.get("type") == "PodScheduled" for c in (pod.get("status") or {}).get("conditions") or []):
        return False
    return spec.get("schedulerName") in (None, "", "default-scheduler")


def run_pod_smoke(module, p, api):
    """The pod smoke of one GPU node (the gpu_pod_smoke module's options in ``p``); ``api(args, data=None)`` answers
    ``(rc, stdout, stderr)`` for kubectl's arguments: the one way to the API server, passed in. Returns the
    module's result."""
    where = f"kubectl on {p['api_host']}" if p["api_host"] else "kubectl on the control machine"
    base = {"node_name": p["node_name"], "api_host": p["api_host"], "pods": [], "deleted": True}
    catalog = stack_catalog(p["stacks"])
    specs = [smoke_pod.pod_spec(name, entry, p["limits"].get(name), p.get("resource_api") or "")
             for name, entry in catalog.items()]
    if not specs:
        return dict(base, status="skipped", summary="skipped: no GPU-sharing stack on this node")
    if module.check_mode:
        return dict(base, status="skipped", summary="skipped: a check-mode run creates no pod")
    # a DRA stack's pod asks for its GPU through a claim in the cluster's resource.k8s.io version: unknown, no pod
    unready = [dict(stack=s["stack"], status="skipped", cause="", lifecycle=[],
                    summary="skipped: the cluster's resource.k8s.io version is not recorded (the stacks plan's dra)")
               for s in specs if s["claim"] and not s["claim"].get("api_version")]
    specs = [s for s in specs if not (s["claim"] and not s["claim"].get("api_version"))]
    if not specs:
        return dict(base, status="skipped", pods=unready, summary="; ".join(f"{e['stack']}: {e['summary']}"
                                                                            for e in unready))
    view = p["host"] or None
    host_present = bool((view or {}).get("present", True))
    resources = sorted({r for s in specs for r in s["limits"]})
    selector = smoke_pod.pod_selector(p["node_name"])
    ok, error = delete(api, p, selector, specs)  # a leftover of an interrupted run
    if not ok:
        return dict(base, status="skipped", summary=f"skipped: no API ({where}): {error}")
    started = time.time()
    pods = []
    for spec in specs:
        objects = smoke_pod.pod_objects(p["node_name"], spec, p["image"], p["namespace"],
                                        smoke_pod.scheduler_name(spec["stack"], p["schedulers"]), p["tolerations"],
                                        p["timeout"])
        rc, out, err = api(["create", "-f", "-", "--output=name"],
                           data=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        pods.append({"stack": spec["stack"], "spec": spec, "name": objects[-1]["metadata"]["name"],
                     "create_error": "" if rc == 0 else _words(rc, out, err),
                     "lifecycle": [{"t": round(time.time() - started, 1), "what": "created"}] if rc == 0 else []})
    last, seen, held = {}, {}, None
    while True:
        current = read_pods(api, p, selector) or {}
        now = round(time.time() - started, 1)
        for entry in pods:
            obj = current.get(entry["name"])
            if obj is not None:
                last[entry["name"]] = obj
                moment = _moment(obj)
                if moment != seen.get(entry["name"]):
                    seen[entry["name"]] = moment
                    entry["lifecycle"].append(dict(moment, t=now))
        waiting = [last[e["name"]] for e in pods
                   if not (e["create_error"] or smoke_pod.pod_done(last.get(e["name"]), host_present, resources))]
        done = not waiting
        if waiting and time.time() - started >= GRACE and all(_unscheduled(o, condition=True) for o in waiting):
            # no scheduler has acted on any of them: when none holds the default scheduler's lease, none will
            held = lease(api) if held is None else held
            done = not held or (held.get("renewed_ago") or 0) > LEASE_STALE
        left = p["timeout"] - (time.time() - started)
        if done or left <= 0:
            break
        time.sleep(min(POLL, left))  # the wait ends at the timeout, not up to a poll later
    waited = time.time() - started
    for entry in pods:
        obj = last.get(entry["name"]) if not entry["create_error"] else None
        events = events_of(api, p, entry["name"]) if obj is not None else []
        ran = obj is not None and (smoke_pod.pod_phase(obj) in ("Succeeded", "Failed") or any(
            "terminated" in (s.get("state") or {}) for s in (obj.get("status") or {}).get("containerStatuses") or []))
        log = log_of(api, p, entry["name"]) if ran else ""
        unscheduled = _unscheduled(obj)
        if unscheduled and held is None:
            held = lease(api)
        judged = smoke_pod.judge_pod(obj, entry["spec"], events, log, view, waited, p["timeout"],
                                     held if unscheduled else None, entry["create_error"])
        entry.update(judged, log=log[-TAIL:], events=smoke_pod.event_texts(events)[-10:])
        entry.pop("spec")
        entry.pop("create_error")
    ok, error = delete(api, p, selector, specs)
    left = remaining(api, p, selector, specs)
    deleted = ok and left == []
    end = round(time.time() - started, 1)
    for entry in pods:
        entry["lifecycle"].append({"t": end, "what": "deleted" if deleted else f"not deleted: {error}"})
    pods += unready
    status = max((e["status"] for e in pods), key=POD_RANK.get)
    summary = "; ".join(f"{e['stack']}: {e['summary']}" for e in pods)
    if not deleted:
        status = "failed"
        summary += f"; the smoke pods could not be deleted ({error or ', '.join(left or []) or 'no answer'})"
    return dict(base, status=status, summary=summary, pods=pods, deleted=deleted,
                cause="" if deleted else "pod_not_deleted")

