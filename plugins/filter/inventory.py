"""Inventory contract checks for playbooks/validate.yml (run before any host is touched, render included).

The contract itself is plugins/module_utils/contract.py; the role inputs and their types come from each
role's meta/argument_specs.yml, checked with Ansible's own argument spec validator. The Kubernetes version
range comes from the scheduler decisions and the stack names and conflicts from the stack catalog.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import api, contract
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.inputs import whole_number
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation, runtime
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra, stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks, verify
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap

try:  # ansible-core 2.19+: a string read from a file is templated only once trusted as a template
    from ansible.template import trust_as_template
except ImportError:  # 2.16-2.18: a file's text comes marked unsafe (never templated); a plain str copy is templated
    def trust_as_template(value):
        return "".join([value])

assert verify  # imported for its checks: checks.REGISTRY holds every check verify runs (the waivers name them)


def _inputs(spec_doc) -> dict:
    """The options of a role's main entry point, from its meta/argument_specs.yml (parsed)."""
    try:
        return dict(spec_doc["argument_specs"]["main"]["options"])
    except (KeyError, TypeError):
        raise AnsibleFilterError(
            "inventory_problems: role_specs must map role name -> parsed meta/argument_specs.yml"
        ) from None


class RoleInputs:
    """A host's role inputs as the run's roles will read them: the inventory's value, else the role's default from
    its defaults/main.yml rendered with the host's variables by Ansible's own templating (a contract variable: its
    contract default). One source of defaults: the first play decides with the values the run uses (an input left
    at its default is not "unknown" here)."""

    def __init__(self, host, hv, hostvars, defaults):
        self._host = host
        self._hv = hv
        self._hostvars = hostvars
        self._defaults = defaults
        self._templar = None
        self._seen = {}

    def get(self, name):
        if name not in self._seen:
            if name in self._hv:
                self._seen[name] = self._hv[name]
            elif name in self._defaults:
                self._seen[name] = self._default(self._defaults[name])
            elif name in contract.CONTRACT:
                self._seen[name] = contract.CONTRACT[name].get("default")
            else:
                raise AnsibleFilterError(f"inventory_problems: {name} is neither a role input nor a contract variable")
        return self._seen[name]

    def _default(self, value):
        if not isinstance(value, str) or "{" not in value:
            return value
        if self._templar is None:
            # the host's variables as a task sees them (Ansible adds hostvars to every task's variables)
            variables = {"inventory_hostname": self._host, **self._hv, "hostvars": self._hostvars}
            self._templar = Templar(loader=DataLoader(), variables=variables)
        return self._templar.template(trust_as_template(value))


