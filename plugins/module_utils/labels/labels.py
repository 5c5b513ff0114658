"""GPU node labels: what a node should carry, and the patch that gets it there safely.

Functions (the labels_plan's parts; kubelet_node_labels is also a filter):
  node_labels          desired labels from gpu_facts (the gpu_facts module result) + the node's stacks
  node_gpu_problems    what the node's GPUs cannot do for the chosen stacks (MPS on pre-Volta ...)
  node_label_patch     merge patch from desired + current labels/annotations: removes only labels
                           this project set before (recorded in an annotation), never anyone else's
  kubelet_node_labels  the same labels as a kubelet --node-labels value, for nodes not joined yet

Section of the host plan (plan.SECTIONS "node_labels"):
  labels_plan          every node an API server serves: its desired labels, the patch, or why not

GPU tables are not repeated here: product -> architecture, accelerator value and the GPU Feature
Discovery labels come from nvidia.py (the driver engineer's filters), stack selectors from the
stack catalog in stacks.py.
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import nvidia
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plain import require_bool
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks as stack_catalog

MANAGED_ANNOTATION = "kube-gpu-nodes.io/managed-labels"
VOLTA_MPS_LABEL = "kube-gpu-nodes.io/gpu.volta-mps"
# How GPUs reach the node's containers, as the container_runtime module decided (runtime.runtime_mode): cdi | legacy.
RUNTIME_MODE_LABEL = "kube-gpu-nodes.io/runtime-mode"
# The kernel module flavour the node's loaded driver runs (open or proprietary), as /proc/driver/nvidia/version
# or modinfo says it (gpu_facts kernel_module.flavour); absent when the node does not say.
DRIVER_FLAVOUR_LABEL = "kube-gpu-nodes.io/driver.kernel-module"
SHARING_MODES = ("none", "time-slicing", "mps")
# Label key: optional DNS prefix + "/" + name (<= 63, alphanumeric ends); value <= 63, may be empty.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY_RE = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")


def _facts(gpu_facts, name):
    if not isinstance(gpu_facts, dict) or "gpus" not in gpu_facts:
        raise KgnError(
            f"{name}: input must be the result of the gpu_facts module (a dict with 'gpu_present' and 'gpus'), "
            f"got {type(gpu_facts).__name__}; run the nvidia_driver role (or gpu_facts) on the node first"
        )
    gpus = gpu_facts.get("gpus") or []
    if not isinstance(gpus, list):
        raise KgnError(f"{name}: gpu_facts.gpus must be a list, got {type(gpus).__name__}")
    return gpus


def _gpu_infos(gpus):
    return [nvidia.nvidia_gpu_info(str(g.get("product_name") or ""), strict=False)
            if g.get("product_name") else None for g in gpus]


def _mig_enabled(gpu):
    return str(gpu.get("mig_mode_current") or gpu.get("mig_mode") or "").lower() == "enabled"


def _volta_mps(gpus, infos):
    """True when every GPU supports Volta MPS (compute capability >= 7.0) [MPS-DOC]."""
    if not gpus:
        return False
    for gpu, info in zip(gpus, infos):
        cc = gpu.get("compute_capability") or (info or {}).get("compute_capability")
        if not cc:
            return False
        major, minor = (int(p) for p in str(cc).split(".", 1))
        if (major, minor) < (7, 0):
            return False
    return True


def node_labels(gpu_facts, stacks=None, sharing="none", require_gpu=True):
    """Labels a GPU node should carry, as a dict of strings.

    From the GPU facts: the GPU Feature Discovery labels of nvidia_gfd_labels (present, product,
    memory, count, compute capability, family, MIG capable, driver/CUDA versions), the reference clusters'
    ``accelerator=nvidia-tesla-t4`` model label, ``kube-gpu-nodes.io/gpu.volta-mps`` and the loaded driver's
    kernel module flavour ``kube-gpu-nodes.io/driver.kernel-module`` (open or proprietary, as the node says). From the
    stacks: each stack's selector labels (gpushare=true, gpu-node=true, ...). ``sharing`` is the
    NVIDIA device plugin sharing mode (none, time-slicing, mps), published as GFD does with
    nvidia.com/gpu.sharing-strategy and nvidia.com/mps.capable. A node without a GPU gets only
    nvidia.com/gpu.present=false unless ``require_gpu`` is false.
    """
    name = "node_labels"
    gpus = _facts(gpu_facts, name)
    names = stack_catalog._stack_list(stacks)
    if sharing not in SHARING_MODES:
        raise KgnError(f"{name}: sharing is {sharing!r}; accepted: {', '.join(SHARING_MODES)}")
    labels = dict(nvidia.nvidia_gfd_labels(gpu_facts))
    if not gpus and require_gpu:
        return labels
    if gpus:
        infos = _gpu_infos(gpus)
        labels["accelerator"] = nvidia.nvidia_accelerator_label(str(gpus[0].get("product_name") or "unknown"))
        labels[VOLTA_MPS_LABEL] = "true" if _volta_mps(gpus, infos) else "false"
    flavour = str(((gpu_facts or {}).get("kernel_module") or {}).get("flavour") or "")
    if flavour in ("open", "proprietary"):
        labels[DRIVER_FLAVOUR_LABEL] = flavour
    for stack in names:
        labels.update(stack_catalog._CATALOG[stack]["node_labels"])
    if "nvidia_device_plugin" in names:
        labels["nvidia.com/gpu.sharing-strategy"] = sharing
        # GFD semantics: mps.capable is true only when MPS sharing is configured [GFD-README-0.17];
        # the device plugin's MPS control daemon selects on it.
        labels["nvidia.com/mps.capable"] = "true" if sharing == "mps" else "false"
    return labels


def node_gpu_problems(gpu_facts, stacks=None, sharing="none", gpushare_mps=False):
    """What this node's GPUs cannot do for its stacks, as messages (empty = fine)."""
    name = "node_gpu_problems"
    gpus = _facts(gpu_facts, name)
    names = stack_catalog._stack_list(stacks)
    infos = _gpu_infos(gpus)
    products = ", ".join(sorted({str(g.get("product_name")) for g in gpus})) or "no GPU"
    problems = []
    volta = _volta_mps(gpus, infos)
    if gpushare_mps and "gpushare" in names and not volta:
        problems.append(
            f"gpushare_mps is true but this node's GPUs ({products}) do not support Volta MPS (compute capability "
            f">= 7.0 needed); set gpu_sharing_stacks_gpushare_mps: false for this node"
        )
    if sharing == "mps" and "nvidia_device_plugin" in names:
        if not volta:
            problems.append(
                f"device plugin MPS sharing needs Volta or newer GPUs; this node has {products}; use time-slicing"
            )
        if any(_mig_enabled(g) for g in gpus):
            problems.append(
                "device plugin MPS sharing is not supported on MIG-enabled GPUs [DP-README-0.17]; disable MIG on "
                "this node or use time-slicing"
            )
    return problems


