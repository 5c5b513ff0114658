"""The inventory contract: the variables every inventory may set, and the checks run before any host is
touched (playbooks/validate.yml, also first in the render).

Contract variables are read by several roles (each role's defaults map them to its own inputs); role
inputs are the ``<role>_*`` variables of each role's ``meta/argument_specs.yml``. Pure code: the
controller-side filter passes in the hosts' variables and the roles' argument specs.
"""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import inputs
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import DEFAULT_KUBECONFIG
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation, runtime
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import (
    ALLOW_NEWER,
    KUBERNETES_SUPPORTED,
    version_string,
)

STACKS = tuple(stacks._CATALOG)
OBSERVED = ("container_runtime", "nvidia_driver", "nvidia_container_toolkit", "kube_scheduler", "node_labels",
            "stacks")

_OLDEST, _NEWEST = (version_string(end) for end in KUBERNETES_SUPPORTED)
# name -> how it is checked and documented (README "The inventory contract" is generated from this)
CONTRACT = {
    "kubernetes_version": {
        "type": "str", "required": True,
        "values": f'`"{_OLDEST}"` … `"{_NEWEST}"`, quoted, e.g. `"1.23.1"`, `"v1.27.3"`, `"1.27.3+k3s1"`',
        "description": "the cluster's Kubernetes version",
    },
    ALLOW_NEWER: {
        "type": "bool", "default": False,
        "description": f"run a Kubernetes minor newer than {_NEWEST} (the newest known) with the {_NEWEST} config "
                       "variant; the run and the report say so (docs/versions.md)",
    },
    "kube_scheduler_style": {
        "type": "str", "choices": ["auto", "kubeadm", "systemd"], "default": "auto",
        "description": "how kube-scheduler runs on the control-plane hosts",
    },
    "container_runtime": {
        "type": "str", "choices": ["auto", *runtime.RUNTIMES], "default": "auto",
        "description": "the engine kubelet uses on the GPU nodes",
    },
    "gpu_sharing_stacks": {
        "type": "list", "choices": list(STACKS), "default": [],
        "description": "the GPU-sharing stacks of the node's cluster (`[]` for none)",
    },
    "device_plugin_sharing": {
        "type": "str", "choices": ["none", "time-slicing", "mps"], "default": "none",
        "description": "how the NVIDIA device plugin shares a GPU (stacks, labels and verify read it)",
    },
    "device_plugin_mig_strategy": {
        "type": "str", "choices": list(mig.STRATEGIES), "default": "none",
        "description": "the NVIDIA device plugin's migStrategy (stacks, the MIG role and verify read it)",
    },
    "nvidia_mig_layout": {
        "type": "raw", "default": "",
        "values": '`""` (not managed), `all-disabled`, `all-balanced`, `all-1g.10gb` …, or a list of '
                  '`{devices, profiles}`',
        "description": "the MIG layout of the node's GPUs (the nvidia_mig role and verify read it; docs/mig.md)",
    },
    "gpushare_mps": {
        "type": "bool", "default": False,
        "description": "run the gpushare device plugin with MPS (stacks and labels read it)",
    },
    "gpu_driver_version": {
        "type": "str", "default": "", "check": inputs.driver_version,
        "values": '`""` (keep what is installed in the branch, else the newest) or e.g. `"535.216.01"`',
        "description": "the NVIDIA driver version to pin (the driver role and verify read it)",
    },
    "kube_api_host": {
        "type": "str", "default": "",
        "values": '`""` (the cluster\'s first control-plane host) or an inventory host',
        "description": "the host that runs kubectl for this host's cluster (labels, stacks, verify, upgrades)",
    },
    "kube_node_name": {
        "type": "str", "default": "", "check": inputs.node_name,
        "values": '`""` (the inventory name) or the name `kubectl get nodes` lists',
        "description": "the host's Kubernetes Node name, when it is not its inventory name (labels, MIG, the "
                       "drain and verify read it)",
    },
    "kgn_task_timeout": {
        "type": "int", "default": 1800, "check": inputs.seconds,
        "values": "default `1800` (seconds)",
        "description": "the longest one task may run on a host: a host that hangs mid-task (a stuck mount, a frozen "
                       "kernel) fails alone, the others go on, and the report names it (docs/operations.md)",
    },
    "kgn_gpu_envvar_unprivileged": {
        "type": "str", "choices": list(isolation.POLICIES), "default": "auto",
        "description": "whether a container that asked for no GPU may take GPUs by setting NVIDIA_VISIBLE_DEVICES: "
                       "`auto` refuses it unless a stack of the cluster needs it, `accept` is the old behaviour "
                       "(runtime, stacks and verify read it; docs/isolation.md)",
    },
    "kube_api_kubeconfig": {
        "type": "str", "default": DEFAULT_KUBECONFIG,
        "description": "the kubeconfig kubectl uses on the API host",
    },
}
for _concern in OBSERVED:
    CONTRACT[f"kgn_observed_{_concern}"] = {
        "type": "dict", "default": {},
        "description": f"what the node shows for {_concern} (recorded by each run; written by hand for a render)",
    }

REQUIRED_GROUPS = ("kube_control_plane", "gpu_nodes")
# Ansible's own per-host names, never the inventory's
MAGIC = {"inventory_file", "inventory_dir", "inventory_hostname", "inventory_hostname_short", "group_names",
         "groups", "playbook_dir", "omit", "role_names", "play_hosts", "hostvars", "environment"}
TYPES = {"str": str, "list": list, "dict": dict, "bool": bool, "int": int, "raw": object}


