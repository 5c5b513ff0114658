#!/usr/bin/python
"""Cordon, drain, uncordon a node, or restart its pods of one kind: node maintenance any play can reuse."""

DOCUMENTATION = r"""
---
module: k8s_node
short_description: Cordon and drain a node (PodDisruptionBudgets respected), uncordon it, restart its pods
description:
  - Runs on the node's API host (delegated from the node's own task, so the node is the host that C(changed)), through
    kubectl (plugins/module_utils/kube.py). Used by the MIG role and the planned driver upgrade; any play that must
    move the pods off a node first (a change of its GPUs, of its device plugin, of its driver) can use it the same
    way.
  - V(cordoned) marks the node unschedulable. V(drained) cordons it and evicts its pods (DaemonSet pods stay) with
    C(kubectl drain), whose evictions go through the Eviction API and so respect PodDisruptionBudgets; an eviction a
    budget forbids is retried until O(timeout), then the module fails naming the pod and each PodDisruptionBudget
    that allows no disruption and selects a pod still on the node, with its healthy and needed counts (the node
    stays cordoned).
  - With O(drain_when=gpu_pods) a node is cordoned and drained only when a pod on it asks for an C(nvidia.com/)
    resource, or when O(busy) says the GPUs the change touches run processes; otherwise nothing is done.
  - V(schedulable) uncordons the node. V(pods_restarted) deletes the node's pods that O(selector) selects in
    O(namespace), so their DaemonSet starts them again (a device plugin lists MIG devices only when it starts).
  - RV(cordoned) says whether this call cordoned the node (it was schedulable before); uncordon afterwards only then.
  - When the API does not answer, O(if_unreachable=skip) returns with RV(reachable) false and a warning instead of
    failing.
extends_documentation_fragment:
  - kgn.gpu_nodes.kubectl
options:
  node:
    description: The node's name in the API.
    type: str
    required: true
  state:
    description: What the node should be.
    type: str
    choices: [cordoned, drained, schedulable, pods_restarted]
    required: true
  drain_when:
    description: For V(drained), V(always), or V(gpu_pods) (only when a pod on the node uses an C(nvidia.com/) resource
      or O(busy) is true).
    type: str
    choices: [always, gpu_pods]
    default: always
  busy:
    description: The caller saw the node's GPUs run processes; with O(drain_when=gpu_pods) the node is drained.
    type: bool
    default: false
  timeout:
    description: Seconds C(kubectl drain) waits for the pods to leave.
    type: int
    default: 600
  namespace:
    description: For V(pods_restarted), the pods' namespace.
    type: str
    default: kube-system
  selector:
    description: For V(pods_restarted), the label selector of the pods (such as V(name=nvidia-device-plugin-ds)).
    type: str
    default: ""
  if_unreachable:
    description: When the API does not answer, V(fail) or V(skip) (return with RV(reachable) false and a warning).
    type: str
    choices: [fail, skip]
    default: fail
notes:
  - Check mode sends nothing that changes the node (kubectl's server dry run for cordon, drain and uncordon) and says
    what would happen.
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Move the pods off the node before its driver changes
  kgn.gpu_nodes.k8s_node:
    node: "{{ inventory_hostname }}"
    state: drained
    timeout: 600
    api_host: "{{ api.host }}"
    kubeconfig: "{{ api.kubeconfig }}"
  delegate_to: "{{ api.delegate_to }}"
  register: drained

- name: Let pods come back
  kgn.gpu_nodes.k8s_node:
    node: "{{ inventory_hostname }}"
    state: schedulable
    api_host: "{{ api.host }}"
    kubeconfig: "{{ api.kubeconfig }}"
  delegate_to: "{{ api.delegate_to }}"
  when: drained.cordoned
"""

RETURN = r"""
reachable:
  description: Whether the API answered.
  returned: always
  type: bool
unschedulable_before:
  description: Whether the node was cordoned before this call.
  returned: when the API answered
  type: bool
cordoned:
  description: Whether this call cordoned the node (it was schedulable before).
  returned: always
  type: bool
drained:
  description: Whether this call drained the node.
  returned: always
  type: bool
gpu_pods:
  description: The node's pods that ask for an nvidia.com/ resource, as namespace/name (read for V(drained)).
  returned: always
  type: list
restarted:
  description: The pods deleted for V(pods_restarted).
  returned: always
  type: list
msg:
  description: What was done, in words.
  returned: always
  type: str
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import blocking_budgets, pods_using  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.host import NodeModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import CLIENT_ARGS, Kubectl  # noqa: E402


def _pods(kube, node, namespace=None, selector=None):
    return kube.get("pods", all_namespaces=not namespace, namespace=namespace, selector=selector,
                    field_selector=f"spec.nodeName={node}")


def _blocked(kube, node):
    """Which PodDisruptionBudgets keep the node's pods from being evicted, said after a drain that failed (kubectl
    names the pod, and the API's refusal "would violate the pod's disruption budget", not the budget)."""
    try:
        budgets = blocking_budgets(_pods(kube, node), kube.get("poddisruptionbudgets.policy", all_namespaces=True))
    except KgnError:
        return ""
    return "".join(f" PodDisruptionBudget {b['budget']} allows no disruption now ({b['current_healthy']} healthy, "
                   f"{b['desired_healthy']} needed) and selects {', '.join(b['pods'])}: scale it up, or relax the "
                   f"budget, then run again." for b in budgets)


