#!/usr/bin/python
"""gpu_pod_smoke: a pod per GPU-sharing stack, pinned to one GPU node, that must run and show the GPU it was given."""

DOCUMENTATION = r"""
---
module: gpu_pod_smoke
short_description: Run one pod per stack on a GPU node through Kubernetes and say what it saw, or why it did not run
description:
  - Runs on the host that runs kubectl for the node's cluster (its API host). For each of the node's GPU-sharing
    stacks, creates one pod that asks for the stack's resource (from the stack catalog, module_utils/stacks.py, so a
    new stack needs nothing here; a DRA claim template where the stack's smoke has one), pinned to the node through
    the scheduler (nodeAffinity on metadata.name, so the scheduler, its extenders and a stack's own scheduler decide
    as for any pod).
  - Waits until each pod Succeeded or Failed, or cannot get further (an image that cannot be pulled; on a node
    without GPU, no room for the resource), or O(timeout) passed. A pod that Succeeded must show in its log the GPU it
    saw and, for the memory-sharing stacks, the limit it was given. Otherwise the reason comes from the pod's status
    and events (Insufficient <resource>, an extender error, ImagePullBackOff, a sandbox the runtime refused, no
    scheduler acting on it).
  - The pods (and claim templates) are deleted afterwards, also on failure; leftovers of an interrupted run are
    deleted first (label C(kube-gpu-nodes.io/smoke-node=<node>)).
  - Every API call goes through one function (C(kubectl)), the one place to change for another API client.
  - An API server that does not answer is not a failure of the node, the result is V(skipped) with kubectl's words.
    Check mode creates no pod (skipped). Reports no change (what it creates, it deletes).
extends_documentation_fragment:
  - kgn.gpu_nodes.kubectl
options:
  node_name:
    description: The node's name in the API.
    type: str
    required: true
  stacks:
    description: The node's GPU-sharing stacks (one pod each).
    type: list
    elements: str
    default: []
  host:
    description: What the node's own nvidia-smi showed (the gpu_smoke module's RV(host)); empty, not compared.
    type: dict
    default: {}
  limits:
    description: Per stack, the limits to ask for instead of the catalog's (e.g. nvidia.com/mig-1g.10gb for MIG mixed).
    type: dict
    default: {}
  schedulers:
    description:
      - The stacks plan's C(hami) (HAMi's own kube-scheduler) and C(secondary) (the second kube-scheduler of a managed
        control plane); the pods of the stacks they schedule get their schedulerName. Empty, the default scheduler.
    type: dict
    default: {}
  image:
    description: The pod's image (sh and a full glibc for the injected nvidia-smi).
    type: str
    default: ubuntu:24.04
  namespace:
    description: Namespace of the pods.
    type: str
    default: default
  tolerations:
    description: Tolerations of the pods.
    type: list
    elements: dict
    default: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  timeout:
    description: Seconds to wait for the pods.
    type: int
    default: 180
  api_host:
    description: The inventory host this runs on, for the messages; empty for the control machine.
    type: str
    default: ""
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Run the pod smoke of a GPU node
  kgn.gpu_nodes.gpu_pod_smoke:
    node_name: gpu-1
    stacks: [nvidia_device_plugin]
  delegate_to: cp1
"""

RETURN = r"""
status:
  description: V(ok), V(no_gpu), V(failed) or V(skipped) (the worst of the pods).
  returned: always
  type: str
summary:
  description: One line per stack, what its pod saw or why it did not run.
  returned: always
  type: str
pods:
  description: >-
    Per stack, stack, name, status, cause, summary, phase, lifecycle (what was seen when, seconds from the start:
    created, each phase and condition change, deleted), log (its tail) and events.
  returned: always
  type: list
deleted:
  description: Whether every smoke pod is gone from the API at the end.
  returned: always
  type: bool
"""

import datetime  # noqa: E402  (Ansible modules keep DOCUMENTATION first)
import json  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host, smoke, smoke_pod  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import KUBECTL_ARGS  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stack_catalog  # noqa: E402

POLL = 2
TAIL = 2000
RANK = {"failed": 3, "no_gpu": 2, "ok": 1, "skipped": 0}


def kubectl(module, p, args, data=None):
    """Every call to the API server: ``(rc, stdout, stderr)`` (rc None when kubectl is missing)."""
    argv = [p["kubectl"], "--kubeconfig", p["kubeconfig"], f"--request-timeout={p['request_timeout']}s", *args]
    rc, out, err = host.run(module, argv, timeout=max(60, 3 * p["request_timeout"]), data=data)
    return rc, out or "", err or ""


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


def delete(module, p, selector, specs):
    """Delete the smoke objects of the node and wait for them to go: ``(ok, error)``."""
    rc, out, err = kubectl(module, p, ["delete", _kinds(specs), "-n", p["namespace"], "-l", selector,
                                       "--ignore-not-found", "--wait=true", "--timeout=60s"])
    return rc == 0, "" if rc == 0 else _words(rc, out, err)


def read_pods(module, p, selector):
    rc, out, _ = kubectl(module, p, ["get", "pods", "-n", p["namespace"], "-l", selector, "--output=json"])
    return {i["metadata"]["name"]: i for i in (_json(out).get("items") or [])} if rc == 0 else None


def remaining(module, p, selector, specs):
    """The names of the node's smoke objects still in the API (None when the API did not answer)."""
    rc, out, _ = kubectl(module, p, ["get", _kinds(specs), "-n", p["namespace"], "-l", selector, "--output=name"])
    return [line for line in out.splitlines() if line.strip()] if rc == 0 else None


