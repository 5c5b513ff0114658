"""The pod smoke through the API server (I/O only): what to run and what it means is decided in smoke_pod.py.

The gpu_pod_smoke module is run_pod_smoke behind an argument spec; ``api(args, data=None)``, the one way to the API
server (kube.py's kubectl), is passed in.
"""

import datetime
import json
import time

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke_pod
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stack_catalog

POLL = 1
# After GRACE seconds without any scheduler acting on a pod (no PodScheduled condition), the wait ends early when no
# kube-scheduler holds its lease, or its holder stopped renewing it LEASE_STALE seconds ago (kube-scheduler's
# lease lasts 15 s; a new leader takes over within it): no pod can be scheduled, so the timeout is not waited out.
GRACE = 2
LEASE_STALE = 60
TAIL = 2000
# After the delete of the smoke objects, one read per poll (a pod that ran stops within its 5 s grace period).
DELETE_POLL = 0.5
POD_RANK = {"failed": 3, "no_gpu": 2, "ok": 1, "skipped": 0}
# What each node of a smoke may set for itself (the module's one-node options, or an entry of its ``nodes``).
NODE_KEYS = ("node_name", "stacks", "host", "resource_api", "limits", "schedulers", "image", "tolerations", "timeout")


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
    """Delete the smoke objects of the nodes and wait up to ``p["delete_timeout"]`` seconds for them to go:
    ``(ok, error, left)``, ``left`` the names still in the API (None when the delete or the last read got no
    answer). One delete for all of them, then one read per poll until none is left: ``kubectl delete --wait``
    would watch each object in turn, one round trip per pod of the fleet."""
    timeout = p["delete_timeout"]
    rc, out, err = api(["delete", _kinds(specs), "-n", p["namespace"], "-l", selector, "--ignore-not-found",
                        "--wait=false"])
    if rc != 0:
        return False, _words(rc, out, err), None
    deadline = time.time() + timeout
    while True:
        left = remaining(api, p, selector, specs)
        if left == []:
            return True, "", left
        if time.time() >= deadline:
            still = ", ".join(left) if left else "the API did not answer"
            return False, f"still there {timeout} s after the delete: {still}", left
        time.sleep(min(DELETE_POLL, max(0, deadline - time.time())))


def read_pods(api, p, selector):
    rc, out, _ = api(["get", "pods", "-n", p["namespace"], "-l", selector, "--output=json"])
    return {i["metadata"]["name"]: i for i in (_json(out).get("items") or [])} if rc == 0 else None


def remaining(api, p, selector, specs):
    """The names of the nodes' smoke objects still in the API (None when the API did not answer)."""
    rc, out, _ = api(["get", _kinds(specs), "-n", p["namespace"], "-l", selector, "--output=name"])
    return [line for line in out.splitlines() if line.strip()] if rc == 0 else None


def events_of(api, p, names):
    """The events of the pods ``names``, by pod: one pod, asked by name; several, one list of the namespace's pod
    events (one call, not one per pod)."""
    fields = "involvedObject.kind=Pod" + (f",involvedObject.name={names[0]}" if len(names) == 1 else "")
    rc, out, _ = api(["get", "events", "-n", p["namespace"], "--field-selector", fields, "--output=json"])
    found = {name: [] for name in names}
    for event in (_json(out).get("items") or []) if rc == 0 else []:
        name = (event.get("involvedObject") or {}).get("name") if len(names) > 1 else names[0]
        if name in found:
            found[name].append(event)
    return found


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


