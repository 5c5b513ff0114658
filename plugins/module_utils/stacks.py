"""The GPU-sharing stack catalog: the single source of truth for what each stack deploys, selects on
and needs from kube-scheduler.

Filters:
  stack_catalog    the catalog entries of the chosen stacks (resources, labels, extender, service)
  stack_extenders  the kube-scheduler extenders of the chosen stacks, in the neutral form the
                       scheduler filters (scheduler.py) take
  stack_problems   conflicts and bad input, as a list of messages (empty = fine); the validate
                       playbook fails on a non-empty list before any host is touched
  stack_service_urls  in-cluster base URLs of the extender Services (for an in-cluster scheduler)
  secondary_scheduler  whether a second, in-cluster kube-scheduler carries the extenders (managed
                       control plane): from gpu_sharing_stacks_secondary_scheduler and the inventory

Sources (keys from shared/reference/version-facts.md and the seeds):
  gpushare   seeds/gpushare-on-kubeasz-1.23.md, seeds/gpu-sharing-design-policy-json-mps.md
             (urlPrefix http://127.0.0.1:32766/gpushare-scheduler, filter + bind, nodeCacheCapable,
             managedResources aliyun.com/gpu-mem ignoredByScheduler false, ignorable false,
             Service NodePort 32766 -> 12345, nodeSelector gpushare=true)
  nano_gpu   seeds/superedge-device-plugin-nano-gpu.md (urlPrefix .../scheduler, filterVerb filter,
             prioritizeVerb priorities, bindVerb bind, weight 1, nodeCacheCapable, managedResources
             nano-gpu/gpu-percent); nano-gpu-scheduler deploy yaml: Service port 39999
  elastic_gpu seeds/elastic-gpu-on-oke.md (agent nodeSelector gpu-node=true, toleration
             nvidia.com/gpu); elastic-gpu-scheduler README: same verbs as nano-gpu on port 39999,
             managedResources elasticgpu.io/gpu-memory and elasticgpu.io/gpu-core
  nvidia_device_plugin  version-facts E (no extender; resource nvidia.com/gpu)
Extender field semantics (zero value = unset, httpTimeout 0 = 5 s default, one binder only): [A3].
"""

from __future__ import annotations

import copy

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

# The catalog writes unset extender fields as Go zero values ("" verb, 0 weight, 0 timeout), which is
# how kube-scheduler reads them [A3]; stack_extenders leaves them out of the neutral form.
_EXTENDER_KEYS = (
    "url_prefix", "filter_verb", "prioritize_verb", "preempt_verb", "bind_verb", "weight",
    "enable_https", "http_timeout", "node_cache_capable", "managed_resources", "ignorable", "tls",
)

