#!/usr/bin/python
"""Documentation of the gpu_node_labels_result action (it runs on the controller;
plugins/action/gpu_node_labels_result.py)."""

DOCUMENTATION = r"""
---
module: gpu_node_labels_result
short_description: Take one GPU node's labels from the answer of the call that labelled its API server's batch
description:
  - An action that runs on the controller and contacts no host. The gpu_node_labels role labels the play's GPU nodes
    with one C(kgn.gpu_nodes.gpu_node_labels) call per API server, made with C(batch=true) and registered as a
    loop result (O(batches)); then every node runs this to take its own answer.
  - The node gets its facts C(kgn_observed_node_labels) and C(kgn_state_node_labels), is C(changed) when its labels
    were patched (or in check mode would be), shows its diff, and fails alone when its stacks cannot run on its GPUs
    or its settings are refused, with the message that says what to fix.
  - A node whose API host could not be reached is said (NOT LABELLED) and does not fail; one whose batch call failed
    fails with that call's message.
options:
  batches:
    description: The registered result of the batch task (a loop over the API servers).
    type: dict
    required: true
  host:
    description: The inventory host whose answer to take.
    type: str
    default: the task's host (C(inventory_hostname))
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Take this node's labels from its API server's answer
  kgn.gpu_nodes.gpu_node_labels_result:
    batches: "{{ __gpu_node_labels_batches }}"
"""

RETURN = r"""
status:
  description: What happened to the node (as RV(kgn.gpu_nodes.gpu_node_labels#module:nodes)'s status), or
    C(api host unreachable).
  returned: always
  type: str
node_name:
  description: The node's name in the cluster.
  returned: when its batch answered
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(argument_spec={"batches": {"type": "dict", "required": True}, "host": {"type": "str"}})
    module.fail_json(msg="gpu_node_labels_result runs on the controller as an action; call it as a task of a play")


if __name__ == "__main__":
    main()