# Kubernetes reserves these prefixes for its core components ("Labels and Selectors", kubernetes.io docs);
# node-role.kubernetes.io/ is the documented exception that cluster admins set themselves. kube-gpu-nodes.io/
# holds this project's own bookkeeping (the managed-labels annotation, the Volta MPS label).
_RESERVED_PREFIXES = ("kubernetes.io/", "k8s.io/", "kube-gpu-nodes.io/")
_RESERVED_SUFFIXES = (".kubernetes.io/", ".k8s.io/")
_ALLOWED_RESERVED = ("node-role.kubernetes.io/",)


def label_problems(labels, what):
    """Every key and value of ``labels`` that the API server would refuse, one message each (empty = fine)."""
    if not isinstance(labels, dict):
        return [f"{what} must be a dict of label key -> string value, got {type(labels).__name__}"]
    problems = []
    for key, value in labels.items():
        if not isinstance(key, str) or not _KEY_RE.match(key):
            problems.append(f"{what}: {key!r} is not a valid Kubernetes label key (an optional DNS prefix and '/', "
                            f"then at most 63 characters: letters, digits, '-', '_', '.', alphanumeric at both ends)")
        elif value is not None and (not isinstance(value, str) or not _VALUE_RE.match(value)):
            problems.append(
                f"{what}: value {value!r} of {key!r} is not a valid label value (a string of at most 63 characters: "
                f"letters, digits, '-', '_', '.', alphanumeric at both ends; quote true/false/numbers in YAML)"
            )
    return problems


def _check_labels(labels, what):
    problems = label_problems(labels, what)
    if problems:
        raise KgnError(problems[0])


# Keys this project writes itself: GPU Feature Discovery's names (nvidia.com/gpu.*, cuda.*, mig.*, mps.*), the
# model label, and each stack's selector labels. An extra label with one of them would be overwritten by the next
# run, or would put a stack's pods on a node the inventory did not give that stack.
_OWN_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig.", "nvidia.com/mps.")