_CATALOG = {
    "nvidia_device_plugin": {
        "description": "NVIDIA k8s-device-plugin: whole GPUs, optionally time-sliced or MPS-shared",
        "resources": ["nvidia.com/gpu"],
        # The upstream static manifest has no nodeSelector (it would also run on the nodes of another
        # stack); this is the GPU operator's per-node switch for the device plugin DaemonSet.
        "node_labels": {"nvidia.com/gpu.deploy.device-plugin": "true"},
        "claims_whole_gpus": True,
        "extender": None,
        "service": None,
    },
    "gpushare": {
        "description": "Aliyun gpushare: GPU memory sharing through a scheduler extender",
        "resources": ["aliyun.com/gpu-mem", "aliyun.com/gpu-count"],
        "node_labels": {"gpushare": "true"},
        "claims_whole_gpus": True,
        "extender": {
            "path": "/gpushare-scheduler",
            "filter_verb": "filter",
            "prioritize_verb": "",
            "preempt_verb": "",
            "bind_verb": "bind",
            "weight": 0,
            "http_timeout": 0,
            "node_cache_capable": True,
            "managed_resources": [{"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": False}],
            "ignorable": False,
        },
        "service": {"name": "gpushare-schd-extender", "port": 12345, "node_port": 32766},
    },
    "nano_gpu": {
        "description": "Tencent nano-gpu: GPU percentage sharing through a scheduler extender",
        "resources": ["nano-gpu/gpu-percent"],
        # Upstream's agent DaemonSet has no nodeSelector; this project restricts it to the nodes
        # that chose the stack, in the style of gpushare=true.
        "node_labels": {"nano-gpu": "true"},
        "claims_whole_gpus": True,
        "extender": {
            "path": "/scheduler",
            "filter_verb": "filter",
            "prioritize_verb": "priorities",
            "preempt_verb": "",
            "bind_verb": "bind",
            "weight": 1,
            "http_timeout": 0,
            "node_cache_capable": True,
            "managed_resources": [{"name": "nano-gpu/gpu-percent", "ignored_by_scheduler": False}],
            "ignorable": False,
        },
        # node_port is this project's choice (upstream uses a ClusterIP Service) so that a
        # kube-scheduler on the host network can reach it at 127.0.0.1 like gpushare.
        "service": {"name": "nano-gpu-scheduler", "port": 39999, "node_port": 32765},
    },
    "elastic_gpu": {
        "description": "elastic-gpu: GPU claims (CRDs) with a scheduler extender and node agent",
        "resources": ["elasticgpu.io/gpu-core", "elasticgpu.io/gpu-memory"],
        "node_labels": {"gpu-node": "true"},
        "claims_whole_gpus": True,
        "extender": {
            "path": "/scheduler",
            "filter_verb": "filter",
            "prioritize_verb": "priorities",
            "preempt_verb": "",
            "bind_verb": "bind",
            "weight": 1,
            "http_timeout": 0,
            "node_cache_capable": True,
            "managed_resources": [
                {"name": "elasticgpu.io/gpu-memory", "ignored_by_scheduler": False},
                {"name": "elasticgpu.io/gpu-core", "ignored_by_scheduler": False},
            ],
            "ignorable": False,
        },
        "service": {"name": "elastic-gpu-scheduler", "port": 39999, "node_port": 32764},
    },
}

STACKS = tuple(_CATALOG)
_ACCEPTED = ", ".join(STACKS)


def _stack_list(stacks, what="gpu_sharing_stacks"):
    """Validate a list of stack names; return it without duplicates, order kept."""
    if stacks is None:
        return []
    if isinstance(stacks, str) or not isinstance(stacks, (list, tuple)):
        raise KgnError(
            f"{what} must be a list of stack names, got {type(stacks).__name__} {stacks!r}; "
            f"write it as a YAML list, e.g. [gpushare]. Accepted names: {_ACCEPTED}"
        )
    unknown = [s for s in stacks if s not in _CATALOG]
    if unknown:
        raise KgnError(
            f"{what} contains unknown stack(s) {', '.join(map(repr, unknown))}; accepted: {_ACCEPTED}"
        )
    seen = []
    for stack in stacks:
        if stack not in seen:
            seen.append(stack)
    return seen


def stack_catalog(stacks=None):
    """Catalog entries of ``stacks`` (all stacks when None), as a dict name -> entry."""
    names = STACKS if stacks is None else _stack_list(stacks)
    return {name: copy.deepcopy(_CATALOG[name]) for name in names}


def _tls(value, stack):
    if value in (None, {}):
        return {}
    if not isinstance(value, dict):
        raise KgnError(f"TLS settings for stack {stack!r} must be a dict, got {value!r}")
    allowed = {"insecure", "server_name", "cert_file", "key_file", "ca_file", "cert_data", "key_data", "ca_data"}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise KgnError(
            f"TLS settings for stack {stack!r} have unknown key(s) {unknown}; accepted: {sorted(allowed)}"
        )
    return dict(value)


