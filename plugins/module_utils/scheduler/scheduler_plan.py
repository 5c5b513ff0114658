"""The kube-scheduler section of the host plan: how kube-scheduler runs, and the files that point it at the
GPU-sharing extenders (or take it back to the installer's own command when no extender is needed).

``scheduler_plan(inputs, observed)`` is pure: ``inputs`` are the kube_scheduler_extender role's settings,
``observed`` what the node shows (read by the kgn.gpu_nodes.kube_scheduler_extender module, or recorded by its last
run as ``kgn_observed_kube_scheduler``, or missing for a render from inventory data alone: then the
installers' own layouts are used (kubeadm's manifest of the version from scheduler_kubeadm.py, kubeasz's
ExecStart given in ``inputs['assume']``) and every such assumption is listed in ``assumed``). The decisions
themselves are the filters' code: ``scheduler.py`` (variant and document), ``scheduler_patch.py`` (URLs,
ExecStart, flags, static pod) and ``stacks.py`` (the stacks' extenders).

The observation (all keys optional)::

    manifest: {path, text (None: no file), mode}
    unit: {name, load_state, fragment, dropins: [paths], texts: {path: text}, need_daemon_reload, exec_start}
    version: {argv, rc, output}            # `<scheduler binary> --version`, when it was needed
    files: {path: text or None}            # the config files (current and the project's own)
    exists: {path: bool}                   # the kubeconfig
    addresses: [ip, ...]                   # hostname --all-ip-addresses
    default_address: ip or None            # source address of the default route
    kube_proxy_mode: text ("" = kube-proxy did not answer)

A drop-in of the unit that sorts after this project's own and sets ExecStart= is refused, naming it (systemd would
run its command, never ours).
"""