def _spec_problems(host: str, values: dict, options: dict, seen: dict) -> list[str]:
    """Check role inputs against the role's own argument spec (choices, list elements, sub-options), as Ansible's
    validate_argument_spec would on the host.

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


def _role_input_problems(host: str, given: dict, options: dict, seen: dict) -> list[str]:
    """A role's inputs the inventory sets: the conversions Ansible would make quietly first (a list for a string,
    a blank value), then the argument spec, then each value by its name (module_utils/inputs.py)."""
    strict = {name: contract.strict_problems(host, name, value, options[name]) for name, value in given.items()}
    problems = [line for lines in strict.values() for line in lines]
    typed_ok = {name: value for name, value in given.items() if not strict[name]}
    if typed_ok:
        typed = _spec_problems(host, typed_ok, options, seen)
        problems += typed or contract.input_problems(host, typed_ok, options, tuple(checks.REGISTRY))
    return problems


def inventory_problems(groups: dict, hostvars, role_specs: dict | None = None,
                       role_defaults: dict | None = None) -> list[str]:
    """Return every violation of the inventory contract, one readable line each (empty when valid).

    ``role_specs``: role name -> its parsed meta/argument_specs.yml; ``role_defaults``: role name -> its parsed
    defaults/main.yml (the decisions below read each input as the run will: the inventory's value, else the
    role's default)."""
    if role_defaults is None:
        raise AnsibleFilterError("inventory_problems: role_defaults must map role name -> parsed defaults/main.yml")
    role_inputs = {role: _inputs(doc) for role, doc in (role_specs or {}).items()}
    defaults = {name: value for doc in (role_defaults or {}).values() for name, value in (doc or {}).items()}
    problems = contract.group_problems(groups)
    control_plane = groups.get("kube_control_plane", [])
    gpu_nodes = groups.get("gpu_nodes", [])
    inventory_hosts = set(groups.get("all", [])) | set(control_plane) | set(gpu_nodes)
    # Each host read once: Ansible builds every variable of a host (its cached facts decoded and copied) per read.
    read = {host: hostvars[host] for host in sorted(set(control_plane) | set(gpu_nodes))}
    seen: dict = {}
    unreadable = set()
    for host, hv in read.items():
        names = list(hv.keys())
        try:
            variables = {name: hv[name] for name in names if name in contract.CONTRACT}
            given_all = {name: hv[name] for name in names if any(name in o for o in role_inputs.values())}
        except Exception as err:  # a value whose template fails: say which host and why
            problems.append(f"{host}: a variable cannot be read: {err}")
            unreadable.add(host)
            continue
        problems.extend(contract.value_problems(host, variables))
        problems.extend(contract.api_host_problems(host, variables, inventory_hosts))
        problems.extend(contract.name_problems(host, names, role_inputs))
        for options in role_inputs.values():
            given = {name: value for name, value in given_all.items() if name in options}
            if given:
                problems.extend(_role_input_problems(host, given, options, seen))
    # the decisions below stand on values already found valid: a host with a wrong one is said once, above
    wrong = unreadable | {line.split(": ", 1)[0] for line in problems}
    run = {host: RoleInputs(host, hv, hostvars, defaults) for host, hv in read.items() if host not in wrong}
    waits = sorted(name for name in defaults if name.endswith("_timeout"))
    try:
        for host, inputs in run.items():
            problems.extend(_wait_problems(host, inputs, waits))
        problems.extend(_node_name_problems(run, groups, hostvars))
        problems.extend(_cluster_problems(run, control_plane, gpu_nodes))
        problems.extend(_isolation_problems(run, gpu_nodes, groups, hostvars))
    except AnsibleError as err:  # a role default that cannot be rendered for a host: say which and why
        problems.append(f"inventory: a role default cannot be rendered with this inventory's values: {err}")
    return _merge_hosts(list(dict.fromkeys(problems)), sorted(read))


def _node_name_problems(run: dict, groups: dict, hostvars) -> list[str]:
    """Two GPU hosts of one cluster mapped to one Node would label, drain and judge each other's node."""
    by_name: dict = {}
    for host in groups.get("gpu_nodes", []):
        if host in run:
            cluster = api.api_host(host, groups, hostvars, run[host].get("kube_api_host"))
            by_name.setdefault((run[host].get("gpu_node_labels_node_name"), cluster), []).append(host)
    return [f"inventory: the hosts {' and '.join(hosts)} all have the Node name {name!r}; give each its own "
            "kube_node_name" for (name, _), hosts in by_name.items() if len(hosts) > 1]


def _wait_problems(host: str, inputs: RoleInputs, names: list) -> list[str]:
    """A role's own wait (a reboot, a drain, a health check) that the run's task timeout would cut short: Ansible
    would stop the task as hung before the wait could end."""
    limit = whole_number(inputs.get("kgn_task_timeout"))
    problems = []
    for name in names:
        value = whole_number(inputs.get(name))
        if value is not None and limit is not None and value >= limit:
            problems.append(f"{host}: {name} is {value} s, not shorter than kgn_task_timeout ({limit} s): the task "
                            f"would be stopped as hung before its own wait ends; raise kgn_task_timeout above it or "
                            f"lower {name}")
    return problems


def _cluster_problems(run: dict, control_plane: list, gpu_nodes: list) -> list[str]:
    """Stack names and conflicts (the stack catalog decides) and nvidia_dra's refusals, from the inputs the run
    will use. No control-plane host in the inventory means nobody can give kube-scheduler an extender (a managed
    control plane), unless a second, in-cluster kube-scheduler carries the extenders
    (gpu_sharing_stacks_secondary_scheduler, a cluster-wide setting read from the first GPU node; auto = no
    kube_control_plane hosts)."""
    problems = []
    stacks_by_node = {host: run[host].get("gpu_sharing_stacks") or [] for host in gpu_nodes if host in run}
    first = next((host for host in gpu_nodes if host in run), None)
    setting = run[first].get("gpu_sharing_stacks_secondary_scheduler") if first else "auto"
    try:
        secondary = stacks.secondary_scheduler(setting, control_plane)
    except KgnError as exc:
        problems.append(f"inventory: {exc}")
        secondary = False
    problems.extend(stacks.stack_problems(stacks_by_node, scheduler_changeable=bool(control_plane),
                                          secondary_scheduler=secondary))
    problems.extend(_dra_problems(run, stacks_by_node))
    for host in control_plane:
        if host in run:
            problems.extend(_resource_api_problems(host, run[host]))
    return problems


def _resource_api_problems(host: str, inputs: RoleInputs) -> list[str]:
    """gpu_sharing_stacks_dra_resource_api against the versions the cluster's Kubernetes minor has."""
    override = inputs.get("gpu_sharing_stacks_dra_resource_api")
    version = inputs.get("gpu_sharing_stacks_kubernetes_version")
    if not override or not version or dra.kubernetes_problems(version):
        return []
    try:
        dra.resource_api(version, None, override)
    except KgnError as err:
        return [f"{host}: {str(err).replace(' Nothing was changed.', '')}"]
    return []


def _isolation_problems(run: dict, gpu_nodes: list, groups: dict, hostvars) -> list[str]:
    """NVIDIA_VISIBLE_DEVICES refused on a node whose stack hands GPUs out by nothing else (isolation decides), and a
    node that refuses it while its cluster's device plugin, deployed from the API host's settings, still hands GPUs
    out by it (its GPU pods would start without GPUs)."""
    problems = []
    for host in gpu_nodes:
        if host not in run:
            continue
        try:
            node = _envvar_policy(run[host], "nvidia_container_runtime")
            api_host = api.api_host(host, groups, hostvars, run[host].get("kube_api_host"))
            cluster = _envvar_policy(run[api_host], "gpu_sharing_stacks") if api_host in run else None
        except KgnError as err:
            problems.append(f"{host}: {str(err).replace(' Nothing was changed', '')}")
            continue
        if cluster is not None and node["refuse"] and not cluster["refuse"]:
            problems.append(
                f"{host}: refuses NVIDIA_VISIBLE_DEVICES from unprivileged containers, but the device plugin of its "
                f"cluster, deployed from {api_host}, hands GPUs out by it ({api_host}: {cluster['why']}); its GPU "
                "pods would start without GPUs. Give kgn_gpu_envvar_unprivileged and gpu_sharing_stacks one value "
                "for the whole cluster (its group_vars)")
    return problems


def _envvar_policy(inputs: RoleInputs, role: str) -> dict:
    return isolation.envvar_policy(inputs.get(f"{role}_envvar_unprivileged"), inputs.get(f"{role}_stacks")
                                   if role == "nvidia_container_runtime" else inputs.get(f"{role}_selected"),
                                   inputs.get(f"{role}_kubernetes_version"))


def _dra_problems(run: dict, stacks_by_node: dict) -> list[str]:
    """nvidia_dra's refusals per GPU node (Kubernetes version, CDI in the runtime), before any host is touched."""
    problems = []
    for host, chosen in stacks_by_node.items():
        if "nvidia_dra" not in (chosen or []):
            continue
        inputs = run[host]
        observed = inputs.get("nvidia_container_runtime_observed")
        mode = inputs.get("nvidia_container_runtime_mode")
        version = inputs.get("nvidia_container_runtime_kubernetes_version")
        try:
            decided = runtime.runtime_mode({"mode": mode, "engine": inputs.get("nvidia_container_runtime_engine"),
                                            "kubernetes_version": version,
                                            "toolkit_version": inputs.get("nvidia_container_runtime_toolkit_version")},
                                           observed if isinstance(observed, dict) and observed else None)
        except KgnError:
            continue  # the runtime's own input checks say what is wrong with these settings
        # an auto mode resting on assumed engine versions is the run's to decide on the node, not refused here
        mode = None if decided["assumed"] and mode == "auto" else decided["mode"]
        problems.extend(dra.node_problems(host, chosen, version, mode))
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
