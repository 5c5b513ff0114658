"""The inventory contract: the variables every inventory may set, and the checks run before any host is
touched (playbooks/validate.yml, also first in the render).

Contract variables are read by several roles (each role's defaults map them to its own inputs); role
inputs are the ``<role>_*`` variables of each role's ``meta/argument_specs.yml``. Pure code: the
controller-side filter passes in the hosts' variables and the roles' argument specs.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import labels, mig, runtime, scheduler, stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import DEFAULT_KUBECONFIG
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import (
    ALLOW_NEWER,
    KUBERNETES_SUPPORTED,
    kubernetes_minor,
    parse_version,
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
        "type": "str", "default": "",
        "values": '`""` (keep what is installed in the branch, else the newest) or e.g. `"535.216.01"`',
        "description": "the NVIDIA driver version to pin (the driver role and verify read it)",
    },
    "kube_api_host": {
        "type": "str", "default": "",
        "values": '`""` (the cluster\'s first control-plane host) or an inventory host',
        "description": "the host that runs kubectl for this host's cluster (labels, stacks, verify, upgrades)",
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
DRIVER_VERSION = re.compile(r"^\d{3}\.\d{1,3}(\.\d{1,3})?$")
TYPES = {"str": str, "list": list, "dict": dict, "bool": bool, "raw": object}


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
        if spec["type"] == "bool" and not isinstance(value, bool):
            problems.append(f"{host}: {name} is {value!r}; write true or false")
            continue
        if not isinstance(value, TYPES[spec["type"]]) or (spec["type"] == "str" and isinstance(value, bool)):
            problems.append(f"{host}: {name} is {value!r} ({type(value).__name__}); it must be a {spec['type']}")
            continue
        choices = spec.get("choices")
        if choices and spec["type"] == "str" and value not in choices:
            problems.append(f"{host}: {name} is {value!r}; accepted values: {', '.join(choices)}")
    if "kubernetes_version" in variables and variables["kubernetes_version"] is not None:
        try:
            scheduler.scheduler_variant(variables["kubernetes_version"], variables.get(ALLOW_NEWER) is True)
        except KgnError as err:
            problems.append(f"{host}: kubernetes_version: {err}")
    if "nvidia_mig_layout" in variables and variables["nvidia_mig_layout"] is not None:
        problems += [f"{host}: {problem}" for problem in mig.layout_problems(variables["nvidia_mig_layout"])]
    version = variables.get("gpu_driver_version")
    if isinstance(version, str) and version and not DRIVER_VERSION.match(version):
        problems.append(f"{host}: gpu_driver_version is {version!r}; write NVIDIA's version, e.g. \"535.216.01\", "
                        'or "" to keep the installed one')
    return problems


# RFC 1123: a Kubernetes node name is a DNS subdomain, a namespace a DNS label.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^(?=.{{1,253}}$){_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DNS_LABEL_RE = re.compile(rf"^{_DNS_LABEL}$")


def _node_name(name, value):
    if isinstance(value, str) and _DNS_SUBDOMAIN.match(value):
        return []
    return [f"{name} is {value!r}; a Kubernetes node name is lower-case letters, digits, '-' and '.' (RFC 1123, at "
            f"most 253 characters), as `kubectl get nodes` lists it"]


def _namespace(name, value):
    if isinstance(value, str) and _DNS_LABEL_RE.match(value):
        return []
    return [f"{name} is {value!r}; a namespace is lower-case letters, digits and '-' (RFC 1123, at most 63)"]


def _ip_or_empty(name, value):
    try:
        if value == "" or ipaddress.ip_address(value):
            return []
    except ValueError:
        pass
    return [f"{name} is {value!r}; write the node's IP address, or \"\" to use the default-route address"]


def _version_or_empty(name, value):
    if value == "":
        return []
    try:
        parse_version(value, name)
    except KgnError as err:
        return [str(err)]
    return []


def _driver_version(name, value):
    if value == "" or (isinstance(value, str) and DRIVER_VERSION.match(value)):
        return []
    return [f"{name} is {value!r}; write NVIDIA's version, e.g. \"535.216.01\", or \"\" to keep the installed one"]


def _kubernetes_version(name, value):
    """A role's own copy of the Kubernetes version: well-formed and not older than the oldest supported (a minor
    newer than the newest known is the modules' to refuse, as they know the role's allow_newer opt-in)."""
    if value == "":
        return []
    try:
        kubernetes_minor(value, name, newest=False)
    except KgnError as err:
        return [str(err)]
    return []


def _images(name, value):
    return [f"{name}: {key} is {image!r}; write an image reference such as registry.example.com/repo/name:tag"
            for key, image in (value or {}).items()
            if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image)]


# Role inputs whose values the argument specs cannot check (free-form strings and mappings): checked here, in the
# first play, by the same functions the modules use, so a bad value stops the run before any host is touched.
INPUT_CHECKS = {
    "gpu_node_labels_extra": lambda name, value: labels.extra_label_problems(value, name),
    "gpu_node_verify_extra_labels": lambda name, value: labels.extra_label_problems(value, name),
    "gpu_node_labels_node_name": _node_name,
    "gpu_node_verify_node_name": _node_name,
    "nvidia_mig_node_name": _node_name,
    "gpu_sharing_stacks_namespace": _namespace,
    "nvidia_mig_device_plugin_namespace": _namespace,
    "kube_scheduler_extender_node_ip": _ip_or_empty,
    "nvidia_driver_version": _driver_version,
    "gpu_node_verify_driver_version": _driver_version,
    "cuda_toolkit_driver_version": _driver_version,
    "cuda_toolkit_version": _version_or_empty,
    "nvidia_container_toolkit_version": _version_or_empty,
    "kube_scheduler_extender_kubernetes_version": _kubernetes_version,
    "gpu_sharing_stacks_kubernetes_version": _kubernetes_version,
    "nvidia_container_runtime_kubernetes_version": _kubernetes_version,
    "gpu_sharing_stacks_images": _images,
}


def input_problems(host: str, values: dict) -> list:
    """What is wrong with the role inputs an inventory gives (beyond their argument specs' types and choices)."""
    problems = []
    for name, value in values.items():
        check = INPUT_CHECKS.get(name)
        if check is not None and value is not None:
            problems += [f"{host}: {text}" for text in check(name, value)]
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