def stack_extenders(stacks, urls, tls=None):
    """Extenders of ``stacks`` in the neutral form, URL = ``urls[stack]`` + the stack's path.

    ``urls`` maps each extender stack to its base URL (``http://127.0.0.1:32766``); a URL that
    already ends with the stack's path is used as is. ``tls`` optionally maps stack -> TLS settings
    (``insecure``, ``server_name``, ``cert_file``, ``key_file``, ``ca_file``, ``*_data``).
    Stacks without an extender (nvidia_device_plugin) contribute nothing.
    """
    names = _stack_list(stacks)
    if urls is None:
        urls = {}
    if not isinstance(urls, dict):
        raise KgnError(f"urls must be a dict stack -> base URL, got {type(urls).__name__} {urls!r}")
    tls = tls or {}
    if not isinstance(tls, dict):
        raise KgnError(f"tls must be a dict stack -> TLS settings, got {tls!r}")
    result = []
    binders = []
    for name in names:
        ext = _CATALOG[name]["extender"]
        if ext is None:
            continue
        base = urls.get(name)
        if not isinstance(base, str) or not base.strip():
            raise KgnError(
                f"no extender base URL for stack {name!r} (urls has {sorted(urls)}); the kube-scheduler "
                f"role must pass urls[{name!r}] such as 'http://127.0.0.1:{_CATALOG[name]['service']['node_port']}'"
            )
        base = base.strip().rstrip("/")
        scheme = base.split("://", 1)[0].lower() if "://" in base else ""
        if scheme not in ("http", "https"):
            raise KgnError(
                f"extender URL {base!r} for stack {name!r} must start with http:// or https://"
            )
        url = base if base.endswith(ext["path"]) else base + ext["path"]
        entry = {
            "url_prefix": url,
            "filter_verb": ext["filter_verb"],
            "prioritize_verb": ext["prioritize_verb"],
            "preempt_verb": ext["preempt_verb"],
            "bind_verb": ext["bind_verb"],
            "weight": ext["weight"],
            "enable_https": scheme == "https",
            "http_timeout": ext["http_timeout"],
            "node_cache_capable": ext["node_cache_capable"],
            "managed_resources": copy.deepcopy(ext["managed_resources"]),
            "ignorable": ext["ignorable"],
            "tls": _tls(tls.get(name), name),
        }
        if entry["bind_verb"]:
            binders.append(name)
        # Unset fields are left out (kube-scheduler then applies its default, e.g. 5 s timeout [A3]);
        # this is the contract of the scheduler filters, which refuse nulls and zero timeouts.
        result.append({k: v for k, v in entry.items() if v not in ("", 0, {}) or isinstance(v, bool)})
    if len(binders) > 1:
        raise KgnError(
            f"stacks {' and '.join(binders)} both bind pods through their scheduler extender, and "
            f"kube-scheduler accepts only one binding extender; choose one of them in gpu_sharing_stacks"
        )
    return result


def _node_stacks(stacks_by_node):
    if isinstance(stacks_by_node, dict):
        return list(stacks_by_node.items())
    return [("(all GPU nodes)", stacks_by_node)]


