"""What a role input's value must be beyond its argument spec's type and choices, checked in the first play
(playbooks/validate.yml) before any host is touched.

Each role input is checked by its name when one is listed in ``BY_NAME``, else by the kind its name ends with
(``BY_SUFFIX``: every ``*_namespace`` is a namespace, every ``*_timeout`` a number of seconds, every ``*_url`` a
URL ...), so an input added later is checked without being listed here. The messages name the variable and say
what to write. Pure code: the controller-side filter (plugins/filter/inventory.py) calls it.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels import labels
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra, stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import kubernetes_minor, parse_version

DRIVER_VERSION = re.compile(r"^\d{3}\.\d{1,3}(\.\d{1,3})?$")
# RFC 1123: a Kubernetes node name is a DNS subdomain, a namespace a DNS label.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^(?=.{{1,253}}$){_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DNS_LABEL_RE = re.compile(rf"^{_DNS_LABEL}$")
_FINGERPRINT = re.compile(r"^[0-9A-Fa-f]{40}$")
_URL_SCHEMES = ("http", "https", "file")
# A day is the longest wait any step of a run may sensibly take; a timeout above it is a typo (ms for s).
_LONGEST_WAIT = 86400


def node_name(name, value):
    if isinstance(value, str) and _DNS_SUBDOMAIN.match(value):
        return []
    return [f"{name} is {value!r}; a Kubernetes node name is lower-case letters, digits, '-' and '.' (RFC 1123, at "
            f"most 253 characters), as `kubectl get nodes` lists it"]


def namespace(name, value):
    if isinstance(value, str) and _DNS_LABEL_RE.match(value):
        return []
    return [f"{name} is {value!r}; a namespace is lower-case letters, digits and '-' (RFC 1123, at most 63)"]


def _dns_subdomain(name, value):
    if isinstance(value, str) and _DNS_SUBDOMAIN.match(value):
        return []
    return [f"{name} is {value!r}; a Kubernetes object name is lower-case letters, digits, '-' and '.' (RFC 1123)"]


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


def driver_version(name, value):
    if value == "" or (isinstance(value, str) and DRIVER_VERSION.match(value)):
        return []
    return [f"{name} is {value!r}; write NVIDIA's version, e.g. \"535.216.01\", or \"\" to keep the installed one"]


def _driver_branch(name, value):
    if value == "auto" or (isinstance(value, str) and re.match(r"^\d{3}$", value)):
        return []
    return [f"{name} is {value!r}; write a driver branch such as \"580\", or auto"]


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


def _image(name, value):
    if value == "" or (isinstance(value, str) and value.strip() and not any(c.isspace() for c in value)
                       and "://" not in value):
        return []
    return [f"{name} is {value!r}; write an image reference such as registry.example.com/repo/name:tag"]


def _images(name, value):
    return [f"{name}: {key} is {image!r}; write an image reference such as registry.example.com/repo/name:tag"
            for key, image in (value or {}).items()
            if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image)]


def _registry_mirror(name, value):
    """The stacks' registry mirror: a registry host[:port][/path] put in front of every image (stacks.stack_image)."""
    if value == "":
        return []
    try:
        stacks.stack_image("example/image:tag", value)
    except KgnError:
        pass
    else:
        if not any(c.isspace() for c in value):
            return []
    return [f"{name} is {value!r}; write a registry host[:port][/path] without a scheme, e.g. "
            "\"mirror.example.com:5000\", or \"\" to pull from each image's own registry"]


def _url(name, value):
    """A URL the node (or the control machine) downloads from: http(s) or file, with a host or a path."""
    if value == "":
        return []
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts and parts.scheme in _URL_SCHEMES and (parts.netloc or (parts.scheme == "file" and parts.path)) \
            and not any(c.isspace() for c in value):
        return []
    return [f"{name} is {value!r}; write a URL such as https://mirror.example.com/path (http, https or file), "
            "or \"\" for the default"]


def _url_or_path(name, value):
    """A file fetched from a URL or read from a path on the control machine (a key, a runfile)."""
    if isinstance(value, str) and value.startswith("/"):
        return []
    return _url(name, value)


def _absolute_path(name, value):
    if value == "" or (isinstance(value, str) and value.startswith("/") and "\n" not in value):
        return []
    return [f"{name} is {value!r}; write an absolute path (starting with /)"]