def main():
    module = NodeModule(
        argument_spec={
            **CLIENT_ARGS,
            "node": {"type": "str", "required": True},
            "state": {"type": "str", "required": True,
                      "choices": ["cordoned", "drained", "schedulable", "pods_restarted"]},
            "drain_when": {"type": "str", "default": "always", "choices": ["always", "gpu_pods"]},
            "busy": {"type": "bool", "default": False},
            "timeout": {"type": "int", "default": 600},
            "namespace": {"type": "str", "default": "kube-system"},
            "selector": {"type": "str", "default": ""},
            "if_unreachable": {"type": "str", "default": "fail", "choices": ["fail", "skip"]},
        },
        supports_check_mode=True,
    )
    p = module.params
    kube = Kubectl(module)
    check = module.check_mode
    result = {"reachable": False, "cordoned": False, "drained": False, "gpu_pods": [], "restarted": []}
    node = p["node"]
    try:
        found = kube.get("nodes", name=node)
    except KgnError as err:
        if p["if_unreachable"] == "skip":
            module.warn(f"{node} was not {p['state'].replace('_', ' ')}: the API did not answer ({err})")
            module.exit_json(changed=False, msg=f"not done: {err}", **result)
        module.fail_json(msg=f"Could not make node {node} {p['state'].replace('_', ' ')}: {err}. Nothing was changed.",
                         **result)
    result["reachable"] = True
    if found is None:
        module.fail_json(msg=f"Node {node} is not registered with the API server ({kube.where}); set kube_node_name "
                             f"for this host to its Node name (`kubectl get nodes`). Nothing was changed.", **result)
    before = bool((found.get("spec") or {}).get("unschedulable"))
    result["unschedulable_before"] = before
    would = "would be " if check else ""
    try:
        if p["state"] == "schedulable":
            if before:
                kube.uncordon(node, dry_run=check)
            module.exit_json(changed=before, msg=f"{node} {would}uncordoned" if before else f"{node} was schedulable",
                             **result)
        if p["state"] == "pods_restarted":
            if not p["selector"]:
                module.fail_json(msg="state pods_restarted needs a selector (such as name=nvidia-device-plugin-ds)")
            pods = _pods(kube, node, p["namespace"], p["selector"])
            names = [(i.get("metadata") or {}).get("name") for i in pods.get("items") or []]
            for name in names:
                kube.delete("pod", name, namespace=p["namespace"], dry_run=check)
            result["restarted"] = [f"{p['namespace']}/{name}" for name in names]
            module.exit_json(changed=bool(names), msg=f"{would}restarted: {', '.join(result['restarted'])}" if names
                             else f"no pod on {node} matches {p['selector']} in {p['namespace']}", **result)
        if p["state"] == "drained":
            result["gpu_pods"] = pods_using(_pods(kube, node), "nvidia.com/")
            if p["drain_when"] == "gpu_pods" and not (p["busy"] or result["gpu_pods"]):
                module.exit_json(changed=False, msg=f"{node} left schedulable: no pod on it uses a GPU", **result)
        if not before:
            kube.cordon(node, dry_run=check)
        result["cordoned"] = not before
        if p["state"] == "drained":
            kube.drain(node, p["timeout"], dry_run=check)
            result["drained"] = True
    except KgnError as err:
        left = f" The node stays cordoned ({'cordoned by this run' if result['cordoned'] else 'as it was'})." \
            if result["cordoned"] or before else ""
        blocked = _blocked(kube, node) if p["state"] == "drained" else ""
        module.fail_json(msg=f"{node}: {err}.{blocked}{left}", changed=result["cordoned"], **result)
    words = [f"{node} {would}cordoned" if result["cordoned"] else f"{node} was already cordoned"]
    if result["drained"]:
        words.append(f"{would}drained" + (f" (pods using GPUs: {', '.join(result['gpu_pods'])})"
                                          if result["gpu_pods"] else ""))
    module.exit_json(changed=result["cordoned"] or result["drained"], msg=", ".join(words), **result)


if __name__ == "__main__":
    main()