def _own_key(key):
    selectors = {k for entry in stack_catalog._CATALOG.values() for k in (entry.get("node_labels") or {})}
    return key.startswith(_OWN_PREFIXES) or key == "accelerator" or key in selectors


def extra_label_problems(extra, what="gpu_node_labels_extra"):
    """What is wrong with the extra labels an inventory asks for: invalid keys or values, and keys under a
    prefix Kubernetes or this project reserves (checked in the first play, before any host is touched)."""
    problems = label_problems(extra, what)
    if problems or not isinstance(extra, dict):
        return problems
    for key in extra:
        prefix = key.split("/", 1)[0] + "/" if "/" in key else ""
        if prefix and not prefix.startswith(_ALLOWED_RESERVED) and (
                prefix in _RESERVED_PREFIXES or prefix.endswith(_RESERVED_SUFFIXES)):
            owner = "this project's own bookkeeping" if prefix == "kube-gpu-nodes.io/" else "Kubernetes core components"
            problems.append(f"{what}: {key!r} uses the prefix {prefix}, which is reserved for {owner}; "
                            f"choose a prefix of your own (e.g. example.com/{key.split('/', 1)[1]})")
        elif _own_key(key):
            problems.append(f"{what}: {key!r} is a label this project sets itself (from the node's GPUs or its "
                            "stacks); leave it out: the run sets it and verify checks it")
    return problems


def node_label_patch(desired, current_labels=None, current_annotations=None, overwrite_foreign=False):
    """Merge patch that moves a node from its current labels to ``desired``, touching only ours.

    The labels this project wrote are recorded in the annotation kube-gpu-nodes.io/managed-labels
    (comma-separated keys). A label is removed only when it is recorded there and no longer desired.
    A desired label that exists with another value and was not written by this project is left
    alone and reported in ``foreign`` unless ``overwrite_foreign``; one that already has the desired
    value is left unrecorded, so disabling the stack later does not remove someone else's label.
    """
    _check_labels(desired, "desired labels")
    current = current_labels or {}
    annotations = current_annotations or {}
    _check_labels(current, "current node labels")
    if not isinstance(annotations, dict):
        raise KgnError(f"current annotations must be a dict, got {type(annotations).__name__}")
    recorded = annotations.get(MANAGED_ANNOTATION) or ""
    previous = {k for k in str(recorded).split(",") if k}
    label_patch = {}
    managed = set()
    foreign = []
    for key, value in sorted(desired.items()):
        if current.get(key) == value:
            if key in previous:
                managed.add(key)
            continue
        if key in current and key not in previous and not overwrite_foreign:
            foreign.append(key)
            continue
        label_patch[key] = value
        managed.add(key)
    removed = sorted(k for k in previous - set(desired) if k in current)
    for key in removed:
        label_patch[key] = None
    new_record = ",".join(sorted(managed))
    metadata = {}
    if label_patch:
        metadata["labels"] = label_patch
    if new_record != recorded:
        metadata["annotations"] = {MANAGED_ANNOTATION: new_record or None}
    return {
        "patch": {"metadata": metadata} if metadata else {},
        "changed": bool(metadata),
        "set": {k: v for k, v in label_patch.items() if v is not None},
        "removed": removed,
        "foreign": foreign,
        "managed": sorted(managed),
    }


def kubelet_node_labels(labels):
    """``labels`` as the value of kubelet --node-labels (``k=v,k2=v2``, sorted)."""
    _check_labels(labels, "labels")
    restricted = [k for k in labels if re.match(r"^([^/]*\.)?(kubernetes\.io|k8s\.io)/", k)
                  and not k.startswith(("kubelet.kubernetes.io/", "node.kubernetes.io/"))]
    if restricted:
        raise KgnError(
            f"kubelet may not set labels in the kubernetes.io / k8s.io namespaces ({', '.join(restricted)}); "
            f"set them through the API instead"
        )
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))



# Labels derived from the GPU facts (GPU Feature Discovery style, the model label, Volta MPS), as opposed
# to the stacks' selector labels; with unknown GPU facts these are neither set nor removed.
_GPU_LABELS = ("accelerator", VOLTA_MPS_LABEL, DRIVER_FLAVOUR_LABEL, "nvidia.com/mig.capable")
_GPU_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.")
_SHARING_LABELS = ("nvidia.com/gpu.sharing-strategy", "nvidia.com/mps.capable")
NODE_DEFAULTS = {
    "node_name": None,  # the inventory name
    "gpu_facts": {},
    "stacks": [],
    "sharing": "none",
    "gpushare_mps": False,
    "require_gpu": True,
    "extra": {},
    "overwrite_foreign": False,
    "runtime_mode": "",  # "" = not known (the runtime play did not run): no label set or removed
}
# What happens to a node: a patch is sent, nothing to send, or why nothing could be sent.
STATUSES = ("patch", "unchanged", "render", "not registered", "api unreachable", "refused")