def near(a: str, b: str) -> bool:
    """Whether two names are one edit apart (one letter added, removed, changed, or two swapped)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def value_problems(host: str, variables: dict) -> list:
    """Null, empty, mistyped and out-of-range contract values of one host."""
    problems = []
    for name, spec in CONTRACT.items():
        if name not in variables:
            if spec.get("required"):
                problems.append(f"{host}: {name} is not set; set it to {spec['values']}")
            continue
        value = variables[name]
        if value is None:
            hint = "[]" if spec["type"] == "list" else '""' if spec["type"] == "str" else "a value"
            problems.append(f"{host}: {name} is empty (YAML reads a blank value as null); write {hint} "
                            f"explicitly or remove the line ({spec['description']})")
            continue
        if spec["type"] == "int":
            value = inputs.whole_number(value)
            if value is None:
                problems.append(f"{host}: {name} is {variables[name]!r}; write a whole number")
                continue
        if spec["type"] == "bool" and not isinstance(value, bool):
            problems.append(f"{host}: {name} is {value!r}; write true or false")
            continue
        if not isinstance(value, TYPES[spec["type"]]) or (spec["type"] == "str" and isinstance(value, bool)):
            problems.append(f"{host}: {name} is {value!r} ({type(value).__name__}); it must be a {spec['type']}")
            continue
        choices = spec.get("choices")
        if choices and spec["type"] == "str" and value not in choices:
            problems.append(f"{host}: {name} is {value!r}; accepted values: {', '.join(choices)}")
            continue
        if spec.get("check") and value != spec.get("default"):
            problems += [f"{host}: {text}" for text in spec["check"](name, value)]
    if "kubernetes_version" in variables and variables["kubernetes_version"] is not None:
        try:
            scheduler.scheduler_variant(variables["kubernetes_version"], variables.get(ALLOW_NEWER) is True)
        except KgnError as err:
            problems.append(f"{host}: kubernetes_version: {err}")
    if "nvidia_mig_layout" in variables and variables["nvidia_mig_layout"] is not None:
        problems += [f"{host}: {problem}" for problem in mig.layout_problems(variables["nvidia_mig_layout"])]
    return problems


def strict_problems(host: str, name: str, value, option: dict) -> list:
    """What Ansible's argument spec validator would convert quietly in a role input (module_utils/inputs.py)."""
    return [f"{host}: {text}" for text in inputs.strict_type_problems(name, value, option)]


def input_problems(host: str, values: dict, options: dict, waivable=()) -> list:
    """What is wrong with the role inputs an inventory gives, beyond their argument specs' types and choices:
    each value by its name (module_utils/inputs.py) and waivers against verify's checks (``waivable``)."""
    problems = []
    for name, value in values.items():
        if name.endswith("_waived_checks"):
            texts = inputs.waiver_problems(name, value, waivable)
        else:
            check = inputs.check_of(name, (options.get(name) or {}).get("type", ""))
            texts = check(name, value) if check is not None else []
        problems += [f"{host}: {text}" for text in texts]
    return problems


def _role_of(name: str, role_inputs: dict):
    matches = [role for role in role_inputs if name.startswith(role + "_")]
    return max(matches, key=len) if matches else None


def name_problems(host: str, names: list, role_inputs: dict) -> list:
    """Names the inventory gives that are no input: a role prefix with an unknown name, or one edit away
    from a contract variable or a role input."""
    known = set(CONTRACT) | {n for inputs in role_inputs.values() for n in inputs}
    problems = []
    for name in names:
        if name in known or name in MAGIC or name.startswith("ansible_"):
            continue
        close = sorted(k for k in known if near(name, k))
        role = _role_of(name, role_inputs)
        if close:
            problems.append(f"{host}: {name} is not a variable of this project; did you mean {' or '.join(close)}?")
        elif role:
            problems.append(f"{host}: {name} is not an input of the {role} role (see roles/{role}/defaults/main.yml); "
                            "fix the spelling")
    return problems


def group_problems(groups: dict) -> list:
    problems = [
        f"inventory: group {group!r} is missing; every inventory defines it (it may be empty only for "
        "kube_control_plane on a managed control plane)"
        for group in REQUIRED_GROUPS
        if group not in groups
    ]
    if not groups.get("gpu_nodes"):
        problems.append("inventory: group 'gpu_nodes' has no hosts; list the GPU nodes to configure")
    return problems


def api_host_problems(host: str, variables: dict, inventory_hosts: set) -> list:
    value = variables.get("kube_api_host")
    if isinstance(value, str) and value and value not in inventory_hosts:
        return [f"{host}: kube_api_host is {value!r}, which is not a host of this inventory; name a "
                "kube_control_plane host"]
    return []


def hosts_with(hosts: object, hostvars: object, variable: str, present: bool = True) -> list:
    """The hosts of ``hosts`` whose inventory or facts set ``variable`` to something not empty (a play's hosts picked
    on the control machine, such as the GPU nodes with a MIG layout); with ``present`` false, those that do not.
    ``hostvars`` undefined means every host: Ansible defines it only once the run's first play started, so the
    first play of a playbook (and ``--syntax-check``) cannot tell, and the play's own tasks decide."""
    if not isinstance(hosts, (list, tuple)):
        raise KgnError(f"hosts_with: the input must be a list of inventory host names, got {hosts!r}")
    if hostvars is None or not hasattr(hostvars, "get"):
        return list(hosts)
    found = []
    for host in hosts:
        own = hostvars[host] if host in hostvars else {}  # noqa: SIM401 (Ansible's hostvars)
        value = own.get(variable) if hasattr(own, "get") else None
        if (value not in (None, "", [], {})) == bool(present):
            found.append(host)
    return found
