#!/usr/bin/python
"""Label the GPU nodes one API server serves, touching only the labels this project set."""

DOCUMENTATION = r"""
---
module: gpu_node_labels
short_description: Set the GPU and stack labels of every node one API server serves, in one round trip
description:
  - Runs on the host that runs kubectl for the node's cluster (a control-plane host, or the control machine for a
    managed control plane), delegated from the node's own task so that the node is the host that C(changed). Reads
    the node (C(kubectl get node NAME), or one C(kubectl get nodes) for several nodes at once), plans it with the
    same code as the render (the node_labels section of the host plan), and patches only a node whose labels
    differ (C(kubectl patch node --type merge)). With O(nodes_read), a node the play's read already shows with
    nothing to change is answered by the action on the controller, without a run on the API host.
  - With one node it returns the facts C(kgn_observed_node_labels) (the node as the API shows it at the end) and
    C(kgn_state_node_labels) (the plan, what changed, and in C(changes) and C(repaired) what it did; the
    first labelling of a node is a change, a correction of labels this project set before is a repair).
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
  nodes_read:
    description:
      - The play's one read of the nodes of each API server, the registered result of a C(kgn.gpu_nodes.k8s_read)
        loop with C(resources=[nodes]) over the API targets (C(kgn.gpu_nodes.kube_api_targets)), each result
        carrying its target as C(item). Used by the action on the controller. When the read of this task's API
        target (O(api_host) and O(kubeconfig)) shows every node of O(nodes) with nothing to change, the action
        answers with the same plan, words and facts and nothing runs on the API host. A node to patch, refuse or
        report, or no usable read, runs the module, which reads the nodes again itself.
    type: raw
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
- name: Label this GPU node through its cluster's API host
  kgn.gpu_nodes.gpu_node_labels:
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
changes:
  description: What this run did to the node's labels (a first labelling), in words.
  returned: always
  type: list
repaired:
  description: Labels this project had set before and found changed or gone, put back, in words.
  returned: always
  type: list
"""


import os  # noqa: E402

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import node_list  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import CLIENT_ARGS, Kubectl  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels.labels import labels_plan  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels.labels_outcome import (  # noqa: E402
    node_record,
    what_changed,
    words,
)


def read_nodes(kube, names):
    """The nodes as the API shows them: one ``get node NAME`` for one node, one ``get nodes`` for several (or for
    one the API does not know)."""
    try:
        if len(names) == 1:
            found = kube.get("nodes", name=names[0])
            if found is not None:
                return {"reachable": True, "error": "", "nodes": node_list({"items": [found]})}
        # several nodes, or one the API does not know: every node, so that the message can name the ones there are
        return {"reachable": True, "error": "", "nodes": node_list(kube.get("nodes"))}
    except KgnError as err:
        return {"reachable": False, "error": str(err), "nodes": {}}


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


def patch_nodes(kube, plan, observed, check):
    results = {}
    for inventory_host, entry in plan["nodes"].items():
        result = dict(entry)
        if entry["status"] == "patch":
            try:
                kube.patch("node", entry["node_name"], entry["patch"], dry_run=check)
                result["status"] = "would patch" if check else "patched"
            except KgnError as err:
                result.update(status="patch failed", reason=str(err))
        result["record"] = node_record(entry, observed["nodes"].get(entry["node_name"]), observed)
        results[inventory_host] = result
    return results


def check_live(kube, plan, results):
    """Read the nodes again; a sent patch the API does not show is reported per node."""
    live = read_nodes(kube, [r["node_name"] for r in results.values()])
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
        result["record"] = node_record(result, node, live)
    return live


def main():
    module = host.NodeModule(
        argument_spec={
            **CLIENT_ARGS,
            "nodes": {"type": "dict", "required": True},
            "render_dir": {"type": "path"},
            "nodes_read": {"type": "raw"},  # taken by the action (plugins/action/gpu_node_labels.py)
            "observed": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    rendering = bool(p["render_dir"])
    kube = Kubectl(module)
    names = [(s or {}).get("node_name") or h for h, s in p["nodes"].items()]
    if rendering:
        observed = {"reachable": None, "error": "", "nodes": (p["observed"] or {}).get("nodes") or {}}
    else:
        observed = read_nodes(kube, names)
    try:
        plan = labels_plan({"nodes": p["nodes"]}, observed or {})
    except KgnError as err:
        module.fail_json(msg=f"{err}. Nothing was changed.", observed=observed)
    if rendering:
        results, written = render(p, plan)
        results = {name: words(name, result) for name, result in results.items()}
        host.say(module, assumed=[f"{name}: {item}" for name, result in results.items()
                                  for item in result.get("assumed") or []])
        module.exit_json(changed=bool(written), nodes=results, plan=plan, observed=observed, changes=[], repaired=[],
                         rendered=[os.path.relpath(w, p["render_dir"]) for w in written])

    results = patch_nodes(kube, plan, observed, module.check_mode)
    diff = [{"before_header": f"node/{r['node_name']} labels", "after_header": f"node/{r['node_name']} labels",
             "before": _text(observed["nodes"].get(r["node_name"], {}).get("labels")),
             "after": _text(_after(observed["nodes"].get(r["node_name"], {}).get("labels"), r["patch"]))}
            for r in results.values() if r["status"] in ("patched", "would patch")]
    changed = any(r["status"] in ("patched", "would patch") for r in results.values())
    extra = {}
    if any(r["status"] == "patched" for r in results.values()):
        extra["live"] = check_live(kube, plan, results)
    results = {name: words(name, result) for name, result in results.items()}
    changes, repaired = [], []
    for result in results.values():
        done, fixed = what_changed(result, observed["nodes"].get(result["node_name"]))
        changes += done
        repaired += fixed
    for result in results.values():
        for line in result["say"]:
            module.warn(line)
    if not module.check_mode:
        host.say(module, repaired=repaired)
    if len(results) == 1:
        (result,) = results.values()
        state = recorded("node_labels", result["record"], plan, {"node": result["record"], "status": result["status"]},
                         changed, module.check_mode, [] if module.check_mode else repaired,
                         changes=[] if module.check_mode else changes)
        facts = {key: value for key, value in state.items()
                 if key != "kgn_observed_node_labels" or result["status"] not in ("api unreachable", "refused")}
        extra["ansible_facts"] = facts
        if result["refusal"]:
            module.fail_json(msg=result["refusal"], changed=changed, nodes=results, plan=plan, observed=observed,
                             diff=diff, changes=changes, repaired=repaired, **extra)
    module.exit_json(changed=changed, nodes=results, plan=plan, observed=observed, diff=diff, changes=changes,
                     repaired=repaired, **extra)


if __name__ == "__main__":
    main()
