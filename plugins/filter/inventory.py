"""Inventory contract checks for playbooks/validate.yml (run before any host is touched).

The per-topic decisions are not repeated here: the Kubernetes version range comes from the
scheduler filters and the stack names and conflicts from the stack catalog, imported as sibling
modules (a plain project cannot import one filter file from another by package name).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import scheduler, stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

CHOICES = {
    "kube_scheduler_style": ("auto", "kubeadm", "systemd"),
    "container_runtime": ("auto", "docker", "containerd", "crio"),
}
REQUIRED_GROUPS = ("kube_control_plane", "gpu_nodes")


def _check_host(host: str, hv) -> list[str]:
    problems = []
    version = hv.get("kubernetes_version")
    try:
        scheduler.scheduler_variant(version)
    except KgnError as exc:
        problems.append(f"{host}: kubernetes_version: {exc}")
    for var, accepted in CHOICES.items():
        value = hv.get(var, "auto")
        if value not in accepted:
            problems.append(f"{host}: {var} is {value!r}; accepted values: {', '.join(accepted)}")
    return problems


def inventory_problems(groups: dict, hostvars) -> list[str]:
    """Return every violation of the inventory contract, one readable line each (empty when valid)."""
    problems = [
        f"inventory: group {group!r} is missing; every inventory defines it (it may be empty only for "
        "kube_control_plane on a managed control plane)"
        for group in REQUIRED_GROUPS
        if group not in groups
    ]
    if not groups.get("gpu_nodes"):
        problems.append("inventory: group 'gpu_nodes' has no hosts; list the GPU nodes to configure")
    control_plane = groups.get("kube_control_plane", [])
    gpu_nodes = groups.get("gpu_nodes", [])
    for host in sorted(set(control_plane) | set(gpu_nodes)):
        problems.extend(_check_host(host, hostvars[host]))
    # Stack names and conflicts: the stack catalog decides. No control-plane host in the inventory
    # means nobody can give kube-scheduler an extender (a managed control plane).
    # Unless a second, in-cluster kube-scheduler carries the extenders (gpu_sharing_stacks_secondary_scheduler,
    # a cluster-wide setting read from the first GPU node; auto = no kube_control_plane hosts).
    stacks_by_node = {host: hostvars[host].get("gpu_sharing_stacks", []) for host in gpu_nodes}
    setting = hostvars[gpu_nodes[0]].get("gpu_sharing_stacks_secondary_scheduler", "auto") if gpu_nodes else "auto"
    try:
        secondary = stacks.secondary_scheduler(setting, control_plane)
    except KgnError as exc:
        problems.append(f"inventory: {exc}")
        secondary = False
    problems.extend(stacks.stack_problems(stacks_by_node, scheduler_changeable=bool(control_plane),
                                                  secondary_scheduler=secondary))
    return problems


def unknown_inputs(seen: list, prefix: str, known: list, hostvars, hosts: list) -> list[str]:
    """Names starting with PREFIX that are not role inputs: SEEN (the play's, from the varnames lookup)
    plus every variable of the HOSTS in HOSTVARS (inventory and facts), in order of first appearance."""
    name = "unknown_inputs"
    if not isinstance(prefix, str) or not prefix:
        raise AnsibleFilterError(f"{name}: prefix must be the role's variable prefix, e.g. 'nvidia_driver_'")
    if not all(isinstance(v, list) for v in (seen, known, hosts)):
        raise AnsibleFilterError(
            f"{name}: input (query('ansible.builtin.varnames', ...)), known and hosts (ansible_play_hosts) "
            "must be lists"
        )
    names = list(seen) + [var for host in hosts for var in hostvars[host] if var.startswith(prefix)]
    return [var for var in dict.fromkeys(names) if var not in known]


class FilterModule:
    """Inventory contract filters."""

    def filters(self):
        return {"inventory_problems": inventory_problems, "unknown_inputs": unknown_inputs}