def _prepare(node, p, check_mode):
    """One node's pods (``{node, specs, unready, view, present, resources}``), or its result when none is to run."""
    base = {"node_name": node["node_name"], "api_host": p["api_host"], "pods": [], "deleted": True}
    catalog = stack_catalog(node["stacks"])
    specs = [smoke_pod.pod_spec(name, entry, (node.get("limits") or {}).get(name), node.get("resource_api") or "")
             for name, entry in catalog.items()]
    if not specs:
        return dict(base, status="skipped", summary="skipped: no GPU-sharing stack on this node")
    if check_mode:
        return dict(base, status="skipped", summary="skipped: a check-mode run creates no pod")
    # a DRA stack's pod asks for its GPU through a claim in the cluster's resource.k8s.io version: unknown, no pod
    unready = [dict(stack=s["stack"], status="skipped", cause="", lifecycle=[],
                    summary="skipped: the cluster's resource.k8s.io version is not recorded (the stacks plan's dra)")
               for s in specs if s["claim"] and not s["claim"].get("api_version")]
    specs = [s for s in specs if not (s["claim"] and not s["claim"].get("api_version"))]
    if not specs:
        return dict(base, status="skipped", pods=unready, summary="; ".join(f"{e['stack']}: {e['summary']}"
                                                                            for e in unready))
    view = node.get("host") or None
    # beside the stacks' pods, the isolation probe: a pod that asks for nothing and sets NVIDIA_VISIBLE_DEVICES=all
    specs.append(smoke_pod.probe_spec())
    return {"base": base, "node": node, "specs": specs, "unready": unready, "view": view,
            "present": bool((view or {}).get("present", True)), "resources": sorted({r for s in specs
                                                                                    for r in s["limits"]})}


def _created(rc, out, err, names):
    """Per pod name, why it was not created ("" when it was): ``kubectl create`` of a List creates what it can, prints
    ``pod/<name>`` for each and an error line for each other."""
    if rc == 0:
        return {name: "" for name in names}
    made = {line.strip()[len("pod/"):] for line in out.splitlines() if line.strip().startswith("pod/")}
    lines = [line for line in (err or "").splitlines() if line.strip()]
    return {name: "" if name in made else next((line[:300] for line in lines if name in line),
                                                  _words(rc, out, err)) for name in names}


def run_pod_smoke(module, p, api):
    """The pod smoke of one GPU node (the gpu_pod_smoke module's one-node options in ``p``): run_pod_smokes' result
    for that node."""
    node = {key: p.get(key) for key in NODE_KEYS}
    return run_pod_smokes(module, p, [node], api)["nodes"][p["node_name"]]


def run_pod_smokes(module, p, nodes, api):
    """The pod smokes of ``nodes`` (each ``{node_name, stacks, host, resource_api, limits, schedulers, image,
    tolerations, timeout}``, what it lacks from ``p``, the module's options), all at once through one API host: the
    pods of every node are created together, watched with one read per poll and deleted together, so a fleet's
    smoke takes about as long as one node's. ``api(args, data=None)`` answers ``(rc, stdout, stderr)`` for
    kubectl's arguments: the one way to the API server, passed in. Returns ``{status, summary, deleted, nodes:
    {node_name: the node's result}}``."""
    where = f"kubectl on {p['api_host']}" if p["api_host"] else "kubectl on the control machine"
    nodes = [dict({key: p.get(key) for key in NODE_KEYS if key != "node_name"}, **{k: v for k, v in n.items()
                                                                                  if v is not None})
             for n in nodes]
    results, runs = {}, []
    for node in nodes:
        prepared = _prepare(node, p, module.check_mode)
        if "specs" in prepared:
            runs.append(prepared)
        else:
            results[node["node_name"]] = prepared
    if runs:
        results.update(_run(p, runs, api, where))
    return _overall({name: results[name] for name in (n["node_name"] for n in nodes)})


def _overall(results):
    worst = max((r["status"] for r in results.values()), key=POD_RANK.get, default="skipped")
    return {"status": worst, "deleted": all(r["deleted"] for r in results.values()), "nodes": results,
            "summary": "; ".join(f"{name}: {r['summary']}" for name, r in results.items())}