def events_of(module, p, name):
    rc, out, _ = kubectl(module, p, ["get", "events", "-n", p["namespace"], "--field-selector",
                                     f"involvedObject.kind=Pod,involvedObject.name={name}", "--output=json"])
    return _json(out).get("items") or [] if rc == 0 else []


def log_of(module, p, name):
    rc, out, _ = kubectl(module, p, ["logs", "-n", p["namespace"], name, "--tail=400"])
    return out if rc == 0 else ""


def lease(module, p):
    """The default scheduler's leader lease: ``{holder, renewed_ago}``, or {} when there is none."""
    rc, out, _ = kubectl(module, p, ["get", "leases.coordination.k8s.io", "-n", "kube-system", "kube-scheduler",
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "node_name": {"type": "str", "required": True},
            "stacks": {"type": "list", "elements": "str", "default": []},
            "host": {"type": "dict", "default": {}},
            "limits": {"type": "dict", "default": {}},
            "schedulers": {"type": "dict", "default": {}},
            "image": {"type": "str", "default": smoke.DEFAULT_IMAGE},
            "namespace": {"type": "str", "default": "default"},
            "tolerations": {"type": "list", "elements": "dict",
                            "default": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            "timeout": {"type": "int", "default": 180},
            "api_host": {"type": "str", "default": ""},
            **KUBECTL_ARGS,
        },
        supports_check_mode=True,
    )
    p = module.params
    where = f"kubectl on {p['api_host']}" if p["api_host"] else "kubectl on the control machine"
    base = {"node_name": p["node_name"], "api_host": p["api_host"], "pods": [], "deleted": True}
    try:
        catalog = stack_catalog(p["stacks"])
        specs = [smoke_pod.pod_spec(name, entry, p["limits"].get(name)) for name, entry in catalog.items()]
    except KgnError as err:
        module.fail_json(msg=str(err))
    if not specs:
        module.exit_json(changed=False, status="skipped", summary="skipped: no GPU-sharing stack on this node", **base)
    if module.check_mode:
        module.exit_json(changed=False, status="skipped", summary="skipped: a check-mode run creates no pod", **base)
    view = p["host"] or None
    host_present = bool((view or {}).get("present", True))
    resources = sorted({r for s in specs for r in s["limits"]})
    selector = smoke_pod.pod_selector(p["node_name"])
    ok, error = delete(module, p, selector, specs)  # a leftover of an interrupted run
    if not ok:
        module.exit_json(changed=False, status="skipped", summary=f"skipped: no API ({where}): {error}", **base)
    started = time.time()
    pods = []
    for spec in specs:
        objects = smoke_pod.pod_objects(p["node_name"], spec, p["image"], p["namespace"],
                                        smoke_pod.scheduler_name(spec["stack"], p["schedulers"]), p["tolerations"],
                                        p["timeout"])
        rc, out, err = kubectl(module, p, ["create", "-f", "-", "--output=name"],
                               data=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        pods.append({"stack": spec["stack"], "spec": spec, "name": objects[-1]["metadata"]["name"],
                     "create_error": "" if rc == 0 else _words(rc, out, err),
                     "lifecycle": [{"t": round(time.time() - started, 1), "what": "created"}] if rc == 0 else []})
    last, seen = {}, {}
    while True:
        current = read_pods(module, p, selector) or {}
        now = round(time.time() - started, 1)
        for entry in pods:
            obj = current.get(entry["name"])
            if obj is not None:
                last[entry["name"]] = obj
                moment = _moment(obj)
                if moment != seen.get(entry["name"]):
                    seen[entry["name"]] = moment
                    entry["lifecycle"].append(dict(moment, t=now))
        done = all(e["create_error"] or smoke_pod.pod_done(last.get(e["name"]), host_present, resources) for e in pods)
        if done or time.time() - started >= p["timeout"]:
            break
        time.sleep(POLL)
    waited = time.time() - started
    held = None
    for entry in pods:
        obj = last.get(entry["name"]) if not entry["create_error"] else None
        events = events_of(module, p, entry["name"]) if obj is not None else []
        ran = obj is not None and (smoke_pod.pod_phase(obj) in ("Succeeded", "Failed") or any(
            "terminated" in (s.get("state") or {}) for s in (obj.get("status") or {}).get("containerStatuses") or []))
        log = log_of(module, p, entry["name"]) if ran else ""
        unscheduled = (obj is not None and smoke_pod.pod_phase(obj) == "Pending" and not (obj.get("spec") or {}).get(
            "nodeName") and not (obj.get("spec") or {}).get("schedulerName"))
        if unscheduled and held is None:
            held = lease(module, p)
        judged = smoke_pod.judge_pod(obj, entry["spec"], events, log, view, waited, p["timeout"],
                                     held if unscheduled else None, entry["create_error"])
        entry.update(judged, log=log[-TAIL:], events=smoke_pod.event_texts(events)[-10:])
        entry.pop("spec")
        entry.pop("create_error")
    ok, error = delete(module, p, selector, specs)
    left = remaining(module, p, selector, specs)
    deleted = ok and left == []
    end = round(time.time() - started, 1)
    for entry in pods:
        entry["lifecycle"].append({"t": end, "what": "deleted" if deleted else f"not deleted: {error}"})
    status = max((e["status"] for e in pods), key=RANK.get)
    summary = "; ".join(f"{e['stack']}: {e['summary']}" for e in pods)
    if not deleted:
        status = "failed"
        summary += f"; the smoke pods could not be deleted ({error or ', '.join(left or []) or 'no answer'})"
    module.exit_json(changed=False, status=status, summary=summary, **dict(base, pods=pods, deleted=deleted),
                     cause="" if deleted else "pod_not_deleted")


if __name__ == "__main__":
    main()
