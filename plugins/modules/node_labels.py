#!/usr/bin/python
"""Label the GPU nodes one API server serves, touching only the labels this project set."""

DOCUMENTATION = r"""
---
module: node_labels
short_description: Set the GPU and stack labels of every node one API server serves, in one round trip
description:
  - Runs once per API server, on the host that runs kubectl for it (a control-plane host, or the control machine
    for a managed control plane). Reads every node with one C(kubectl get nodes -o json), plans every node with the
    same code as the render (the node_labels section of the host plan), and patches only the nodes whose labels
    differ (C(kubectl patch node --type merge)).
  - Desired labels per node are its stacks' selector labels plus the labels derived from its GPU facts (GPU
    Feature Discovery style C(nvidia.com/gpu.*), C(accelerator), C(kube-gpu-nodes.io/gpu.volta-mps)) and its extra
    labels. Only labels this project set before, recorded in the node annotation
    C(kube-gpu-nodes.io/managed-labels), are ever removed; a desired label someone else set to another value is left
    alone and reported (RV(nodes.foreign)) unless the node's C(overwrite_foreign) is true.
  - Never a silent skip; every node gets a status (RV(nodes)), an API server that does not answer or a node it does
    not know is said per node, and does not fail the task. A node whose stacks its GPUs cannot run (MPS on GPUs
    before Volta, MPS on MIG, two stacks that claim the GPUs) is C(refused) and gets no patch; the others go on.
  - After a patch the node is read again, and a patch the API does not show is reported (C(patch not live)).
  - With O(render_dir) it contacts no API; it writes each node's merge patch to
    C(<render_dir>/<inventory host>/_plan/node_labels.json), key C(patch) (against the labels in
    O(observed), else against a node without labels), with the rest of its plan.
extends_documentation_fragment:
  - kgn.gpu_nodes.kubectl
options:
  nodes:
    description:
      - The nodes this API server serves, inventory host -> settings; settings are node_name, gpu_facts (the
        kgn.gpu_nodes.gpu_facts result; empty means unknown GPU labels, neither set nor removed), stacks, sharing
        (none, time-slicing, mps), gpushare_mps, require_gpu, extra (labels merged over the computed ones),
        overwrite_foreign.
    type: dict
    required: true
  api_host:
    description: The inventory host this runs on, for the messages; empty for the control machine.
    type: str
    default: ""
  render_dir:
    description: Render instead of patching, into this folder on the machine the module runs on (the controller).
    type: path
  observed:
    description:
      - For a render, the nodes as the last run recorded them, a dict with C(nodes) mapping each node name to its
        C(labels) and C(annotations); nodes missing here are rendered against a node without labels, and the plan
        says so.
    type: dict
    default: {}
notes:
  - Check mode sends each patch with C(--dry-run=server); diff mode shows each node's labels before and after.
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Label the GPU nodes of one API server
  kgn.gpu_nodes.node_labels:
    api_host: cp1
    nodes:
      gpu1:
        node_name: gpu-1
        stacks: [gpushare]
        gpu_facts: "{{ kgn_observed_nvidia_driver.gpu }}"
  delegate_to: cp1
"""

RETURN = r"""
nodes:
  description:
    - Per inventory host, what happened; status is one of patched, would patch (check mode), unchanged, rendered,
      not registered, api unreachable, refused, patch failed, patch not live; reason says why for the last five.
    - Also node_name, desired, set, removed, foreign (left alone, set by someone else), problems, and record (the
      node as the API shows it at the end, what the role records as kgn_observed_node_labels).
  returned: always
  type: dict
plan:
  description: The node_labels section of the host plan (api, nodes with desired labels and patches, assumed).
  returned: always
  type: dict
observed:
  description: What the API showed before any change (reachable, error, nodes with labels and annotations).
  returned: always
  type: dict
live:
  description: The nodes as the API showed them after the patches (only when something was patched).
  returned: when a patch was sent
  type: dict
"""

import json  # noqa: E402
import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import KUBECTL_ARGS, node_list  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan  # noqa: E402


def kubectl(module, p, args):
    argv = [p["kubectl"], "--kubeconfig", p["kubeconfig"], f"--request-timeout={p['request_timeout']}s", *args]
    rc, out, err = host.run(module, argv, timeout=max(60, 3 * p["request_timeout"]))
    return rc, out or "", err or ""


def _where(p):
    return f"kubectl on {p['api_host']}" if p["api_host"] else "kubectl on the control machine"


def read_nodes(module, p):
    rc, out, err = kubectl(module, p, ["get", "nodes", "--output=json"])
    if rc != 0:
        words = (err or out).strip()
        words = words.splitlines()[0][:300] if words else ("kubectl not found" if rc is None else f"exit code {rc}")
        return {"reachable": False, "error": f"`kubectl get nodes` failed ({_where(p)}, kubeconfig "
                                             f"{p['kubeconfig']}): {words}", "nodes": {}}
    try:
        return {"reachable": True, "error": "", "nodes": node_list(out)}
    except KgnError as err_:
        return {"reachable": False, "error": f"{_where(p)}: {err_}", "nodes": {}}


def _after(labels, patch):
    after = dict(labels or {})
    for key, value in ((patch.get("metadata") or {}).get("labels") or {}).items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    return after


def _text(labels):
    return "".join(f"{key}={value}\n" for key, value in sorted((labels or {}).items()))