def whole_number(value):
    """``value`` as an int when it is one, or a string of digits (``-e name=60`` on the command line gives text),
    else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def seconds(name, value):
    value = whole_number(value)
    if value is not None and 1 <= value <= _LONGEST_WAIT:
        return []
    return [f"{name} is {value!r}; write a number of seconds from 1 to {_LONGEST_WAIT}"]


def _count_from(low):
    def check(name, value):
        value = whole_number(value)
        if value is not None and value >= low:
            return []
        return [f"{name} is {value!r}; write a whole number of at least {low}"
                + (" (0 = no limit)" if low == 0 else "")]
    return check


def _fingerprint(name, value):
    if value == "" or (isinstance(value, str) and _FINGERPRINT.match(value.replace(" ", ""))):
        return []
    return [f"{name} is {value!r}; write the key's 40-hex-digit OpenPGP fingerprint (`gpg --show-keys KEY`), or "
            "\"\" to accept the key the repository serves"]


def _resource_api(name, value):
    """A resource.k8s.io version some Kubernetes minor serves (whether the cluster's does is checked with its
    Kubernetes version, plugins/filter/inventory.py)."""
    known = sorted({"v1", *(v for versions in dra.BETA_VERSIONS.values() for v in versions)})
    version = value.split("/", 1)[1] if isinstance(value, str) and value.startswith("resource.k8s.io/") else value
    if value == "" or version in known:
        return []
    return [f"{name} is {value!r}; write a resource.k8s.io version ({', '.join(known)}, with or without "
            "resource.k8s.io/), or \"\" for the version this project picks"]


def _extra_labels(name, value):
    return labels.extra_label_problems(value, name)


def _unit_name(name, value):
    if isinstance(value, str) and re.match(r"^[A-Za-z0-9:_.@\\-]+\.service$", value):
        return []
    return [f"{name} is {value!r}; write a systemd service unit name such as kube-scheduler.service"]


def _command(name, value):
    """A command the node runs (kubectl, nvidia-smi): a name found in PATH or an absolute path, no arguments."""
    if isinstance(value, str) and value and not any(c.isspace() for c in value) and (
            value.startswith("/") or "/" not in value):
        return []
    return [f"{name} is {value!r}; write a command name found in PATH (e.g. kubectl) or an absolute path, without "
            "arguments"]


def _feature_gates(name, value):
    return [f"{name}: {key!r}: {gate!r} is not a feature gate setting; write GateName: true or false"
            for key, gate in (value or {}).items()
            if not (isinstance(key, str) and re.match(r"^[A-Z][A-Za-z0-9]*$", key)) or not isinstance(gate, bool)]


def _mig_layout(name, value):
    return [text.replace("nvidia_mig_layout", name, 1) for text in mig.layout_problems(value)]


# Inputs whose name alone says what they hold; checked before the kinds below.
BY_NAME = {
    "kube_scheduler_extender_node_ip": _ip_or_empty,
    "kube_scheduler_extender_systemd_unit": _unit_name,
    "nvidia_driver_branch": _driver_branch,
    "nvidia_driver_package_throttle": _count_from(0),
    "gpu_sharing_stacks_device_plugin_replicas": _count_from(1),
    "gpu_sharing_stacks_images": _images,
    "gpu_sharing_stacks_registry_mirror": _registry_mirror,
    "gpu_sharing_stacks_dra_feature_gates": _feature_gates,
    "gpu_sharing_stacks_secondary_scheduler_name": _dns_subdomain,
    "nvidia_container_runtime_docker_runtime_path": _command,
    "nvidia_driver_cuda_repo_key": _url_or_path,
    "nvidia_driver_cuda_repo_key_rpm": _url_or_path,
    "gpu_sharing_stacks_gpushare_inspect_src": _absolute_path,
}
# name ending -> check, the longest ending first
BY_SUFFIX = (
    ("_kubernetes_version", _kubernetes_version),
    ("_driver_version", driver_version),
    ("_extra_labels", _extra_labels),
    ("_labels_extra", _extra_labels),
    ("_node_name", node_name),
    ("_namespace", namespace),
    ("_resource_api", _resource_api),
    ("_mig_layout", _mig_layout),
    ("_fingerprint", _fingerprint),
    ("_timeout", seconds),
    ("_image", _image),
    ("_mirror", _url),
    ("_url", _url),
    ("_runfile_path", _absolute_path),
    ("_kubectl", _command),
    ("_nvidia_smi", _command),
    ("_kubeconfig", _absolute_path),
    ("_hook_path", _absolute_path),
    ("_toolkit_version", _version_or_empty),
    ("_docker2_version", _version_or_empty),
)


def check_of(name, option_type=""):
    """The value check of one role input (None when its argument spec says all there is to say). An input of
    type ``path`` must be absolute."""
    if name in BY_NAME:
        return BY_NAME[name]
    for suffix, check in BY_SUFFIX:
        if name.endswith(suffix):
            return check
    return _absolute_path if option_type == "path" else None


def waiver_problems(name, value, known):
    """Waivers that name no check: a typo would waive nothing and the failure would stand."""
    unknown = [w for w in value or [] if w not in known]
    if not unknown:
        return []
    return [f"{name} names {', '.join(repr(w) for w in unknown)}, which {'is' if len(unknown) == 1 else 'are'} "
            f"no check of verify; the checks are: {', '.join(sorted(known))}"]


def strict_type_problems(name, value, option):
    """What Ansible's argument spec validator would quietly convert: a list or a mapping where a string is wanted
    (it would become its Python text), a string where a list or a mapping is wanted (split at commas, parsed as
    k=v), and a null, which YAML reads from a blank value."""
    kind = option.get("type", "str")
    if value is None:
        hint = {"list": "[]", "dict": "{}", "str": '""', "path": '""'}.get(kind, "a value")
        return [f"{name} is empty (YAML reads a blank value as null); write {hint} explicitly or remove the line"]
    if kind in ("str", "path") and not isinstance(value, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return [f"{name} is {value!r}, a number; quote it (\"{value}\"): YAML reads 1.20 as 1.2"]
        return [f"{name} is {value!r} ({type(value).__name__}); it must be a string"]
    if kind == "list" and not isinstance(value, list):
        return [f"{name} is {value!r} ({type(value).__name__}); it must be a YAML list, e.g. [a, b]"]
    if kind == "dict" and not isinstance(value, dict):
        return [f"{name} is {value!r} ({type(value).__name__}); it must be a YAML mapping, e.g. {{key: value}}"]
    if kind == "int" and whole_number(value) is None:
        return [f"{name} is {value!r}; it must be a whole number"]
    if kind == "bool" and not isinstance(value, bool):
        return [f"{name} is {value!r}; write true or false"]
    if kind == "raw" and isinstance(value, str) and value.lower() in ("true", "false") \
            and any(isinstance(c, bool) for c in option.get("choices") or []):
        return [f"{name} is the text {value!r} (as `-e {name}={value}` gives), not a boolean; write "
                f"{value.lower()} unquoted in YAML, or -e '{{\"{name}\": {value.lower()}}}'"]
    return []