def _stack_label_keys():
    keys = set(_SHARING_LABELS)
    for entry in stack_catalog.stack_catalog().values():
        keys.update(entry["node_labels"])
    return keys


def _gpu_derived(key):
    return (key in _GPU_LABELS or key.startswith(_GPU_LABEL_PREFIXES)) and key not in _stack_label_keys()


def _node_settings(host, settings):
    if not isinstance(settings, dict):
        raise KgnError(f"{host}: the node's settings must be a mapping, got {type(settings).__name__}")
    unknown = sorted(set(settings) - set(NODE_DEFAULTS))
    if unknown:
        raise KgnError(f"{host}: unknown node setting(s) {', '.join(unknown)}; accepted: {', '.join(NODE_DEFAULTS)}")
    merged = {**NODE_DEFAULTS, **{k: v for k, v in settings.items() if v is not None}}
    merged["node_name"] = merged["node_name"] or host
    if not isinstance(merged["node_name"], str):
        raise KgnError(f"{host}: gpu_node_labels_node_name must be the Kubernetes node name (a string), "
                       f"got {merged['node_name']!r}")
    for key in ("gpushare_mps", "require_gpu", "overwrite_foreign"):
        require_bool(merged[key], f"{host}: gpu_node_labels setting {key}")
    if merged["sharing"] not in SHARING_MODES:
        raise KgnError(f"{host}: the device plugin sharing mode is {merged['sharing']!r}; accepted: "
                       f"{', '.join(SHARING_MODES)}")
    if not isinstance(merged["gpu_facts"], dict):
        raise KgnError(f"{host}: the GPU facts must be the gpu_facts module result (a mapping), "
                       f"got {type(merged['gpu_facts']).__name__}")
    problems = extra_label_problems(merged["extra"], f"{host}: gpu_node_labels_extra")
    if problems:
        raise KgnError("; ".join(problems))
    if merged["runtime_mode"] not in ("", "cdi", "legacy"):
        raise KgnError(f"{host}: the runtime mode is {merged['runtime_mode']!r}; accepted: cdi, legacy or \"\"")
    return merged


def _managed_keys(node):
    recorded = (node.get("annotations") or {}).get(MANAGED_ANNOTATION) or ""
    return {k for k in str(recorded).split(",") if k}


def _desired(host, s, node, assumed):
    """Desired labels of one node; without GPU facts only the stack labels (GPU labels are unknown)."""
    facts = s["gpu_facts"]
    if "gpus" in facts:
        desired = node_labels(facts, s["stacks"], s["sharing"], s["require_gpu"])
    else:
        desired = {k: v for k, v in node_labels({"gpus": []}, s["stacks"], s["sharing"], False).items()
                   if k != "nvidia.com/gpu.present"}
        labels = (node or {}).get("labels") or {}
        kept = {k: labels[k] for k in sorted(_managed_keys(node or {})) if _gpu_derived(k) and k in labels}
        desired = {**kept, **desired}
        assumed.append(
            "no GPU facts (kgn_observed_nvidia_driver.gpu or gpu_node_labels_gpu_facts), so its GPU labels "
            "(nvidia.com/gpu.present, product, count ...) are unknown: none are set"
            + (f"; the {len(kept)} this project set before are kept" if kept else "")
            + "; only its stack labels are planned"
        )
    if s["runtime_mode"]:
        desired[RUNTIME_MODE_LABEL] = s["runtime_mode"]
    elif RUNTIME_MODE_LABEL in _managed_keys(node or {}) and RUNTIME_MODE_LABEL in ((node or {}).get("labels") or {}):
        desired[RUNTIME_MODE_LABEL] = node["labels"][RUNTIME_MODE_LABEL]  # unknown this run: kept as it was
    desired.update(s["extra"])
    return desired


def _some(names, most=10):
    """At most ``most`` names, and how many more."""
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