def _record(entry, node, api):
    if node is None:
        return {"node_name": entry["node_name"], "registered": False if api.get("reachable") else None,
                "labels": {}, "annotations": {}}
    return {"node_name": entry["node_name"], "registered": True, "labels": node.get("labels") or {},
            "annotations": node.get("annotations") or {}}


def render(p, plan):
    results = {}
    written = []
    for inventory_host, entry in plan["nodes"].items():
        results[inventory_host] = dict(entry, status="rendered" if entry["status"] == "render" else entry["status"])
        if entry["status"] != "render":
            continue
        # labels go to the API, not to a file on the node: the render is the plan, with the merge patch in it
        written += change.render(p["render_dir"], inventory_host, [], dict(entry, api=plan["api"]), "node_labels")
    return results, written


def patch_nodes(module, p, plan, observed, check):
    results = {}
    for inventory_host, entry in plan["nodes"].items():
        result = dict(entry)
        if entry["status"] == "patch":
            rc, out, err = kubectl(module, p, ["patch", "node", entry["node_name"], "--type", "merge", "-p",
                                               json.dumps(entry["patch"], sort_keys=True),
                                               f"--dry-run={'server' if check else 'none'}"])
            if rc == 0:
                result["status"] = "would patch" if check else "patched"
            else:
                result.update(status="patch failed",
                              reason=f"kubectl patch node {entry['node_name']} ({_where(p)}) failed: "
                                     f"{(err or out).strip()[:400]}")
        result["record"] = _record(entry, observed["nodes"].get(entry["node_name"]), observed)
        results[inventory_host] = result
    return results


def check_live(module, p, plan, results):
    """Read the nodes again; a sent patch the API does not show is reported per node."""
    live = read_nodes(module, p)
    for result in results.values():
        if result["status"] != "patched":
            continue
        node = live["nodes"].get(result["node_name"])
        labels = (node or {}).get("labels") or {}
        wrong = [k for k, v in result["set"].items() if labels.get(k) != v] + [
            k for k in result["removed"] if k in labels]
        if node is None or wrong:
            result.update(status="patch not live",
                          reason=f"after the patch, the API shows {'no node' if node is None else 'other values for '}"
                                 f"{', '.join(wrong) if node is not None else result['node_name']}")
        result["record"] = _record(result, node, live)
    return live


def words(inventory_host, result):
    """What the role says for a node (``say``) and why it fails the host (``refusal``, empty when it does not)."""
    say, refusal = [], ""
    node, status = result.get("node_name"), result.get("status")
    if status in ("not registered", "api unreachable"):
        wanted = f" would get {json.dumps(result['desired'], sort_keys=True)}, but " if result.get("desired") else ": "
        say.append(f"NOT LABELLED: {node}{wanted}{result.get('reason')}")
    if result.get("foreign"):
        say.append(f"Left alone on {node} (set by someone else to another value): {', '.join(result['foreign'])}; "
                   "set gpu_node_labels_overwrite_foreign to take them over")
    if status == "refused":
        refusal = f"Nothing was changed on {inventory_host}. Fix: {'; '.join(result.get('problems') or [])}"
    elif status in ("failed", "patch failed", "patch not live"):
        refusal = f"{node}: {status}: {result.get('reason')}"
    return dict(result, say=say, refusal=refusal)


def main():
    module = AnsibleModule(
        argument_spec={
            **KUBECTL_ARGS,
            "nodes": {"type": "dict", "required": True},
            "api_host": {"type": "str", "default": ""},
            "render_dir": {"type": "path"},
            "observed": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    rendering = bool(p["render_dir"])
    if rendering:
        observed = {"reachable": None, "error": "", "nodes": (p["observed"] or {}).get("nodes") or {}}
    else:
        observed = read_nodes(module, p)
    try:
        plan = host_plan({"node_labels": {"nodes": p["nodes"]}}, {"node_labels": observed})["node_labels"]
    except KgnError as err:
        module.fail_json(msg=f"{err}. Nothing was changed.", observed=observed)
    if rendering:
        results, written = render(p, plan)
        results = {name: words(name, result) for name, result in results.items()}
        host.say(module, assumed=[f"{name}: {item}" for name, result in results.items()
                                  for item in result.get("assumed") or []])
        module.exit_json(changed=bool(written), nodes=results, plan=plan, observed=observed,
                         rendered=[os.path.relpath(w, p["render_dir"]) for w in written])

    results = patch_nodes(module, p, plan, observed, module.check_mode)
    diff = [{"before_header": f"node/{r['node_name']} labels", "after_header": f"node/{r['node_name']} labels",
             "before": _text(observed["nodes"].get(r["node_name"], {}).get("labels")),
             "after": _text(_after(observed["nodes"].get(r["node_name"], {}).get("labels"), r["patch"]))}
            for r in results.values() if r["status"] in ("patched", "would patch")]
    changed = any(r["status"] in ("patched", "would patch") for r in results.values())
    extra = {}
    if any(r["status"] == "patched" for r in results.values()):
        extra["live"] = check_live(module, p, plan, results)
    results = {name: words(name, result) for name, result in results.items()}
    module.exit_json(changed=changed, nodes=results, plan=plan, observed=observed, diff=diff, **extra)


if __name__ == "__main__":
    main()