import copy
import hashlib
import json
import posixpath
import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plain import (
    NotPlainError,
    require_bool,
    require_text,
    to_plain,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler import (
    CONFIG_PATH,
    POLICY_PATH,
    managed_names,
    scheduler_config,
    scheduler_variant,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_api import classify, existing_extenders
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_kubeadm import kubeadm_scheduler_pod
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler_patch import (
    CHECKSUM_ANNOTATION,
    CONFIG_FLAGS,
    VOLUME_NAME,
    scheduler_args,
    scheduler_extender_urls,
    scheduler_flag_value,
    scheduler_static_pod,
    systemd_exec_line,
    systemd_exec_start,
    systemd_exec_start_files,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stack_catalog, stack_extenders

# The files this project writes for a variant; files of other names are the user's and are never touched.
PROJECT_PATHS = (POLICY_PATH, CONFIG_PATH)
# Our drop-in; its name sorts late so that it rebuilds ExecStart after the other drop-ins.
DROPIN_NAME = "90-kube-gpu-nodes-scheduler-config.conf"
# The config flags the patch replaced (the user's own --config), restored when the extenders go.
REPLACED_ANNOTATION = "kube-gpu-nodes/scheduler-replaced-flags"
# Changed to make the kubelet recreate the static pod when the files are right but the process is older.
RESTART_ANNOTATION = "kube-gpu-nodes/restarted-at"
OUR_ANNOTATIONS = (CHECKSUM_ANNOTATION, REPLACED_ANNOTATION, RESTART_ANNOTATION)
DEFAULT_KUBECONFIG = {"kubeadm": "/etc/kubernetes/scheduler.conf",
                      "systemd": "/etc/kubernetes/kube-scheduler.kubeconfig"}
DEFAULT_HEALTH = {"scheme": "https", "port": 10259, "path": "/healthz"}
MANIFEST_MODE = "0600"  # kubeadm writes its static pod manifests 0600
PROXY_MODE_URL = "http://127.0.0.1:10249/proxyMode"
DROPIN_HEADER = (
    "# Ansible managed\n"
    "# kube-gpu-nodes: ExecStart rebuilt from {source}\n"
    "# with every original flag kept and {flag} set once. If the installer\n"
    "# re-renders the unit, run the kube_scheduler playbook again to rebuild this file from it.\n"
)

DEFAULTS = {
    "kubernetes_version": "",
    "style": "auto",
    "kubeadm_manifest": "/etc/kubernetes/manifests/kube-scheduler.yaml",
    "systemd_unit": "kube-scheduler.service",
    "kubeconfig": "",
    "stacks": [],
    "extra_extenders": [],
    "url_mode": "auto",
    "kube_proxy_mode": "detect",
    "node_ip": "",
    "cluster_ips": {},
    "urls": {},
    "tls": {},
    "backup_dir": "/etc/kubernetes/kgn-backups",
    "prevalidate": True,
    "allow_newer": False,
    "assume": {},
}
STYLES = ("auto", "kubeadm", "systemd")
PROXY_MODES = ("detect", "iptables", "ipvs", "nftables")
_IMAGE_TAG = re.compile(r":v?([0-9]+\.[0-9]+\.[0-9]+)[^:/]*$")
_BINARY_VERSION = re.compile(r"Kubernetes v?([0-9]+\.[0-9]+\.[0-9]+)")


# --------------------------------------------------------------------------------------------------------------
# Serialization: the same bytes on the controller (render) and on the node (apply), and the same bytes as
# Ansible's to_nice_yaml(indent=2, sort_keys=False) / to_nice_json(indent=2, sort_keys=False), which wrote
# these files before, so a node configured by an earlier version is not rewritten.


def _yaml():
    try:
        import yaml
    except ImportError:
        raise KgnError(
            "PyYAML is not installed for the Python that runs the module on this host; the scheduler's manifest "
            "and config are YAML. Install python3-yaml (Debian, Ubuntu) or python3-pyyaml (EL)"
        ) from None
    return yaml


def yaml_load(text: str, what: str) -> object:
    """Parse YAML (JSON is YAML) into plain data; KgnError naming ``what`` when it is not valid."""
    yaml = _yaml()
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    try:
        return to_plain(yaml.load(require_text(text, what), Loader=loader))
    except yaml.YAMLError as err:
        problem = " ".join(str(err).split())  # PyYAML's message spans lines
        raise KgnError(f"{what} is not valid YAML/JSON ({problem}); it was left as it is: fix it and run "
                       "again") from None
    except NotPlainError as err:
        raise KgnError(f"{what} holds {err}, which a scheduler file cannot hold; fix it and run again") from None


def yaml_dump(data: object) -> str:
    """Block-style YAML, keys in their order, two-space indent (to_nice_yaml(indent=2, sort_keys=False))."""
    yaml = _yaml()
    base = getattr(yaml, "CSafeDumper", None) or yaml.SafeDumper

    class Dumper(base):  # a list of pairs is never sorted, whatever the PyYAML version (sort_keys came in 5.1)
        pass

    Dumper.add_representer(dict, lambda dumper, value: dumper.represent_mapping("tag:yaml.org,2002:map",
                                                                                 list(value.items())))
    return yaml.dump(data, Dumper=Dumper, indent=2, allow_unicode=True, default_flow_style=False)


def config_text(document: dict, variant: dict) -> str:
    """The config file's text: JSON for a Policy, YAML for a KubeSchedulerConfiguration."""
    if variant["format"] == "policy":
        return json.dumps(document, indent=2, separators=(",", ": "))
    return yaml_dump(document)


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------------------------
# Health


def _host(address: str) -> str:
    if address in ("", "0.0.0.0"):
        return "127.0.0.1"
    if address == "::":
        return "[::1]"
    return f"[{address}]" if ":" in address else address


def scheduler_health_url(argv: object, variant: object = None) -> str:
    """The health endpoint a kube-scheduler started with ``argv`` serves.

    ``--bind-address``/``--secure-port`` of the command, else the variant's port and scheme (``variant``: a
    scheduler_variant result, a Kubernetes version, or None for the secure default 10259). A wildcard bind
    address is asked on the loopback address. With ``--secure-port=0`` a scheduler before 1.23 still serves
    the insecure port (``--port``, default 10251, unless 0); a later one serves no health endpoint at all.
    """
    if isinstance(variant, str):
        variant = scheduler_variant(variant)
    health = (variant or {}).get("health") or DEFAULT_HEALTH
    items = [str(a) for a in argv or []]
    port = scheduler_flag_value(items, "--secure-port") or str(health["port"])
    if port != "0":
        address = _host(scheduler_flag_value(items, "--bind-address") or "")
        return f"{health['scheme']}://{address}:{port}{health['path']}"
    minor = int(variant["kubernetes_minor"].split(".")[1]) if variant else 99
    insecure = scheduler_flag_value(items, "--port")
    if minor < 23 and insecure != "0":
        return f"http://{_host(scheduler_flag_value(items, '--address') or '')}:{insecure or 10251}{health['path']}"
    raise KgnError(
        "kube-scheduler runs with --secure-port=0 and no insecure port, so it serves no health endpoint and a "
        "change could not be checked; remove --secure-port=0 from its command"
    )


# --------------------------------------------------------------------------------------------------------------
# Inputs and what the node runs now


def _inputs(inputs: object) -> dict:
    if not isinstance(inputs, dict):
        raise KgnError("scheduler_plan: inputs must be a mapping of the kube_scheduler_extender settings")
    merged = {**DEFAULTS, **{k: v for k, v in inputs.items() if v is not None}}
    unknown = sorted(set(merged) - set(DEFAULTS))
    if unknown:
        raise KgnError(f"scheduler_plan: unknown input(s) {', '.join(unknown)}; accepted: {', '.join(DEFAULTS)}")
    if merged["style"] not in STYLES:
        raise KgnError(f"kube_scheduler_extender_style is {merged['style']!r}; choose one of {', '.join(STYLES)}")
    if merged["kube_proxy_mode"] not in PROXY_MODES:
        raise KgnError(f"kube_scheduler_extender_kube_proxy_mode is {merged['kube_proxy_mode']!r}; choose one of "
                       f"{', '.join(PROXY_MODES)}")
    require_bool(merged["allow_newer"], "kube_scheduler_extender_allow_newer (kubernetes_version_allow_newer)")
    if not isinstance(merged["extra_extenders"], list):
        raise KgnError("kube_scheduler_extender_extra_extenders must be a list of extenders in the neutral form")
    merged["kubernetes_version"] = str(merged["kubernetes_version"] or "").strip()
    manifests = posixpath.dirname(posixpath.normpath(merged["kubeadm_manifest"])) + "/"
    if (posixpath.normpath(merged["backup_dir"]) + "/").startswith(manifests):
        raise KgnError(
            f"kube_scheduler_extender_backup_dir ({merged['backup_dir']}) is inside {manifests.rstrip('/')}: the "
            "kubelet runs every file there as a pod, so a backup would start a second scheduler. Choose a folder "
            "outside it, e.g. /etc/kubernetes/kgn-backups"
        )
    return merged


def dropin_path(unit: str) -> str:
    return f"/etc/systemd/system/{unit}.d/{DROPIN_NAME}"


def _assumed_observation(inputs: dict, observed: dict, assumed: list) -> dict:
    """Nothing recorded about how kube-scheduler runs: the installers' own layouts (render only)."""
    if "manifest" in observed or "unit" in observed:
        return observed
    assume = inputs["assume"] or {}
    style = "kubeadm" if inputs["style"] == "auto" else inputs["style"]
    observed = dict(observed)
    if inputs["style"] == "auto":
        assumed.append("kube-scheduler runs as a kubeadm static pod (kube_scheduler_style is auto and no observation "
                       "is recorded; set kube_scheduler_style: systemd for binary installs such as kubeasz)")
    if style == "kubeadm":
        text = assume.get("kubeadm_manifest")
        if not text:
            if not inputs["kubernetes_version"]:
                raise KgnError("rendering the scheduler config needs kubernetes_version (quoted, e.g. \"1.23.1\"): "
                               "without contacting the host it cannot be detected")
            text = yaml_dump(kubeadm_scheduler_pod(inputs["kubernetes_version"]))
        observed["manifest"] = {"path": inputs["kubeadm_manifest"], "text": text, "mode": MANIFEST_MODE}
        assumed.append(f"{inputs['kubeadm_manifest']} is kubeadm's own manifest for this version (no observation "
                       "recorded)")
    else:
        argv = assume.get("systemd_exec_start")
        if not argv:
            raise KgnError("scheduler_plan: nothing is observed of this host and no ExecStart to assume was given "
                           "(assume.systemd_exec_start)")
        fragment = f"/etc/systemd/system/{inputs['systemd_unit']}"
        observed["unit"] = {
            "name": inputs["systemd_unit"], "load_state": "loaded", "fragment": fragment, "dropins": [],
            "texts": {fragment: f"[Service]\nExecStart={systemd_exec_line(argv)}\n"}, "assumed_source": "kubeasz",
        }
        assumed.append(f"{inputs['systemd_unit']} runs kubeasz's ExecStart (no observation recorded)")
    if "files" not in observed:
        assumed.append("the scheduler uses no config file of its own yet (nothing to merge)")
    if "exists" not in observed:
        assumed.append("the scheduler's kubeconfig exists")
    return observed


def _style(inputs: dict, observed: dict) -> "str | None":
    """kubeadm, systemd, or None (neither found with style auto)."""
    manifest = (observed.get("manifest") or {}).get("text")
    unit = observed.get("unit") or {}
    loaded = unit.get("load_state") == "loaded"
    if inputs["style"] == "kubeadm":
        if manifest is None:
            raise KgnError(
                f"kube_scheduler_extender_style is kubeadm, but this host has no static pod manifest "
                f"{inputs['kubeadm_manifest']}. Set kube_scheduler_extender_kubeadm_manifest to the scheduler's "
                "manifest, or the style to auto or systemd"
            )
        return "kubeadm"
    if inputs["style"] == "systemd":
        if not loaded:
            raise KgnError(
                f"kube_scheduler_extender_style is systemd, but the unit {inputs['systemd_unit']} is not loaded on "
                f"this host (LoadState {unit.get('load_state') or 'unknown'}). Set "
                "kube_scheduler_extender_systemd_unit to the service that runs kube-scheduler, or the style to auto "
                "or kubeadm"
            )
        return "systemd"
    if manifest is not None:
        return "kubeadm"
    return "systemd" if loaded else None


def _no_style_error(inputs: dict) -> KgnError:
    return KgnError(
        f"kube_scheduler_style is auto, but this host has neither the kubeadm manifest {inputs['kubeadm_manifest']} "
        f"nor a loaded systemd unit {inputs['systemd_unit']}. Set kube_scheduler_extender_kubeadm_manifest or "
        "kube_scheduler_extender_systemd_unit to where kube-scheduler runs, or remove the host from kube_control_plane"
    )


def _container(pod: dict) -> dict:
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        raise KgnError("the kube-scheduler static pod manifest has no containers")
    return next((c for c in containers if c.get("name") == "kube-scheduler"), containers[0])


def _pod_argv(pod: dict) -> list:
    container = _container(pod)
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def _annotations(pod: dict) -> dict:
    return dict((pod.get("metadata") or {}).get("annotations") or {})


def _current(style: str, inputs: dict, observed: dict) -> dict:
    """What runs now: the argv, and for the patch its source (pod, or the unit without our drop-in)."""
    if style == "kubeadm":
        manifest = observed["manifest"]
        pod = yaml_load(manifest["text"], f"the static pod manifest {inputs['kubeadm_manifest']}")
        if not isinstance(pod, dict) or pod.get("kind") != "Pod":
            raise KgnError(f"the kube-scheduler static pod manifest {inputs['kubeadm_manifest']} is not a Pod (kind: "
                           "Pod); check kube_scheduler_extender_kubeadm_manifest")
        container = _container(pod)
        return {"pod": pod, "argv": _pod_argv(pod), "image": str(container.get("image") or ""),
                "mode": manifest.get("mode") or MANIFEST_MODE, "text": manifest["text"]}
    unit = observed["unit"]
    ours = dropin_path(inputs["systemd_unit"])
    paths = [unit.get("fragment"), *sorted(unit.get("dropins") or [], key=posixpath.basename)]
    paths = [p for p in paths if p]
    texts = unit.get("texts") or {}
    theirs = [p for p in paths if posixpath.basename(p) != DROPIN_NAME]
    # drop-ins that sort after ours and set ExecStart: systemd runs their command, not ours
    later = [p for p in theirs if p != unit.get("fragment") and posixpath.basename(p) > DROPIN_NAME]
    if unit.get("assumed_source"):
        source = f"{inputs['systemd_unit']} as {unit['assumed_source']} renders it"
    else:
        source = " + ".join(theirs)
    return {
        "argv": systemd_exec_start([texts.get(p) or "" for p in paths]),
        "original_argv": systemd_exec_start([texts.get(p) or "" for p in theirs]),
        "source": source,
        "unit_files": theirs,
        "shadowing": systemd_exec_start_files([(p, texts.get(p) or "") for p in later]),
        "texts": texts,
        "dropin": ours,
        "dropin_text": next((texts.get(p) for p in paths if posixpath.basename(p) == DROPIN_NAME), None),
    }


def _config_path(argv: list) -> str:
    return scheduler_flag_value(argv, "--config") or scheduler_flag_value(argv, "--policy-config-file") or ""


def _kubeconfig(style: str, inputs: dict, current: dict) -> str:
    if inputs["kubeconfig"]:
        return inputs["kubeconfig"]
    if style == "systemd":
        return scheduler_flag_value(current["argv"], "--kubeconfig") or DEFAULT_KUBECONFIG[style]
    return DEFAULT_KUBECONFIG[style]


def _version_argv(style: str, current: dict) -> list:
    return [current["argv"][0] if style == "systemd" else "kube-scheduler", "--version"]


def scheduler_reads(inputs: object, observed: object) -> dict:
    """What the module reads after the manifest and the unit (the same decisions as the plan, so it reads
    exactly what the plan uses): ``{files, exists, version_argv, kube_proxy}``."""
    inputs = _inputs(inputs)
    observed = observed or {}
    reads = {"files": list(PROJECT_PATHS), "exists": [], "version_argv": None,
             "kube_proxy": inputs["url_mode"] == "auto" and inputs["kube_proxy_mode"] == "detect"}
    try:
        style = _style(inputs, observed)
        current = _current(style, inputs, observed) if style else None
    except KgnError:
        return reads  # the plan says what is wrong
    if current is None:
        return reads
    path = _config_path(current["argv"])
    if path and path not in reads["files"]:
        reads["files"].append(path)
    reads["exists"] = [_kubeconfig(style, inputs, current)]
    if not inputs["kubernetes_version"] and not (style == "kubeadm" and _IMAGE_TAG.search(current["image"])):
        reads["version_argv"] = _version_argv(style, current)
    return reads


def _version(style: str, inputs: dict, observed: dict, current: dict, rendering: bool) -> "tuple[str, str]":
    """(version, where it came from), or KgnError."""
    if inputs["kubernetes_version"]:
        return inputs["kubernetes_version"], "kubernetes_version"
    if style == "kubeadm":
        match = _IMAGE_TAG.search(current["image"])
        if match:
            return match.group(1), f"the image tag of {inputs['kubeadm_manifest']}"
    probe = observed.get("version") or {}
    match = _BINARY_VERSION.search(probe.get("output") or "")
    if match:
        return match.group(1), f"`{' '.join(probe.get('argv') or ['kube-scheduler', '--version'])}`"
    if rendering:
        raise KgnError("rendering the scheduler config needs kubernetes_version (quoted, e.g. \"1.23.1\"): without "
                       "contacting the host it cannot be detected")
    said = (probe.get("output") or "").strip()[:200] or ("nothing (not installed)" if probe.get("rc") is None
                                                          else f"exit code {probe.get('rc')}")
    where = f"no image tag in {inputs['kubeadm_manifest']} and " if style == "kubeadm" else ""
    raise KgnError(
        f"kubernetes_version is not set and could not be detected on this host: {where}"
        f"`{' '.join(probe.get('argv') or _version_argv(style, current))}` gave {said}. Set kubernetes_version "
        "(quoted, e.g. \"1.23.1\") in the inventory"
    )


# --------------------------------------------------------------------------------------------------------------
# Extenders


def _extenders(inputs: dict, observed: dict, assumed: list, rendering: bool) -> "tuple[dict, list]":
    stacks = inputs["stacks"]
    if inputs["kube_proxy_mode"] != "detect":
        proxy = inputs["kube_proxy_mode"]
    else:
        proxy = (observed.get("kube_proxy_mode") or "").strip() or "unknown"
    catalog = stack_catalog(stacks)
    needs_url = [s for s in catalog if catalog[s]["extender"] and s not in (inputs["urls"] or {})]
    address = inputs["node_ip"] or observed.get("default_address") or next(iter(observed.get("addresses") or []), "")
    if not address and rendering and "addresses" not in observed:
        address = (inputs["assume"] or {}).get("address") or ""
        if address and needs_url and inputs["url_mode"] in ("auto", "node_ip"):
            assumed.append(f"the node IP is {address} (the inventory's address of the host; set "
                           "kube_scheduler_extender_node_ip to be sure)")
    if (needs_url and inputs["url_mode"] == "auto" and inputs["kube_proxy_mode"] == "detect"
            and "kube_proxy_mode" not in observed):
        assumed.append("kube-proxy's mode is unknown, so url mode auto uses the node IP with the NodePort")
    urls = scheduler_extender_urls(stacks, catalog, inputs["url_mode"], address, inputs["cluster_ips"],
                                   inputs["urls"], proxy)
    extenders = stack_extenders(stacks, urls, inputs["tls"]) + list(inputs["extra_extenders"])
    return urls, extenders


def _gpu_resources() -> dict:
    """Every GPU resource a stack of the catalog advertises or has its extender manage -> the stack's name."""
    found = {}
    for name, entry in stack_catalog().items():
        extender = entry["extender"] or {}
        for resource in [*entry["resources"], *(r["name"] for r in extender.get("managed_resources") or [])]:
            found.setdefault(resource, name)
    return found


def _stack_extenders_to_replace(existing: object, existing_path: str, extenders: list) -> list:
    """The GPU resources whose extenders in the scheduler's current config this run replaces. Raises KgnError for a
    GPU-sharing extender this project did not write and is not asked to manage (another tool's, or one configured
    by hand): two GPU schedulers would hand out the same GPUs."""
    gpu = _gpu_resources()
    if not isinstance(existing, dict):
        return sorted(gpu)
    try:
        found = existing_extenders(existing, classify(existing))
    except KgnError:
        return sorted(gpu)  # scheduler_config names what is wrong with the file
    chosen = {r["name"] for e in extenders for r in e.get("managed_resources") or []}
    ours = existing_path in PROJECT_PATHS
    for extender in found:
        names = managed_names(extender) & set(gpu)
        if not names or ours or managed_names(extender) <= chosen:
            continue  # not a GPU scheduler; ours from an earlier run; or the stack this run now manages
        stacks = sorted({gpu[n] for n in names})
        raise KgnError(
            f"kube-scheduler's config {existing_path} already has the extender {extender.get('urlPrefix')} for "
            f"{', '.join(sorted(managed_names(extender)))} (the {' / '.join(stacks)} stack's resources), which "
            f"kube-gpu-nodes did not configure; two GPU schedulers would hand out the same GPUs. Choose one: add "
            f"{' or '.join(stacks)} to gpu_sharing_stacks so that this project manages that extender (it replaces the "
            f"entry), remove the entry from {existing_path} and run again, or leave the stacks that need an extender "
            f"out of gpu_sharing_stacks (the scheduler is then left alone)")
    return sorted(gpu)


# --------------------------------------------------------------------------------------------------------------
# Patch and unpatch


def _config_flag_args(argv: list) -> list:
    """Config flags of an argv as ``--flag=value`` (both spellings read)."""
    found = []
    for flag in CONFIG_FLAGS:
        value = scheduler_flag_value(argv, flag)
        if value is not None:
            found.append(f"{flag}={value}")
    return found


def _drop_project_flags(argv: list) -> list:
    """argv without the config flags that point at this project's files (both spellings)."""
    out, skip = [], False
    for index, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        name, _, value = arg.partition("=")
        if name in CONFIG_FLAGS:
            if "=" not in arg and index + 1 < len(argv) and argv[index + 1] in PROJECT_PATHS:
                skip = True
                continue
            if value in PROJECT_PATHS:
                continue
        out.append(arg)
    return out


def _patched_pod(current: dict, variant: dict, text: str) -> dict:
    pod = current["pod"]
    annotations = _annotations(pod)
    try:
        replaced = json.loads(annotations.get(REPLACED_ANNOTATION) or "[]")
    except ValueError:
        replaced = []
    replaced = [str(r) for r in replaced if isinstance(r, str)]
    for arg in _config_flag_args(current["argv"]):
        if arg.split("=", 1)[1] not in PROJECT_PATHS and arg not in replaced:
            replaced.append(arg)
    new = scheduler_static_pod(pod, variant["flag"], variant["path"], variant["removed_flags"], config_hash(text))
    if replaced:
        new["metadata"]["annotations"][REPLACED_ANNOTATION] = json.dumps(replaced)
    return new


def _unpatched_pod(pod: dict) -> dict:
    """The manifest as the installer wrote it, as far as the current one tells: our flag, volume, mount and
    annotations removed, the config flags the patch replaced put back."""
    pod = copy.deepcopy(pod)
    annotations = _annotations(pod)
    try:
        replaced = [str(r) for r in json.loads(annotations.get(REPLACED_ANNOTATION) or "[]")]
    except ValueError:
        replaced = []
    container = _container(pod)
    command = _drop_project_flags([str(a) for a in container.get("command") or []])
    command += [r for r in replaced if r not in command]
    container["command"] = command
    if container.get("args"):
        container["args"] = _drop_project_flags([str(a) for a in container["args"]])
    if "volumeMounts" in container:
        container["volumeMounts"] = [m for m in container["volumeMounts"] or [] if m.get("name") != VOLUME_NAME]
    spec = pod.get("spec") or {}
    if "volumes" in spec:
        spec["volumes"] = [v for v in spec["volumes"] or [] if v.get("name") != VOLUME_NAME]
    metadata = pod.get("metadata") or {}
    if "annotations" in metadata:
        kept = {k: v for k, v in annotations.items() if k not in OUR_ANNOTATIONS}
        if kept:
            metadata["annotations"] = kept
        else:
            del metadata["annotations"]
    return pod


def _on_our_config(style: str, current: dict) -> bool:
    if _config_path(current["argv"]) in PROJECT_PATHS or any(a.split("=", 1)[-1] in PROJECT_PATHS
                                                              for a in _config_flag_args(current["argv"])):
        return True
    if style == "systemd":
        return current["dropin_text"] is not None
    pod = current["pod"]
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return any(v.get("name") == VOLUME_NAME for v in volumes) or CHECKSUM_ANNOTATION in _annotations(pod)


def _shadowed(inputs: dict, current: dict, variant: dict) -> KgnError:
    """The refusal when a drop-in that sorts after ours sets ExecStart: systemd would run its command, never ours.
    This project does not take the last word over a later drop-in (docs/scheduler-versions.md, "A drop-in after
    ours"); the admin chooses."""
    last = current["shadowing"][-1]
    try:
        runs = " ".join(systemd_exec_start([current["texts"].get(last) or ""]))
    except KgnError:
        runs = "no command (it only resets ExecStart=)"
    name = posixpath.basename(last)
    flag = f"{variant['flag']}={variant['path']}"
    return KgnError(
        f"{last} sets ExecStart= and sorts after this project's drop-in {DROPIN_NAME}, so systemd runs its command "
        f"({runs}){'' if flag in runs else f', without {flag}'}: kube-scheduler would not read the extenders' config. "
        f"This project does not override a later drop-in. Choose one: move the flags you need into "
        f"{current['unit_files'][0]} or into a drop-in that sorts before {DROPIN_NAME} (for example rename it to "
        f"50-{name.split('-', 1)[-1] if name[:2].isdigit() else name}): every flag there is kept in the ExecStart "
        f"this project writes; or remove the ExecStart lines from {last} (its other settings stay); or leave this "
        f"scheduler alone by taking the stacks that need an extender out of gpu_sharing_stacks"
    )


def dropin_text(argv: list, source: str, flag: str) -> str:
    return (DROPIN_HEADER.format(source=source, flag=flag)
            + f"[Service]\nExecStart=\nExecStart={systemd_exec_line(argv)}\n")


def restart_manifest(plan: dict, stamp: str) -> dict:
    """The planned static pod manifest with the restart annotation set to ``stamp``: a new manifest, so the
    kubelet recreates the pod, which then reads the files on disk (kubeadm style only)."""
    entry = next(f for f in plan["files"] if f["path"] == plan["manifest"])
    pod = yaml_load(entry["content"], plan["manifest"])
    metadata = pod.setdefault("metadata", {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[RESTART_ANNOTATION] = str(stamp)
    metadata["annotations"] = annotations
    return {**entry, "content": yaml_dump(pod)}


# --------------------------------------------------------------------------------------------------------------
# The section


def scheduler_plan(inputs: object, observed: object) -> dict:
    """The kube-scheduler section of the host plan.

    Returns ``{action, left_alone, reason, style, version, version_source, variant, newer_than_known, version_note,
    kubeconfig, config, current_argv, argv, health_url, extender_urls, extenders, files, remove, manifest, unit,
    dropin, watch, prevalidate, assumed}``. ``newer_than_known``/``version_note``: the cluster runs a minor newer
    than the newest known one and gets that one's variant (``allow_newer``); the run and the report say the note.
    ``action`` is ``configure`` (the extenders are wanted), ``remove`` (none is wanted and the scheduler runs on
    this project's config: back to the installer's command) or ``leave`` (none is wanted and the scheduler does not
    run on this project's config: nothing changes). ``files`` are ``{path, content, mode}`` in the order they are
    written (the config before the manifest that mounts it); ``remove`` are ``{path, content: None}``, removed after.
    ``watch`` are the files the running scheduler must have been started after.
    """
    inputs = _inputs(inputs)
    if observed is not None and not isinstance(observed, dict):
        raise KgnError("scheduler_plan: observed must be a mapping of what the node shows")
    observed = dict(observed or {})
    assumed: list = []
    rendering = "manifest" not in observed and "unit" not in observed
    observed = _assumed_observation(inputs, observed, assumed) if rendering else observed
    urls, extenders = _extenders(inputs, observed, assumed, rendering)
    style = _style(inputs, observed)
    plan = {
        "action": "leave", "left_alone": True, "reason": "", "style": style, "version": None,
        "version_source": "", "variant": None, "newer_than_known": False, "version_note": "",
        "kubeconfig": None, "config": None, "current_argv": [],
        "argv": [], "health_url": None, "extender_urls": urls, "extenders": extenders, "files": [], "remove": [],
        "manifest": inputs["kubeadm_manifest"] if style == "kubeadm" else None,
        "unit": inputs["systemd_unit"] if style == "systemd" else None,
        "dropin": dropin_path(inputs["systemd_unit"]) if style == "systemd" else None,
        "watch": [], "prevalidate": None, "assumed": assumed,
    }
    if style is None:
        if extenders:
            raise _no_style_error(inputs)
        plan["reason"] = ("left alone: no extender needed (no chosen stack needs one and "
                          "kube_scheduler_extender_extra_extenders is empty), and no kube-scheduler was found here")
        return plan
    current = _current(style, inputs, observed)
    plan["current_argv"] = current["argv"]
    files = observed.get("files") or {}
    try:
        version, source = _version(style, inputs, observed, current, rendering)
        variant = scheduler_variant(version, inputs["allow_newer"])
    except KgnError:
        if extenders:
            raise
        version, source, variant = None, "", None
    plan.update(version=version, version_source=source, variant=variant,
                newer_than_known=bool(variant and variant["newer_than_known"]),
                version_note=(variant or {}).get("note") or "")
    unit_files = [inputs["kubeadm_manifest"]] if style == "kubeadm" else current["unit_files"]
    if not extenders:
        return _without_extenders(plan, style, inputs, current, files, variant, unit_files)
    return _with_extenders(plan, style, inputs, observed, current, files, version, variant, extenders, unit_files)


def _without_extenders(plan: dict, style: str, inputs: dict, current: dict, files: dict, variant: "dict | None",
                       unit_files: list) -> dict:
    """No extender wanted: left alone, or (on this project's config) back to the installer's own command."""
    if not _on_our_config(style, current):
        current_config = _config_path(current["argv"])
        plan.update(argv=current["argv"], health_url=scheduler_health_url(current["argv"], variant),
                    watch=[p for p in [current_config] if p] + unit_files,
                    reason="left alone: no extender needed (no chosen stack needs one and "
                           "kube_scheduler_extender_extra_extenders is empty), and kube-scheduler does not run "
                           "on this project's config")
        return plan
    # back to the installer's own command
    if style == "kubeadm":
        pod = _unpatched_pod(current["pod"])
        argv = _pod_argv(pod)
        plan["files"] = [{"path": inputs["kubeadm_manifest"], "content": yaml_dump(pod), "mode": current["mode"]}]
    else:
        argv = current["original_argv"]
        if current["dropin_text"] is not None:
            plan["remove"].append({"path": current["dropin"], "content": None})
    still = _config_flag_args(argv)
    plan["remove"] += [{"path": p, "content": None} for p in PROJECT_PATHS
                       if files.get(p) is not None and not any(a.endswith("=" + p) for a in still)]
    plan.update(action="remove", left_alone=False, argv=argv, health_url=scheduler_health_url(argv, variant),
                watch=[a.split("=", 1)[1] for a in still] + unit_files,
                reason="no extender needed: kube-scheduler goes back to the installer's own command, and this "
                       "project's config file is removed (a copy stays in the backup folder)")
    return plan


def _with_extenders(plan: dict, style: str, inputs: dict, observed: dict, current: dict, files: dict, version: str,
                    variant: dict, extenders: list, unit_files: list) -> dict:
    """Extenders wanted: the config document and the patch of the static pod or the unit's drop-in."""
    kubeconfig = _kubeconfig(style, inputs, current)
    exists = observed.get("exists") or {}
    if kubeconfig in exists and not exists[kubeconfig]:
        raise KgnError(
            f"The scheduler kubeconfig {kubeconfig} does not exist on this host; kube-scheduler would not start "
            "with a config that names it. Set kube_scheduler_extender_kubeconfig to the kubeconfig the scheduler uses"
        )
    existing_path = _config_path(current["argv"])
    existing_text = files.get(existing_path) if existing_path else None
    existing = yaml_load(existing_text, f"the scheduler's current config {existing_path}") if existing_text else None
    replaced = _stack_extenders_to_replace(existing, existing_path, extenders)
    document = scheduler_config(version, extenders, kubeconfig, existing or None, replace_resources=replaced,
                                allow_newer=inputs["allow_newer"])
    text = config_text(document, variant)
    config = {"path": variant["path"], "content": text, "mode": "0644"}
    if style == "kubeadm":
        pod = _patched_pod(current, variant, text)
        argv = _pod_argv(pod)
        patch = {"path": inputs["kubeadm_manifest"], "content": yaml_dump(pod), "mode": current["mode"]}
        watch = [variant["path"], inputs["kubeadm_manifest"]]
    else:
        if current["shadowing"]:
            raise _shadowed(inputs, current, variant)
        argv = scheduler_args(current["original_argv"], variant["flag"], variant["path"], variant["removed_flags"])
        patch = {"path": current["dropin"], "content": dropin_text(argv, current["source"], variant["flag"]),
                 "mode": "0644"}
        watch = [variant["path"], *unit_files, current["dropin"]]
        if inputs["prevalidate"] and variant["format"] == "kube_scheduler_configuration":
            # in a network namespace of its own: before it writes the config out, kube-scheduler binds its ports
            # (10259; 10251 too up to 1.23, from the config's healthz/metrics addresses), which the running
            # scheduler holds (kube-scheduler's runCommand, --write-config-to: tried on 1.22.3 and 1.36.3)
            plan["prevalidate"] = ["unshare", "--net", argv[0], "--config=%s", "--write-config-to=%s.out"]
    plan.update(
        action="configure", left_alone=False, kubeconfig=kubeconfig,
        config={"path": variant["path"], "text": text, "existing_path": existing_path},
        argv=argv, health_url=scheduler_health_url(argv, variant), files=[config, patch], watch=watch,
        remove=[{"path": p, "content": None} for p in PROJECT_PATHS
                if p != variant["path"] and files.get(p) is not None],
        reason=f"{len(extenders)} extender(s) in {variant['kind']} {variant['api_version']} ({variant['flag']}="
               f"{variant['path']})",
    )
    return plan