def stack_problems(stacks_by_node, scheduler_changeable=True, check_claims=True, secondary_scheduler=False):
    """Problems with the chosen stacks, as a list of messages (empty list = no problem).

    ``stacks_by_node``: a dict node -> list of stacks (per host gpu_sharing_stacks), or one list
    for the whole cluster. ``scheduler_changeable``: false for a managed control plane (EKS, GKE,
    AKS, OKE ...) where kube-scheduler cannot be given an extender. ``check_claims=False`` skips the
    per-node check, for a cluster-wide list whose stacks run on different nodes (selected by labels).
    ``secondary_scheduler``: true when a second kube-scheduler carrying the extenders is deployed in
    the cluster (gpu_sharing_stacks_secondary_scheduler); then an unchangeable scheduler is no problem.
    """
    problems = []
    union = []
    for node, stacks in _node_stacks(stacks_by_node):
        try:
            names = _stack_list(stacks, what=f"gpu_sharing_stacks of {node}")
        except KgnError as err:
            problems.append(str(err))
            continue
        claimers = [s for s in names if _CATALOG[s]["claims_whole_gpus"]]
        if check_claims and len(claimers) > 1:
            problems.append(
                f"{node}: stacks {' and '.join(claimers)} both claim every GPU of the node (each device plugin "
                f"advertises all GPUs, so one GPU would be handed out twice); keep one stack per node: set "
                f"gpu_sharing_stacks per host in host_vars, or use nvidia_device_plugin's time-slicing/MPS "
                f"sharing instead of a second stack"
            )
        union.extend(s for s in names if s not in union)
    binders = [s for s in union if (_CATALOG[s]["extender"] or {}).get("bind_verb")]
    if len(binders) > 1:
        problems.append(
            f"stacks {' and '.join(binders)} both bind pods through a scheduler extender and kube-scheduler "
            f"accepts only one binding extender per cluster; choose one of them in gpu_sharing_stacks"
        )
    if not isinstance(scheduler_changeable, bool):
        problems.append(f"scheduler_changeable must be true or false, got {scheduler_changeable!r}")
    elif not isinstance(secondary_scheduler, bool):
        problems.append(f"secondary_scheduler must be true or false, got {secondary_scheduler!r}")
    elif not scheduler_changeable and not secondary_scheduler:
        for stack in (s for s in union if _CATALOG[s]["extender"]):
            problems.append(
                f"stack {stack} needs a kube-scheduler extender, but this cluster's kube-scheduler cannot be "
                f"changed (managed control plane, or no kube_control_plane hosts in the inventory) and "
                f"gpu_sharing_stacks_secondary_scheduler is false. Instead: set "
                f"gpu_sharing_stacks_secondary_scheduler to auto or true (a second kube-scheduler with the "
                f"extender runs in the cluster; GPU pods set schedulerName), use nvidia_device_plugin with "
                f"time-slicing or MPS sharing (no extender needed), or add the control plane hosts to "
                f"kube_control_plane if you do run them"
            )
    return problems


def stack_service_urls(stacks, namespace):
    """In-cluster base URL of each chosen extender stack's Service: ``{stack: http://<svc>.<ns>.svc:<port>}``.

    For a kube-scheduler that runs as a pod (the secondary scheduler on a managed control plane), which
    reaches the extender through the Service's ClusterIP DNS name instead of the host's NodePort.
    """
    names = _stack_list(stacks)
    if not isinstance(namespace, str) or not namespace.strip():
        raise KgnError(f"namespace must be a Kubernetes namespace name, got {namespace!r}; "
                                 "set gpu_sharing_stacks_namespace")
    return {
        name: f"http://{_CATALOG[name]['service']['name']}.{namespace.strip()}.svc:{_CATALOG[name]['service']['port']}"
        for name in names if _CATALOG[name]["extender"]
    }


def secondary_scheduler(setting, control_plane_hosts):
    """True when a second kube-scheduler with the stacks' extenders is deployed inside the cluster.

    ``setting`` is gpu_sharing_stacks_secondary_scheduler: ``true``, ``false`` or ``"auto"`` (= when
    ``control_plane_hosts``, the inventory's kube_control_plane hosts, is empty: a managed control plane).
    """
    if isinstance(setting, bool):
        return setting
    if isinstance(setting, str) and setting.lower() in ("true", "false"):  # -e on the command line gives strings
        return setting.lower() == "true"
    if setting == "auto":
        return not control_plane_hosts
    raise KgnError(
        f"gpu_sharing_stacks_secondary_scheduler must be auto, true or false, got {setting!r}"
    )


def stack_image(image, mirror=""):
    """``image`` pulled through ``mirror`` (a registry host, optionally with a path) when one is set.

    The image's own registry host is replaced; a Docker Hub image (no host) gets the mirror in front:
    ``nanogpu/nano-gpu-agent:0.3.0`` + ``mirror.local:5000`` -> ``mirror.local:5000/nanogpu/nano-gpu-agent:0.3.0``.
    """
    if not isinstance(image, str) or not image.strip() or " " in image.strip():
        raise KgnError(f"image {image!r} is not an image reference such as 'nvcr.io/nvidia/x:v1'")
    image = image.strip()
    if not mirror:
        return image
    if not isinstance(mirror, str) or "://" in mirror:
        raise KgnError(f"registry mirror {mirror!r} must be a host[:port][/path] without a scheme")
    first, _, rest = image.partition("/")
    has_host = bool(rest) and ("." in first or ":" in first or first == "localhost")
    return f"{mirror.rstrip('/')}/{rest if has_host else image}"

