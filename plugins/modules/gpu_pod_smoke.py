#!/usr/bin/python
"""gpu_pod_smoke: a pod per GPU-sharing stack, pinned to one GPU node, that must run and show the GPU it was given."""

DOCUMENTATION = r"""
---
module: gpu_pod_smoke
short_description: Run one pod per stack on a GPU node through Kubernetes and say what it saw, or why it did not run
description:
  - Runs on the host that runs kubectl for the node's cluster (its API host). For each of the node's GPU-sharing
    stacks, creates one pod that asks for the stack's resource (from the stack catalog,
    module_utils/stacks/stacks.py, so a new stack needs nothing here; a DRA claim template where the stack's smoke
    has one), pinned to the node through
    the scheduler (nodeAffinity on metadata.name, so the scheduler, its extenders and a stack's own scheduler decide
    as for any pod).
  - Waits until each pod Succeeded or Failed, or cannot get further (an image that cannot be pulled; on a node
    without GPU, no room for the resource), or O(timeout) passed. A pod that Succeeded must show in its log the GPU it
    saw and, for the memory-sharing stacks, the limit it was given. Otherwise the reason comes from the pod's status
    and events (Insufficient <resource>, an extender error, ImagePullBackOff, a sandbox the runtime refused, no
    scheduler acting on it).
  - The pods (and claim templates) are deleted afterwards, also on failure; leftovers of an interrupted run are
    deleted first (label C(kube-gpu-nodes.io/smoke-node=<node>)).
  - With O(nodes), the smokes of many nodes of one cluster run at once (their pods are created together, watched
    with one read per poll and deleted together). The gpu_node_verify role runs one call per API server for the
    play's GPU nodes.
  - Every API call goes through the project's one API client (plugins/module_utils/kube.py, C(Kubectl)).
  - An API server that does not answer is not a failure of the node, the result is V(skipped) with kubectl's words.
    Check mode creates no pod (skipped). Reports no change (what it creates, it deletes).
extends_documentation_fragment:
  - kgn.gpu_nodes.kubectl
options:
  node_name:
    description: The node's name in the API (one node; O(nodes) for several). One of O(node_name) and O(nodes).
    type: str
  nodes:
    description:
      - The nodes whose smokes run together, each with its own O(node_name), and, where it differs from the options
        of this call, O(stacks), O(host), O(resource_api), O(limits), O(schedulers), O(image), O(tolerations) and
        O(timeout). O(driver_state) is not taken per node (pass O(host), the filter
        P(kgn.gpu_nodes.pod_smoke_host#filter) of the node's driver state).
    type: list
    elements: dict
    suboptions:
      node_name: {description: The node's name in the API., type: str, required: true}
      stacks: {description: The node's stacks (default O(stacks))., type: list, elements: str}
      host: {description: What the node's nvidia-smi showed (default O(host))., type: dict}
      resource_api: {description: As O(resource_api), for this node., type: str}
      limits: {description: As O(limits), for this node., type: dict}
      schedulers: {description: As O(schedulers), for this node., type: dict}
      image: {description: As O(image), for this node., type: str}
      tolerations: {description: As O(tolerations), for this node., type: list, elements: dict}
      timeout: {description: As O(timeout), for this node., type: int}
  stacks:
    description: The node's GPU-sharing stacks (one pod each).
    type: list
    elements: str
    default: []
  host:
    description: What the node's own nvidia-smi showed (the gpu_smoke module's RV(host)); empty, O(driver_state)'s.
    type: dict
    default: {}
  driver_state:
    description:
      - The node's recorded driver state (C(kgn_state_nvidia_driver)), whose live C(nvidia-smi -q -x) gives the GPUs
        the pods' are compared with when O(host) is empty; neither, not compared.
    type: dict
    default: {}
  resource_api:
    description:
      - The resource.k8s.io version the cluster's DRA objects use (the stacks plan's C(dra.resource_api), e.g.
        V(resource.k8s.io/v1)), for the ResourceClaimTemplate of a DRA stack's pod (nvidia_dra). Empty, a DRA stack's
        pod smoke is skipped.
    type: str
    default: ""
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
  delete_timeout:
    description:
      - Seconds to wait for the smoke objects to go after their deletion (one delete for all of them, then one read
        per poll). Objects still there then fail their node's smoke (C(pod_not_deleted)).
    type: int
    default: 60
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Run the pod smoke of a GPU node
  kgn.gpu_nodes.gpu_pod_smoke:
    node_name: gpu-1
    stacks: [nvidia_device_plugin]
  delegate_to: cp1

- name: Run the pod smokes of two GPU nodes at once
  kgn.gpu_nodes.gpu_pod_smoke:
    stacks: [nvidia_device_plugin]
    nodes:
      - node_name: gpu-1
      - node_name: gpu-2
        stacks: [nvidia_device_plugin, hami]
  delegate_to: cp1
"""

RETURN = r"""
status:
  description: V(ok), V(no_gpu), V(failed) or V(skipped) (the worst of the pods; with O(nodes), of every node's).
  returned: always
  type: str
summary:
  description: One line per stack, what its pod saw or why it did not run (with O(nodes), per node).
  returned: always
  type: str
nodes:
  description: With O(nodes), each node's result (V(status), V(summary), V(pods), V(deleted), V(cause)) by its name.
  returned: with O(nodes)
  type: dict
pods:
  description: >-
    Per stack, stack, name, status, cause, summary, phase, lifecycle (what was seen when, seconds from the start:
    created, each phase and condition change, deleted), log (its tail) and events.
  returned: with O(node_name)
  type: list
deleted:
  description: Whether every smoke pod is gone from the API at the end.
  returned: always
  type: bool
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.host import NodeModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import CLIENT_ARGS, Kubectl  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke.smoke_pod_live import (  # noqa: E402
    run_pod_smoke,
    run_pod_smokes,
)

NODE_SPEC = {
    "node_name": {"type": "str", "required": True},
    "stacks": {"type": "list", "elements": "str"},
    "host": {"type": "dict"},
    "resource_api": {"type": "str"},
    "limits": {"type": "dict"},
    "schedulers": {"type": "dict"},
    "image": {"type": "str"},
    "tolerations": {"type": "list", "elements": "dict"},
    "timeout": {"type": "int"},
}


def main() -> None:
    module = NodeModule(
        argument_spec={
            "node_name": {"type": "str"},
            "nodes": {"type": "list", "elements": "dict", "options": NODE_SPEC},
            "stacks": {"type": "list", "elements": "str", "default": []},
            "host": {"type": "dict", "default": {}},
            "driver_state": {"type": "dict", "default": {}},
            "resource_api": {"type": "str", "default": ""},
            "limits": {"type": "dict", "default": {}},
            "schedulers": {"type": "dict", "default": {}},
            "image": {"type": "str", "default": smoke.DEFAULT_IMAGE},
            "namespace": {"type": "str", "default": "default"},
            "tolerations": {"type": "list", "elements": "dict",
                            "default": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
            "timeout": {"type": "int", "default": 180},
            "delete_timeout": {"type": "int", "default": 60},
            **CLIENT_ARGS,
        },
        mutually_exclusive=[("node_name", "nodes")],
        required_one_of=[("node_name", "nodes")],
        supports_check_mode=True,
    )
    p = dict(module.params)
    p["host"] = p["host"] or smoke.host_from_state(p["driver_state"])
    client = Kubectl(module)
    try:
        if p["nodes"] is None:
            result = run_pod_smoke(module, p, client.run)
        else:
            result = run_pod_smokes(module, p, p["nodes"], client.run)
    except KgnError as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
