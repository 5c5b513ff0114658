"""Inventory contract checks for playbooks/validate.yml (run before any host is touched, render included).

The contract itself is plugins/module_utils/contract.py; the role inputs and their types come from each
role's meta/argument_specs.yml, checked with Ansible's own argument spec validator. The Kubernetes version
range comes from the scheduler decisions and the stack names and conflicts from the stack catalog.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import contract, dra, runtime, stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


def _inputs(spec_doc) -> dict:
    """The options of a role's main entry point, from its meta/argument_specs.yml (parsed)."""
    try:
        return dict(spec_doc["argument_specs"]["main"]["options"])
    except (KeyError, TypeError):
        raise AnsibleFilterError(
            "inventory_problems: role_specs must map role name -> parsed meta/argument_specs.yml"
        ) from None


def _input_value_problems(host: str, values: dict, options: dict, seen: dict) -> list[str]:
    """Check the role inputs the inventory sets against the role's own argument spec (types, choices).

    ``seen`` keeps each answer by role and values: hosts that share their group_vars are checked once."""
    key = (id(options), json.dumps(values, sort_keys=True, default=repr))
    if key not in seen:
        spec = {}
        for name in values:
            option = {k: v for k, v in options[name].items() if k in ("type", "choices", "elements", "options")}
            spec[name] = option
        result = ArgumentSpecValidator(spec).validate(values)
        seen[key] = [err.msg if hasattr(err, "msg") else str(err) for err in result.errors]
    return [f"{host}: {msg}" for msg in seen[key]]


def inventory_problems(groups: dict, hostvars, role_specs: dict | None = None) -> list[str]:
    """Return every violation of the inventory contract, one readable line each (empty when valid)."""
    role_inputs = {role: _inputs(doc) for role, doc in (role_specs or {}).items()}
    problems = contract.group_problems(groups)
    control_plane = groups.get("kube_control_plane", [])
    gpu_nodes = groups.get("gpu_nodes", [])
    inventory_hosts = set(groups.get("all", [])) | set(control_plane) | set(gpu_nodes)
    # Each host read once: Ansible builds every variable of a host (its cached facts decoded and copied) per read.
    read = {host: hostvars[host] for host in sorted(set(control_plane) | set(gpu_nodes))}
    seen: dict = {}
    for host, hv in read.items():
        names = list(hv.keys())
        try:
            variables = {name: hv[name] for name in names if name in contract.CONTRACT}
        except Exception as err:  # a value whose template fails: say which host and why
            problems.append(f"{host}: a contract variable cannot be read: {err}")
            continue
        problems.extend(contract.value_problems(host, variables))
        problems.extend(contract.api_host_problems(host, variables, inventory_hosts))
        problems.extend(contract.name_problems(host, names, role_inputs))
        for options in role_inputs.values():
            given = {name: hv[name] for name in names if name in options}
            if given:
                typed = _input_value_problems(host, given, options, seen)
                problems.extend(typed)
                if not typed:
                    problems.extend(contract.input_problems(host, given))
    # Stack names and conflicts: the stack catalog decides. No control-plane host in the inventory means
    # nobody can give kube-scheduler an extender (a managed control plane), unless a second, in-cluster
    # kube-scheduler carries the extenders (gpu_sharing_stacks_secondary_scheduler, a cluster-wide setting
    # read from the first GPU node; auto = no kube_control_plane hosts).
    stacks_by_node = {host: read[host].get("gpu_sharing_stacks") or [] for host in gpu_nodes}
    setting = read[gpu_nodes[0]].get("gpu_sharing_stacks_secondary_scheduler", "auto") if gpu_nodes else "auto"
    try:
        secondary = stacks.secondary_scheduler(setting, control_plane)
    except KgnError as exc:
        problems.append(f"inventory: {exc}")
        secondary = False
    problems.extend(stacks.stack_problems(stacks_by_node, scheduler_changeable=bool(control_plane),
                                          secondary_scheduler=secondary))
    problems.extend(_dra_problems(read, stacks_by_node))
    return _merge_hosts(list(dict.fromkeys(problems)), sorted(set(control_plane) | set(gpu_nodes)))


def _dra_problems(read: dict, stacks_by_node: dict) -> list[str]:
    """nvidia_dra's refusals per GPU node (Kubernetes version, CDI in the runtime), before any host is touched."""
    problems = []
    for host, chosen in stacks_by_node.items():
        if "nvidia_dra" not in (chosen or []):
            continue
        hv = read[host]
        observed = hv.get("kgn_observed_container_runtime")
        try:
            decided = runtime.runtime_mode({"mode": hv.get("nvidia_container_runtime_mode", "auto"),
                                            "engine": hv.get("container_runtime", "auto"),
                                            "kubernetes_version": hv.get("kubernetes_version"),
                                            "toolkit_version": hv.get("nvidia_container_toolkit_version", "")},
                                           observed if isinstance(observed, dict) else None)
        except KgnError:
            continue  # the runtime's own input checks say what is wrong with these settings
        # an auto mode resting on assumed engine versions is the run's to decide on the node, not refused here
        mode = None if decided["assumed"] and hv.get("nvidia_container_runtime_mode", "auto") == "auto" \
            else decided["mode"]
        problems.extend(dra.node_problems(host, chosen, hv.get("kubernetes_version"), mode))
    return problems


def _merge_hosts(problems: list[str], hosts: list[str]) -> list[str]:
    """One line for a problem every host has (an extra variable, a group_vars/all value), not one per host."""
    by_text: dict = {}
    for line in problems:
        host, sep, text = line.partition(": ")
        if sep and host in hosts:
            by_text.setdefault(text, []).append(host)
    merged = []
    for line in problems:
        host, sep, text = line.partition(": ")
        if not (sep and host in hosts) or len(hosts) < 2 or len(by_text[text]) < len(hosts):
            merged.append(line)
        elif f"every host: {text}" not in merged:
            merged.append(f"every host: {text}")
    return merged


class FilterModule:
    """Inventory contract filters."""

    def filters(self):
        return {"inventory_problems": inventory_problems, **wrap({"hosts_with": contract.hosts_with})}