def _run(p, runs, api, where):
    """Create, watch, judge and delete the pods of ``runs`` (_prepare's); their results by node name."""
    specs = [s for run in runs for s in run["specs"]]
    selector = smoke_pod.pod_selector(*(run["node"]["node_name"] for run in runs))
    ok, error, _ = delete(api, p, selector, specs)  # leftovers of an interrupted run
    if not ok:
        return {run["node"]["node_name"]: dict(run["base"], status="skipped", summary=f"skipped: no API ({where}): "
                                                                                      f"{error}") for run in runs}
    started = time.time()
    objects, pods = [], []
    for run in runs:
        node = run["node"]
        for spec in run["specs"]:
            made = smoke_pod.pod_objects(node["node_name"], spec, node["image"], p["namespace"],
                                         smoke_pod.scheduler_name(spec["stack"], node["schedulers"] or {}),
                                         node["tolerations"], node["timeout"])
            objects += made
            pods.append({"stack": spec["stack"], "spec": spec, "run": run, "name": made[-1]["metadata"]["name"],
                         "lifecycle": []})
    rc, out, err = api(["create", "-f", "-", "--output=name"],
                       data=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    errors = _created(rc, out, err, [e["name"] for e in pods])
    for entry in pods:
        entry["create_error"] = errors[entry["name"]]
        if not entry["create_error"]:
            entry["lifecycle"].append({"t": round(time.time() - started, 1), "what": "created"})
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
        elapsed = time.time() - started
        # a pod is waited for until it is done or its node's timeout passed
        waiting = [e for e in pods if not (e["create_error"] or elapsed >= e["run"]["node"]["timeout"] or smoke_pod.
                                           pod_done(last.get(e["name"]), e["run"]["present"], e["run"]["resources"]))]
        done = not waiting
        if waiting and elapsed >= GRACE and all(_unscheduled(last.get(e["name"]), condition=True) for e in waiting):
            # no scheduler has acted on any of them: when none holds the default scheduler's lease, none will
            held = lease(api) if held is None else held
            done = not held or (held.get("renewed_ago") or 0) > LEASE_STALE
        if done:
            break
        left = max(e["run"]["node"]["timeout"] for e in waiting) - elapsed
        time.sleep(max(0, min(POLL, left)))  # the wait ends at the timeout, not up to a poll later
    waited = time.time() - started
    made = [e["name"] for e in pods if last.get(e["name"]) is not None and not e["create_error"]]
    events = events_of(api, p, made) if made else {}
    for entry in pods:
        obj = last.get(entry["name"]) if not entry["create_error"] else None
        ran = obj is not None and (smoke_pod.pod_phase(obj) in ("Succeeded", "Failed") or any(
            "terminated" in (s.get("state") or {}) for s in (obj.get("status") or {}).get("containerStatuses") or []))
        log = log_of(api, p, entry["name"]) if ran else ""
        unscheduled = _unscheduled(obj)
        if unscheduled and held is None:
            held = lease(api)
        run = entry.pop("run")
        judged = smoke_pod.judge_pod(obj, entry["spec"], events.get(entry["name"], []), log, run["view"],
                                     min(waited, run["node"]["timeout"]), run["node"]["timeout"],
                                     held if unscheduled else None, entry["create_error"])
        if entry["spec"].get("probe"):  # not a smoke of the node's stacks: its own result, by what it got
            run["base"]["isolation"] = dict(smoke_pod.judge_probe(obj, log, judged), name=entry["name"],
                                            phase=judged.get("phase", ""))
            continue
        entry.update(judged, log=log[-TAIL:], events=smoke_pod.event_texts(events.get(entry["name"], []))[-10:])
        entry.pop("spec")
        entry.pop("create_error")
        run["base"]["pods"].append(entry)
    ok, error, left = delete(api, p, selector, specs)
    if left is None:  # the delete failed: what is left, if the API answers
        left = remaining(api, p, selector, specs)
    end = round(time.time() - started, 1)
    results = {}
    for run in runs:
        pods_ = run["base"]["pods"]
        names = {e["name"] for e in pods_} | {(run["base"].get("isolation") or {}).get("name")}
        mine = [name for name in left or [] if name.split("/", 1)[-1] in names]
        deleted = ok and left is not None and not mine
        for entry in pods_:
            entry["lifecycle"].append({"t": end, "what": "deleted" if deleted else f"not deleted: {error}"})
        pods_ += run["unready"]
        status = max((e["status"] for e in pods_), key=POD_RANK.get)
        summary = "; ".join(f"{e['stack']}: {e['summary']}" for e in pods_)
        if not deleted:
            status = "failed"
            summary += f"; the smoke pods could not be deleted ({error or ', '.join(mine) or 'no answer'})"
        results[run["node"]["node_name"]] = dict(run["base"], status=status, summary=summary, pods=pods_,
                                                 deleted=deleted, cause="" if deleted else "pod_not_deleted")
    return results