def _node_plan(host, settings, api, listed, duplicates):
    entry = {"node_name": host, "status": "refused", "reason": "", "desired": {}, "patch": {}, "set": {},
             "removed": [], "foreign": [], "problems": [], "assumed": []}
    try:
        s = _node_settings(host, settings)
        entry["node_name"] = s["node_name"]
        problems = stack_catalog.stack_problems({host: s["stacks"]}, True)
        if not problems and "gpus" in s["gpu_facts"]:
            problems += node_gpu_problems(s["gpu_facts"], s["stacks"], s["sharing"], s["gpushare_mps"])
        if s["node_name"] in duplicates:
            problems.append(f"the inventory hosts {' and '.join(duplicates[s['node_name']])} all map to the node "
                            f"{s['node_name']}; give each its own kube_node_name")
        if problems:
            entry.update(problems=problems, reason="; ".join(problems))
            return entry
        node = listed.get(s["node_name"])
        desired = _desired(host, s, node, entry["assumed"])
        entry["desired"] = desired
        if api["reachable"] is False:
            entry.update(status="api unreachable", reason=api["error"] or "the API server did not answer")
            return entry
        if api["reachable"] and node is None:
            entry.update(status="not registered",
                         reason=f"node {s['node_name']} is not registered with the API server, which lists "
                                f"{_some(sorted(listed)) or 'no node'}; set kube_node_name for {host} to its Node name")
            return entry
        if api["reachable"] is None:
            entry["assumed"].append(
                "the API was not read; the patch is against "
                + ("the labels recorded by the last run (kgn_observed_node_labels)" if node is not None
                   else "a node without labels (no kgn_observed_node_labels recorded)"))
        change = node_label_patch(desired, (node or {}).get("labels"), (node or {}).get("annotations"),
                                  s["overwrite_foreign"])
    except KgnError as err:
        entry.update(problems=[str(err)], reason=str(err))
        return entry
    status = "render" if api["reachable"] is None else "patch" if change["patch"] else "unchanged"
    entry.update(status=status, patch=change["patch"], set=change["set"], removed=change["removed"],
                 foreign=change["foreign"])
    return entry


def labels_plan(inputs, observed):
    """The node-labels section of the host plan, for every node one API server serves.

    ``inputs``: ``{"nodes": {inventory host: {node_name, gpu_facts, stacks, sharing, gpushare_mps, require_gpu,
    extra, overwrite_foreign}}}`` (missing settings take NODE_DEFAULTS). ``observed``: what the API showed,
    ``{"reachable": true/false, "error": text, "nodes": {node name: {labels, annotations}}}``; ``reachable``
    missing or null means the API was not read (a render, with the labels recorded by the last run in
    ``nodes`` where known).

    Returns ``{"api": {reachable, error}, "nodes": {host: {node_name, status, reason, desired, patch, set,
    removed, foreign, problems, assumed}}, "assumed": [...]}`` with status one of STATUSES: a node whose
    stacks or GPUs are refused is ``refused`` (nothing is sent for it, the others go on); an API that did not
    answer or a node it does not know is said per node, never skipped silently. GPU facts without ``gpus``
    (none recorded) mean unknown GPU labels: nothing GPU-derived is set or removed, and ``assumed`` says so.
    """
    if not isinstance(inputs, dict) or not isinstance(inputs.get("nodes"), dict):
        raise KgnError("labels_plan: inputs must be {'nodes': {inventory host: settings}}")
    observed = observed or {}
    if not isinstance(observed, dict):
        raise KgnError("labels_plan: observed must be a mapping (reachable, error, nodes)")
    reachable = observed.get("reachable")
    if reachable not in (None, True, False):
        raise KgnError(f"labels_plan: observed.reachable must be true, false or null, got {reachable!r}")
    listed = observed.get("nodes")
    listed = {} if listed is None else listed
    if not isinstance(listed, dict):
        raise KgnError("labels_plan: observed.nodes must map node names to {labels, annotations}")
    api = {"reachable": reachable, "error": str(observed.get("error") or "")}
    names = {}
    for host, settings in inputs["nodes"].items():
        name = (settings.get("node_name") if isinstance(settings, dict) else None) or host
        names.setdefault(name, []).append(host)
    duplicates = {name: sorted(hosts) for name, hosts in names.items() if len(hosts) > 1}
    nodes = {host: _node_plan(host, settings, api, listed, duplicates)
             for host, settings in sorted(inputs["nodes"].items())}
    return {"api": api, "nodes": nodes,
            "assumed": [f"{host}: {note}" for host, node in nodes.items() for note in node["assumed"]]}
