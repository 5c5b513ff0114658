#!/usr/bin/python
"""Documentation of the gpu_node_report action (it runs on the controller; plugins/action/gpu_node_report.py)."""

DOCUMENTATION = r"""
---
module: gpu_node_report
short_description: Write the run's GPU node report, every host's row included, and say whether the run is ok
description:
  - An action that runs on the controller (the last play of site.yml and playbooks/verify.yml); it contacts no host.
  - One row per host of O(hosts). A host the verify play judged has its row (the gpu_node_verify action's result,
    registered as C(__gpu_node_verify_result)); a host that stopped earlier in the run (a failed task, unreachable,
    or a step whose failure was kept to it) is judged from what it gathered before it stopped (its C(kgn_state_*)
    facts) and its row says why it stopped (C(kgn_run_failure), recorded by the kgn.gpu_nodes.run_failures
    callback).
  - Prints the report, writes C(report.json) and C(report.md) into C(<report_dir>/<UTC stamp>/) and points
    C(<report_dir>/latest) at it. A check-mode run (C(--check)) writes C(<stamp>-check/) and C(latest-check) instead,
    so C(latest) stays the last real run's report.
  - Fails when a host stopped at a step of the run (whatever O(fail_on) says, so the run's exit code says it
    failed), or when a host's verdict is one O(fail_on) does not accept; in both cases after the report is written.
  - The kgn.gpu_nodes.run_failures callback writes the same report when Ansible ends the run before this play.
options:
  hosts:
    description: The hosts the report has a row for (the GPU nodes and control planes of the run); not with O(merge).
    type: list
    elements: str
    default: []
  merge:
    description:
      - Instead of judging this run's hosts, merge the reports of earlier runs into one fleet report (the slices of
        a sliced job, or separate runs of one fleet); every host once, its row from the newest report that has it,
        each report named with its time, limit and the rows kept from it. Written to C(<report_dir>/<stamp>-fleet/)
        and C(<report_dir>/latest-fleet). docs/fleet.md.
      - Each item is a report's C(report.json) or its folder; a relative one is looked for in O(report_dir) first.
    type: list
    elements: str
    default: []
  report_dir:
    description: Folder of the reports; relative to the folder of the ansible.cfg in use.
    type: str
    default: reports
  fail_on:
    description: Fail when a host's verdict is not ok enough, V(never), V(failed) (a host failed) or V(degraded).
    type: str
    choices: [never, failed, degraded]
    default: failed
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Write the report of every GPU node and control plane
  kgn.gpu_nodes.gpu_node_report:
    hosts: "{{ query('ansible.builtin.inventory_hostnames', 'gpu_nodes:kube_control_plane') }}"
    report_dir: reports
    fail_on: failed

- name: Merge the reports of the four slices of a sliced job into one fleet report
  kgn.gpu_nodes.gpu_node_report:
    merge: [20261128T120001Z, 20261128T120342Z, 20261128T120655Z, 20261128T121010Z]
"""

RETURN = r"""
summary:
  description: How many hosts are ok, degraded, pending and failed (the report itself is report.json in RV(folder)).
  returned: always
  type: dict
folder:
  description: The folder the report was written to.
  returned: always
  type: str
stopped:
  description: The hosts that stopped at a step of the run, with why.
  returned: always
  type: list
not_ok:
  description: The hosts whose verdict O(fail_on) does not accept.
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main():
    module = AnsibleModule(argument_spec={"hosts": {"type": "list", "elements": "str", "default": []},
                                          "merge": {"type": "list", "elements": "str", "default": []},
                                          "report_dir": {"type": "str", "default": "reports"},
                                          "fail_on": {"type": "str", "default": "failed",
                                                      "choices": ["never", "failed", "degraded"]}})
    module.fail_json(msg="gpu_node_report runs on the controller as an action; call it as a task of a play")


if __name__ == "__main__":
    main()
