"""The GPU-sharing stack catalog: the single source of truth for what each stack deploys, selects on
and needs from kube-scheduler.

Functions (stack_catalog, stack_extenders, stack_problems and stacks_plan are also filters):
  stack_catalog    the catalog entries of the chosen stacks (resources, labels, extender, service)
  stack_extenders  the kube-scheduler extenders of the chosen stacks, in the neutral form the
                       scheduler filters (scheduler.py) take
  stack_problems   conflicts and bad input, as a list of messages (empty = fine); the validate
                       playbook fails on a non-empty list before any host is touched
  stack_service_urls  in-cluster base URLs of the extender Services (for an in-cluster scheduler)
  stack_conflicts  the NVIDIA device plugins already in the cluster that this project did not deploy (the GPU
                       Operator, a provider's managed add-on, one deployed by hand) for the chosen stacks that
                       advertise the same resource
  secondary_scheduler  whether a second, in-cluster kube-scheduler carries the extenders (managed
                       control plane): from gpu_sharing_stacks_secondary_scheduler and the inventory

Section of the host plan (plan.SECTIONS "stacks"):
  stacks_plan      which templates per stack and variant, the apiVersions, device plugin release, images
                       and second kube-scheduler for a Kubernetes version, the refusals, and what is removed
                       (objects and manifest files of what is no longer selected)

Sources (keys from docs/versions.md and the reference clusters of docs/field-notes.md):
  gpushare   "kubeasz 1.23 with Aliyun gpushare", "gpushare design with a Policy file and MPS"
             (urlPrefix http://127.0.0.1:32766/gpushare-scheduler, filter + bind, nodeCacheCapable,
             managedResources aliyun.com/gpu-mem ignoredByScheduler false, ignorable false,
             Service NodePort 32766 -> 12345, nodeSelector gpushare=true)
  nano_gpu   "SuperEdge edge cluster with nano-gpu" (urlPrefix .../scheduler, filterVerb filter,
             prioritizeVerb priorities, bindVerb bind, weight 1, nodeCacheCapable, managedResources
             nano-gpu/gpu-percent); nano-gpu-scheduler deploy yaml: Service port 39999
  elastic_gpu "Oracle OKE with CRI-O and elastic-gpu" (agent nodeSelector gpu-node=true, toleration
             nvidia.com/gpu); elastic-gpu-scheduler README: same verbs as nano-gpu on port 39999,
             managedResources elasticgpu.io/gpu-memory and elasticgpu.io/gpu-core
  nvidia_device_plugin  docs/versions.md E (no extender; resource nvidia.com/gpu)
  hami       the pinned HAMi release, every fact cited in hami.py (own kube-scheduler with its extender on
             https://127.0.0.1:443, mutating webhook, device plugin on gpu=on nodes)
  nvidia_dra the pinned NVIDIA DRA driver release, every fact cited in dra.py (no extender: kube-scheduler allocates
             the GPUs itself from ResourceSlices; kubelet plugin on the nodes labelled kube-gpu-nodes.io/nvidia-dra)
Extender field semantics (zero value = unset, httpTimeout 0 = 5 s default, one binder only): [A3].
"""

import copy
import hashlib
import json
import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plain import require_bool
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra, hami, manifests
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import kubernetes_minor

# The catalog writes unset extender fields as Go zero values ("" verb, 0 weight, 0 timeout), which is
# how kube-scheduler reads them [A3]; stack_extenders leaves them out of the neutral form.
_EXTENDER_KEYS = (
    "url_prefix", "filter_verb", "prioritize_verb", "preempt_verb", "bind_verb", "weight",
    "enable_https", "http_timeout", "node_cache_capable", "managed_resources", "ignorable", "tls",
)

# What a stack's entry says, besides its manifests' templates (TEMPLATES) and images (IMAGE_KEYS):
#   resources        what its device plugin advertises; allocatable: the part of it that is node allocatable
#   node_labels      what its DaemonSets select nodes by (gpu_node_labels sets them)
#   node_annotations what its device plugin writes on the node once it registered the GPUs (verify)
#   claims_whole_gpus its device plugin advertises every GPU of the node (two such stacks cannot share a node)
#   extender         the extender kube-scheduler is given (kube_scheduler_extender), or None
#   service          the extender's Service (in-cluster URL, NodePort)
#   own_scheduler    a kube-scheduler and mutating webhook of its own (verify reads their Deployment and webhook)
#   device_plugin_sockets  regular expressions of the socket its device plugin registers with kubelet (verify)
#   daemonset_args   arguments a DaemonSet of it must run with: [{daemonset, arg}] (verify)
# A new stack is one entry here plus its templates (and, if it brings its own kind of object, a check).
ANY_PLUGIN_SOCKET = r"(?!kubelet\.sock$).+\.sock"


def _extender(path, managed, prioritize):
    """A stack's extender entry: at ``path`` of its Service, given the pods that ask for the ``managed`` resources to
    filter and bind (it caches nodes, and a pod waits when it does not answer); one that ``prioritize``s scores the
    nodes too, with weight 1."""
    return {"path": path, "filter_verb": "filter", "prioritize_verb": "priorities" if prioritize else "",
            "preempt_verb": "", "bind_verb": "bind", "weight": 1 if prioritize else 0, "http_timeout": 0,
            "node_cache_capable": True,
            "managed_resources": [{"name": name, "ignored_by_scheduler": False} for name in managed],
            "ignorable": False}


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
        # the pod smoke (smoke.pod_spec): one whole GPU (or one replica, time-sliced; one MIG device, single strategy)
        "smoke": {"limits": {"nvidia.com/gpu": 1}, "gpus": "required"},
        # k8s-device-plugin 1.11 registers nvidia.sock (docs/field-notes.md, CentOS 7.9 + Docker 18.09 + Kubernetes
        # 1.16); later releases name the socket after the resource, nvidia-gpu.sock
        "device_plugin_sockets": [r"nvidia.*\.sock"],
    },
    "gpushare": {
        "description": "Aliyun gpushare: GPU memory sharing through a scheduler extender",
        "resources": ["aliyun.com/gpu-mem", "aliyun.com/gpu-count"],
        "node_labels": {"gpushare": "true"},
        "claims_whole_gpus": True,
        "extender": _extender("/gpushare-scheduler", ["aliyun.com/gpu-mem"], prioritize=False),
        "service": {"name": "gpushare-schd-extender", "port": 12345, "node_port": 32766},
        # 1 unit of GPU memory (GiB with the field notes' --memory-unit=GiB); the device plugin hands the amount in as
        # ALIYUN_COM_GPU_MEM_CONTAINER (gpushare-device-plugin pkg/gpu/nvidia/allocate.go, commit 0f2eade8)
        "smoke": {"limits": {"aliyun.com/gpu-mem": 1}, "gpus": "required",
                  "env": {"ALIYUN_COM_GPU_MEM_CONTAINER": "1"}},
        "device_plugin_sockets": [r"aliyun.*\.sock"],  # aliyungpushare.sock
        # the gpushare design in docs/field-notes.md runs the device plugin with --memory-unit=GiB
        "daemonset_args": [{"daemonset": "gpushare-device-plugin-ds", "arg": "--memory-unit"}],
    },
    "nano_gpu": {
        "description": "Tencent nano-gpu: GPU percentage sharing through a scheduler extender",
        "resources": ["nano-gpu/gpu-percent"],
        # Upstream's agent DaemonSet has no nodeSelector; this project restricts it to the nodes
        # that chose the stack, in the style of gpushare=true.
        "node_labels": {"nano-gpu": "true"},
        "claims_whole_gpus": True,
        "extender": _extender("/scheduler", ["nano-gpu/gpu-percent"], prioritize=True),
        # node_port is this project's choice (upstream uses a ClusterIP Service) so that a
        # kube-scheduler on the host network can reach it at 127.0.0.1 like gpushare.
        "service": {"name": "nano-gpu-scheduler", "port": 39999, "node_port": 32765},
        # 10 % of one GPU; no source we have pins what nano-gpu's agent puts into the container: the log is shown
        "smoke": {"limits": {"nano-gpu/gpu-percent": 10}, "gpus": "optional"},
        # no source pins the nano-gpu agent's socket name: any device plugin socket but kubelet's counts
        "device_plugin_sockets": [ANY_PLUGIN_SOCKET],
    },
    "elastic_gpu": {
        "description": "elastic-gpu: GPU claims (CRDs) with a scheduler extender and node agent",
        "resources": ["elasticgpu.io/gpu-core", "elasticgpu.io/gpu-memory"],
        "node_labels": {"gpu-node": "true"},
        "claims_whole_gpus": True,
        "extender": _extender("/scheduler", ["elasticgpu.io/gpu-memory", "elasticgpu.io/gpu-core"], prioritize=True),
        "service": {"name": "elastic-gpu-scheduler", "port": 39999, "node_port": 32764},
        # the agent hands its GPU in as a device node of its own and env GPU=<id>, with NVIDIA_VISIBLE_DEVICES=none
        # (elastic-gpu-agent pkg/plugins/gpushare.go, commit 294dd56f): the log proves GPU is set
        "smoke": {"limits": {"elasticgpu.io/gpu-core": 10, "elasticgpu.io/gpu-memory": 1}, "gpus": "optional",
                  "env": {"GPU": "*"}},
        "device_plugin_sockets": [ANY_PLUGIN_SOCKET],  # not pinned by a source either
    },
    "hami": {
        "description": "HAMi: GPU memory and core sharing through its own kube-scheduler, extender and webhook",
        "resources": list(hami.RESOURCES),
        # only nvidia.com/gpu is node allocatable; memory and cores are in the node annotation
        "allocatable": list(hami.ALLOCATABLE),
        "node_annotations": [hami.REGISTER_ANNOTATION],
        "node_labels": dict(hami.NODE_LABELS),
        "claims_whole_gpus": True,
        # HAMi never extends the cluster's kube-scheduler: its extender lives in its own (own_scheduler)
        "extender": None,
        "service": None,
        "own_scheduler": {"name": hami.SCHEDULER_NAME, "webhook": hami.WEBHOOK_NAME, "extender": hami.extender()},
        # one GPU with 1024 MiB; HAMi's device plugin hands the limit in as CUDA_DEVICE_MEMORY_LIMIT_0=1024m
        # (HAMi pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go, commit 057ea14b)
        "smoke": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}, "gpus": "required",
                  "env": {"CUDA_DEVICE_MEMORY_LIMIT_0": "1024m"}},
        "device_plugin_sockets": [ANY_PLUGIN_SOCKET],  # HAMi's socket name is not pinned by a source
    },
    "nvidia_dra": {
        "description": "NVIDIA DRA driver: GPUs and MIG devices allocated by kube-scheduler through ResourceClaims "
                       "(Kubernetes 1.32+; no extender, no extended resource)",
        # nothing is node allocatable: the kubelet plugin publishes the GPUs in ResourceSlices
        "resources": [],
        "node_labels": dict(dra.NODE_LABELS),
        # the kubelet plugin publishes every GPU of the node: no second GPU stack on it
        "claims_whole_gpus": True,
        "extender": None,
        "service": None,
        "dra": {"driver": dra.GPU_DRIVER, "device_classes": [c[0] for c in dra.DEVICE_CLASSES]},
        # the pod smoke (smoke_pod.pod_objects): one whole GPU through a ResourceClaimTemplate of the DeviceClass
        # gpu.nvidia.com, in the cluster's resource.k8s.io version (the stacks plan's dra.resource_api)
        "smoke": {"claim": {"device_class": "gpu.nvidia.com", "count": 1}, "gpus": "required"},
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
        if check_claims and "nvidia_dra" in claimers and len(claimers) > 1:
            problems.extend(dra.conflict_problems(node, names))
        elif check_claims and len(claimers) > 1:
            problems.append(
                f"{node}: stacks {' and '.join(claimers)} both claim every GPU of the node (each device plugin "
                f"advertises all GPUs, so one GPU would be handed out twice); keep one stack per node: set "
                f"gpu_sharing_stacks per host in host_vars, or use nvidia_device_plugin's time-slicing/MPS "
                f"sharing instead of a second stack"
            )
        union.extend(s for s in names if s not in union)
    if "hami" in union and "nvidia_device_plugin" in union:
        problems.append(
            "stacks hami and nvidia_device_plugin both advertise nvidia.com/gpu, and HAMi's webhook sends every pod "
            "that asks for nvidia.com/gpu to hami-scheduler, which places pods only on HAMi's nodes; choose one of "
            "them in gpu_sharing_stacks (hami shares GPUs by memory and cores; nvidia_device_plugin by time-slicing "
            "or MPS)")
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


# --------------------------------------------------------------------------------------------------
# The stacks section of the host plan

# Every object this project creates carries these labels; the stack label names its stack ("common" for
# the namespace, "secondary_scheduler" for the second kube-scheduler). Pruning lists objects by MANAGED_BY.
MANAGED_BY = {"app.kubernetes.io/managed-by": "kube-gpu-nodes"}
STACK_LABEL = "kube-gpu-nodes.io/stack"
SECONDARY_CONFIG_DIR = "/etc/kubernetes/kgn-gpu-scheduler"
# Whole template per variant (key = stack, then variant), applied in this order: CRDs and RBAC before the
# workloads that use them.
TEMPLATES = {
    "nvidia_device_plugin": {
        "v0.9-none": ["nvidia_device_plugin/daemonset-v0.9.yml.j2"],
        "v0.12-none": ["nvidia_device_plugin/daemonset-v0.12.yml.j2"],
        "v0.12-time-slicing": ["nvidia_device_plugin/config-time-slicing.yml.j2",
                               "nvidia_device_plugin/daemonset-v0.12-config.yml.j2"],
        "v0.12-mps": ["nvidia_device_plugin/config-mps.yml.j2", "nvidia_device_plugin/mps-control-daemon.yml.j2",
                      "nvidia_device_plugin/daemonset-v0.12-config.yml.j2"],
    },
    "gpushare": {
        variant: ["gpushare/extender-rbac.yml.j2", "gpushare/extender-deployment.yml.j2",
                  "gpushare/extender-service.yml.j2", "gpushare/device-plugin-rbac.yml.j2",
                  f"gpushare/device-plugin-daemonset-{variant}.yml.j2"]
        for variant in ("plain", "mps")
    },
    "nano_gpu": {"default": ["nano_gpu/scheduler.yml.j2", "nano_gpu/agent.yml.j2"]},
    "elastic_gpu": {"default": ["elastic_gpu/crd-elasticgpuclaims.yml.j2", "elastic_gpu/crd-elasticgpuclasses.yml.j2",
                                "elastic_gpu/crd-elasticgpus.yml.j2", "elastic_gpu/crd-gpus.yml.j2",
                                "elastic_gpu/scheduler.yml.j2", "elastic_gpu/agent.yml.j2"]},
    # the webhook last but one: the scheduler it sends pods to, and the Secret's Job, are there first; the Job that
    # patches the webhook's CA after it
    "hami": {"default": ["hami/rbac.yml.j2", "hami/certgen-create.yml.j2", "hami/scheduler-config.yml.j2",
                         "hami/scheduler.yml.j2", "hami/device-plugin.yml.j2", "hami/webhook.yml.j2",
                         "hami/certgen-patch.yml.j2"]},
    # GPUs only, or with ComputeDomains (CRDs, controller, their RBAC and DeviceClasses): the chart's two parts.
    "nvidia_dra": {
        "gpus": ["nvidia_dra/rbac-kubelet-plugin.yml.j2", "nvidia_dra/admission-policy.yml.j2",
                 "nvidia_dra/device-classes.yml.j2", "nvidia_dra/kubelet-plugin.yml.j2"],
        "gpus-compute-domains": ["nvidia_dra/crds.yml.j2", "nvidia_dra/rbac-kubelet-plugin.yml.j2",
                                 "nvidia_dra/rbac-controller.yml.j2", "nvidia_dra/admission-policy.yml.j2",
                                 "nvidia_dra/device-classes.yml.j2", "nvidia_dra/controller.yml.j2",
                                 "nvidia_dra/kubelet-plugin.yml.j2"],
    },
}
NAMESPACE_TEMPLATE = "common/namespace.yml.j2"
SECONDARY_TEMPLATES = ["secondary_scheduler/rbac.yml.j2", "secondary_scheduler/config.yml.j2",
                       "secondary_scheduler/deployment.yml.j2"]
# Image keys per stack (gpu_sharing_stacks_images) and the reference clusters' sample workload images.
IMAGE_KEYS = {
    "nvidia_device_plugin": ["nvidia_device_plugin"],
    "gpushare": ["gpushare_extender", "gpushare_device_plugin"],
    "nano_gpu": ["nano_gpu_scheduler", "nano_gpu_agent"],
    "elastic_gpu": ["elastic_gpu_scheduler", "elastic_gpu_agent"],
    "hami": ["hami"],  # + the kube-webhook-certgen of the version (hami.certgen_image_key), in _images
    "nvidia_dra": ["nvidia_dra"],
}
SAMPLE_IMAGES = {
    "nvidia_device_plugin": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda10.2",
    "gpushare": "cheyang/gpu-player:v2",
    "nano_gpu": "nvcr.io/nvidia/cuda:9.0-devel",
    "elastic_gpu": "nvidia/samples:dcgmproftester-2.0.10-cuda11.0-ubuntu18.04",
    "hami": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda10.2",
    # the DRA driver's demo/specs/extended-resources/gpu-full.yaml
    "nvidia_dra": "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
}
# Removal order: what runs first, then what it uses; custom objects before their CRD, CRDs last.
# The webhook goes first, so that no new pod is sent to a scheduler that is going away.
# Sample claims go with their pods; DeviceClasses after the kubelet plugin that serves them; the ResourceSlice
# admission policy after the kubelet plugin it restricts.
REMOVE_ORDER = ("MutatingWebhookConfiguration", "Pod", "ResourceClaimTemplate", "Deployment", "Job", "DaemonSet",
                "Service", "ConfigMap", "DeviceClass", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
                "RoleBinding", "ClusterRoleBinding",
                "Role", "ClusterRole", "ServiceAccount")
# Kinds the project creates and prunes (resource.group as kubectl names them); a Namespace is never removed.
PRUNED_RESOURCES = ("pods", "deployments.apps", "daemonsets.apps", "services", "configmaps", "serviceaccounts",
                    "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
                    "clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
                    "customresourcedefinitions.apiextensions.k8s.io", "jobs.batch",
                    "mutatingwebhookconfigurations.admissionregistration.k8s.io")
# Served only by some clusters, so listed only where served (kubectl refuses the whole list for one unknown kind):
# ValidatingAdmissionPolicies from 1.30 (admissionregistration.k8s.io/v1, GA and on by default), the DRA kinds where
# the API server's discovery lists resource.k8s.io.
ADMISSION_POLICY_RESOURCES = ("validatingadmissionpolicies.admissionregistration.k8s.io",
                              "validatingadmissionpolicybindings.admissionregistration.k8s.io")
ADMISSION_POLICY_MINOR = 30
DRA_RESOURCES = ("deviceclasses.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io")
# What to do with an NVIDIA device plugin already in the cluster that this project did not deploy
# (gpu_sharing_stacks_existing_device_plugin): refuse, or adopt it (keep it, leave out the stack's own).
EXISTING_DEVICE_PLUGIN = ("refuse", "adopt")
# The resource every NVIDIA device plugin advertises, whoever deployed it.
NVIDIA_GPU = "nvidia.com/gpu"
# Image names (the last path segment, any registry and tag) of NVIDIA device plugins: upstream's (also the GPU
# Operator's and the Helm chart's) and the managed add-ons' (GKE, OKE: nvidia-gpu-device-plugin).
DEVICE_PLUGIN_IMAGES = ("k8s-device-plugin", "nvidia-device-plugin", "nvidia-gpu-device-plugin",
                        "nvidia-k8s-device-plugin")
# Programs the same image also runs, which advertise no resource: GPU Feature Discovery, the MPS control
# daemon, the config manager sidecar of the Helm chart.
NOT_A_DEVICE_PLUGIN = ("gpu-feature-discovery", "mps-control-daemon", "config-manager")
# The device plugin's migStrategy (k8s-device-plugin README): none, single, mixed.
MIG_STRATEGIES = ("none", "single", "mixed")
STACK_INPUTS = {
    "kubernetes_version": "", "stacks": [], "namespace": "kube-system",
    "manifest_dir": "/etc/kubernetes/kube-gpu-nodes/stacks", "device_plugin_release": "", "images": {},
    "registry_mirror": "", "sharing": "none", "mig_strategy": "none", "replicas": 4, "gpushare_mps": False,
    "secondary_scheduler": "auto",
    "secondary_scheduler_name": "kgn-gpu-scheduler", "secondary_scheduler_image": "", "control_plane_hosts": [],
    "samples": False, "existing_device_plugin": "refuse", "allow_newer": False, "envvar_unprivileged": "auto",
    # nvidia_dra (dra.dra_plan); dra_mig_layouts: the GPU nodes' nvidia_mig_layout values, for the MIG samples
    "dra_compute_domains": True, "dra_extended_resource": "auto", "dra_feature_gates": {}, "dra_cdi_hook_path": "",
    "dra_resource_api": "", "dra_mig_layouts": [],
    "manifests": None,
}


def pruned_resources(kubernetes_version, served=None):
    """The kinds the project lists (by its label) and prunes in a cluster of ``kubernetes_version`` whose discovery
    lists ``served`` ({group: [versions]}, None when not read: then no DRA kind)."""
    resources = list(PRUNED_RESOURCES)
    try:
        minor = kubernetes_minor(kubernetes_version, "kubernetes_version", newest=False)
    except KgnError:
        minor = 0
    if minor >= ADMISSION_POLICY_MINOR:
        resources += ADMISSION_POLICY_RESOURCES
    if (served or {}).get(dra.RESOURCE_GROUP):
        resources += DRA_RESOURCES
    return resources


def _stack_inputs(inputs):
    if not isinstance(inputs, dict):
        raise KgnError(f"stacks_plan: inputs must be a mapping of the gpu_sharing_stacks settings, "
                       f"got {type(inputs).__name__}")
    unknown = sorted(set(inputs) - set(STACK_INPUTS))
    if unknown:
        raise KgnError(f"stacks_plan: unknown input(s) {', '.join(unknown)}; accepted: {', '.join(STACK_INPUTS)}")
    merged = {**copy.deepcopy(STACK_INPUTS), **{k: v for k, v in inputs.items() if v is not None}}
    if not isinstance(merged["manifest_dir"], str) or not merged["manifest_dir"].startswith("/"):
        raise KgnError(f"gpu_sharing_stacks_manifest_dir must be an absolute folder, got {merged['manifest_dir']!r}")
    merged["manifest_dir"] = merged["manifest_dir"].rstrip("/") or "/"
    if not isinstance(merged["images"], dict):
        raise KgnError(f"gpu_sharing_stacks_images must be a mapping component -> image, got {merged['images']!r}")
    for key in ("gpushare_mps", "samples", "allow_newer"):
        require_bool(merged[key], f"stacks_plan: {key}")
    if isinstance(merged["replicas"], str) and merged["replicas"].isdigit():
        merged["replicas"] = int(merged["replicas"])  # ansible-core 2.16 templates "{{ n | int }}" in a mapping to "4"
    if isinstance(merged["replicas"], bool) or not isinstance(merged["replicas"], int):
        raise KgnError(f"gpu_sharing_stacks_device_plugin_replicas must be a whole number, got {merged['replicas']!r}")
    return merged


def _problems(p):
    problems = stack_problems(p["stacks"], True, False)
    if p["sharing"] not in ("none", "time-slicing", "mps"):
        problems.append(f"gpu_sharing_stacks_device_plugin_sharing is {p['sharing']!r}; accepted: none, "
                        "time-slicing, mps")
    elif p["sharing"] != "none" and "nvidia_device_plugin" not in (p["stacks"] or []):
        problems.append(f"gpu_sharing_stacks_device_plugin_sharing is {p['sharing']} but nvidia_device_plugin is "
                        f"not in gpu_sharing_stacks")
    if p["mig_strategy"] not in MIG_STRATEGIES:
        problems.append(f"gpu_sharing_stacks_device_plugin_mig_strategy is {p['mig_strategy']!r}; accepted: "
                        f"{', '.join(MIG_STRATEGIES)}")
    elif p["mig_strategy"] != "none" and p["sharing"] == "mps":
        problems.append("the device plugin's MPS sharing does not run on MIG devices; set "
                        "gpu_sharing_stacks_device_plugin_mig_strategy to none or the sharing to time-slicing or none")
    if not 2 <= p["replicas"] <= 48:
        problems.append(f"gpu_sharing_stacks_device_plugin_replicas must be 2-48, got {p['replicas']}")
    if p["existing_device_plugin"] not in EXISTING_DEVICE_PLUGIN:
        problems.append(f"gpu_sharing_stacks_existing_device_plugin is {p['existing_device_plugin']!r}; accepted: "
                        f"{', '.join(EXISTING_DEVICE_PLUGIN)}")
    if problems:
        raise KgnError(f"Nothing was changed. Fix: {'; '.join(problems)}")


def _kubernetes(p):
    version = p["kubernetes_version"]
    if version in ("", None):
        raise KgnError("gpu_sharing_stacks_kubernetes_version is not set: set kubernetes_version in the inventory "
                       "to the cluster's version, quoted, such as \"1.23.1\". Nothing was changed.")
    try:
        kubernetes_minor(version, "gpu_sharing_stacks_kubernetes_version", newest=False)
    except KgnError as err:
        raise KgnError(f"{err}. Nothing was changed.") from None
    return manifests.manifest_api(version)


def _device_plugin(p):
    dp = manifests.device_plugin(p["kubernetes_version"], p["device_plugin_release"] or None)
    if (p["sharing"] == "time-slicing" and not dp["time_slicing"]) or (p["sharing"] == "mps" and not dp["mps"]):
        raise KgnError(
            f"NVIDIA device plugin {dp['release']} does not support {p['sharing']} sharing (time-slicing needs "
            f"v0.12.0+, MPS v0.15.0+); set gpu_sharing_stacks_device_plugin_release to a newer tag or change "
            f"gpu_sharing_stacks_device_plugin_sharing. Nothing was changed.")
    return dp


def _images(p, dp):
    images = {}
    for stack in p["stacks"]:
        keys = list(IMAGE_KEYS[stack])
        if stack == "hami":
            keys.append(hami.certgen_image_key(kubernetes_minor(p["kubernetes_version"], "kubernetes_version", False)))
        release_image = {"nvidia_device_plugin": dp["image"] if dp else "",
                         # the HAMi release of the cluster's version (hami.RELEASES)
                         "hami": hami.release_facts(kubernetes_minor(p["kubernetes_version"], "kubernetes_version",
                                                                     False))["hami_image"] if stack == "hami" else ""}
        for key in keys:
            image = p["images"].get(key) or release_image.get(key, "") or {"nvidia_dra": dra.IMAGE}.get(key, "")
            if not image:
                raise KgnError(f"gpu_sharing_stacks_images.{key} is empty, but stack {stack} runs it; set the image "
                               f"(see roles/gpu_sharing_stacks/defaults/main.yml). Nothing was changed.")
            images[key] = stack_image(image, p["registry_mirror"])
    return images


def _in_cluster_scheduler(p, name, extenders, image, setting):
    """A kube-scheduler that runs as a pod in the cluster (the second scheduler of a managed control plane, and
    HAMi's): its image (``image``, else registry.k8s.io/kube-scheduler of the cluster's own release), its config
    for this Kubernetes version from scheduler.scheduler_config (the kube-scheduler role's code) with ``extenders``,
    one profile ``name`` and its own lease, and the command that reads it. ``setting`` names the input that
    chose this scheduler, for the messages.

    A Policy-era version (before 1.19) gets the Policy file with the profile and lease as flags (kube-scheduler
    then reads no --config, and finds the API server through the pod's service account); callers refuse it
    where it does not apply.
    """
    version = p["kubernetes_version"]
    variant = scheduler.scheduler_variant(version, p["allow_newer"])
    if not image:
        match = re.match(r"^v?(\d+\.\d+\.\d+)", str(version))
        if not match:
            raise KgnError(
                f"gpu_sharing_stacks_kubernetes_version {version} has no patch release, so the image "
                f"registry.k8s.io/kube-scheduler:v<version> cannot be named; set kubernetes_version to the control "
                f"plane's full version (e.g. 1.25.4) or set {setting}. Nothing was changed.")
        image = f"registry.k8s.io/kube-scheduler:v{match.group(1)}"
    if variant["format"] == "policy":
        config = scheduler.scheduler_config(version, extenders, allow_newer=p["allow_newer"])
        config_file = "config.json"
        command = ["/usr/local/bin/kube-scheduler", f"--policy-config-file={SECONDARY_CONFIG_DIR}/{config_file}",
                   f"--scheduler-name={name}", "--leader-elect=true", "--leader-elect-resource-lock=leases",
                   f"--leader-elect-resource-name={name}", f"--leader-elect-resource-namespace={p['namespace']}"]
    else:
        # Profile and leader election go in as the "existing" config, so the kube-scheduler role's code merges in
        # the extenders (one source of truth); its own lease, never the cluster scheduler's "kube-scheduler".
        settings = {
            "apiVersion": variant["api_version"],
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": True, "resourceLock": "leases", "resourceName": name,
                               "resourceNamespace": p["namespace"]},
            "profiles": [{"schedulerName": name}],
        }
        # kubeconfig "" with in_cluster: the pod's service account (client-go in-cluster config)
        config = scheduler.scheduler_config(version, extenders, "", settings, True, allow_newer=p["allow_newer"])
        config_file = "config.yaml"
        command = ["/usr/local/bin/kube-scheduler", f"--config={SECONDARY_CONFIG_DIR}/{config_file}"]
    return {
        "enabled": True,
        "name": name,
        "image": stack_image(image, p["registry_mirror"]),
        "variant": {k: variant[k] for k in ("format", "kind", "api_version", "variant_minor", "newer_than_known")},
        "version_note": variant["note"],
        "config": config,
        "config_dir": SECONDARY_CONFIG_DIR,
        "config_file": config_file,
        "command": command,
        "config_checksum": hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest(),
    }


def _secondary(p, catalog):
    enabled = secondary_scheduler(p["secondary_scheduler"], p["control_plane_hosts"]) and any(
        entry["extender"] for entry in catalog.values())
    if not enabled:
        return {"enabled": False}
    version = p["kubernetes_version"]
    if scheduler.scheduler_variant(version, p["allow_newer"])["format"] == "policy":
        raise KgnError(
            f"gpu_sharing_stacks_secondary_scheduler: the second kube-scheduler is configured with a "
            f"KubeSchedulerConfiguration (Kubernetes 1.19+), but gpu_sharing_stacks_kubernetes_version is {version}, "
            f"which takes extenders from a Policy file only. Upgrade the cluster, or add the control-plane hosts to "
            f"kube_control_plane and set gpu_sharing_stacks_secondary_scheduler to false. Nothing was changed.")
    extenders = stack_extenders(p["stacks"], stack_service_urls(p["stacks"], p["namespace"]))
    return _in_cluster_scheduler(p, p["secondary_scheduler_name"], extenders, p["secondary_scheduler_image"],
                                 "gpu_sharing_stacks_secondary_scheduler_image")


def _hami(p):
    """HAMi's own kube-scheduler (the in-cluster scheduler with its extender on 127.0.0.1 in the same pod), and
    what its templates need. Refused below HAMi's supported Kubernetes range."""
    version = p["kubernetes_version"]
    minor = kubernetes_minor(version, "gpu_sharing_stacks_kubernetes_version", newest=False)
    if minor < hami.OLDEST_MINOR:
        raise KgnError(
            f"HAMi supports Kubernetes 1.{hami.OLDEST_MINOR} and newer (v2.6.0 from 1.18, {hami.RELEASE} from 1.23: "
            f"their READMEs, Prerequisites), but gpu_sharing_stacks_kubernetes_version is "
            f"{version}. Upgrade the cluster, or choose gpushare, nano_gpu or nvidia_device_plugin in "
            f"gpu_sharing_stacks. Nothing was changed.")
    entry = _CATALOG["hami"]["own_scheduler"]
    own = _in_cluster_scheduler(p, entry["name"], [copy.deepcopy(entry["extender"])],
                                p["images"].get("hami_kube_scheduler") or "",
                                "gpu_sharing_stacks_images.hami_kube_scheduler")
    own.update(hami.release_facts(minor))
    own.update(webhook=entry["webhook"], tls_secret=hami.TLS_SECRET, dra_rule=dict(hami.DRA_RULE),
               service=dict(hami.SERVICE), node_labels=dict(hami.NODE_LABELS),
               certgen_image_key=hami.certgen_image_key(minor))
    return own


def _template_stack(template):
    folder, _, rest = template.partition("/")
    return rest[: -len(".yml.j2")] if folder == "samples" else folder


def _manifest_list(p, dp, secondary, dra_plan):
    templates = [NAMESPACE_TEMPLATE] if p["namespace"] != "kube-system" else []
    for stack in p["stacks"]:
        variant = {"nvidia_device_plugin": f"{dp['variant']}-{p['sharing']}" if dp else "",
                   "gpushare": "mps" if p["gpushare_mps"] else "plain",
                   "nvidia_dra": "gpus-compute-domains" if dra_plan.get("compute_domains") else "gpus"
                   }.get(stack, "default")
        templates += TEMPLATES[stack][variant]
    if secondary["enabled"]:
        templates += SECONDARY_TEMPLATES
    if p["samples"]:
        templates += [f"samples/{stack}.yml.j2" for stack in p["stacks"]]
    return [{"path": t[: -len(".j2")], "template": t, "stack": _template_stack(t)} for t in templates]


def _ours(obj):
    labels = obj.get("labels") or {}
    return all(labels.get(key) == value for key, value in MANAGED_BY.items())


def _identity(obj):
    return (obj["group"], obj["kind"], obj.get("namespace") or "", obj["name"])


def _shown(obj):
    where = f"{obj['namespace']}/" if obj.get("namespace") else ""
    return f"{obj['kind']} {where}{obj['name']}"


def _image_name(image):
    """``nvcr.io/nvidia/k8s-device-plugin:v0.14.1`` -> ``k8s-device-plugin`` (also with a port or a digest)."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def _device_plugin_images(daemonset):
    """Images of the DaemonSet's containers that run an NVIDIA device plugin."""
    images = []
    for container in daemonset.get("containers") or []:
        words = " ".join(container.get("command", []) + container.get("args", []))
        if (_image_name(container.get("image", "")) in DEVICE_PLUGIN_IMAGES
                and not any(program in words for program in NOT_A_DEVICE_PLUGIN)):
            images.append(container["image"])
    return images


def advertising_nvidia_gpu(stacks):
    """The chosen stacks that would hand out the GPUs another NVIDIA device plugin advertises as nvidia.com/gpu:
    those whose device plugin advertises it too, and nvidia_dra, whose kubelet plugin publishes the same GPUs. Only
    they can meet another one (stack_conflicts), so the cluster is looked at only for them."""
    return [s for s in _stack_list(stacks) if NVIDIA_GPU in _CATALOG[s]["resources"] or s == "nvidia_dra"]


def stack_conflicts(stacks, found):
    """The NVIDIA device plugins already in the cluster that this project did not deploy, for each chosen stack
    that advertises nvidia.com/gpu too (one GPU would be advertised twice); [] when no chosen stack does.

    ``found``: ``{daemonsets, cluster_policies}``: every DaemonSet of the cluster and every ClusterPolicy of the
    GPU Operator, as api.api_objects gives them. A DaemonSet labelled as this project's is never a conflict.
    Returns ``[{stack, resource, gpu_operator, found, remove}]``: one for the GPU Operator (its ClusterPolicies
    with the device plugin on, and the device plugin DaemonSets they own), one per other device plugin DaemonSet;
    ``found`` names it (namespace/name, images, labels, owners), ``remove`` says how to take it away.
    """
    wanting = advertising_nvidia_gpu(stacks)
    if not isinstance(found, dict):
        raise KgnError(f"stack_conflicts: found must be a mapping (daemonsets, cluster_policies), got {found!r}")
    operator = [f"ClusterPolicy {policy['name']}" for policy in found.get("cluster_policies") or []
                if policy.get("device_plugin_enabled")]
    others = []
    for ds in found.get("daemonsets") or []:
        images = [] if _ours(ds) else _device_plugin_images(ds)
        if not images:
            continue
        where = f"{ds['namespace']}/{ds['name']}"
        owners = ds.get("owners") or []
        if any(owner.startswith("ClusterPolicy/") for owner in owners):
            operator.append(f"DaemonSet {where}, image {', '.join(images)}")
            continue
        labels = ", ".join(f"{k}={v}" for k, v in sorted((ds.get("labels") or {}).items())) or "none"
        owned = f"; owned by {', '.join(owners)}" if owners else ""
        others.append({
            "gpu_operator": False,
            "found": f"DaemonSet {where} (image {', '.join(images)}; labels {labels}{owned})",
            "remove": f"kubectl delete daemonset -n {ds['namespace']} {ds['name']}, or, for a provider's managed "
                      f"add-on, switch it off in the provider's settings: deleted, it comes back",
        })
    if operator:
        others.insert(0, {"gpu_operator": True, "found": f"the NVIDIA GPU Operator ({'; '.join(operator)})",
                          "remove": "uninstall the GPU Operator, or set devicePlugin.enabled: false in its "
                                    "ClusterPolicy"})
    return [dict(conflict, stack=stack, resource=NVIDIA_GPU) for stack in wanting for conflict in others]


def _conflict_text(conflict):
    also = (" (it also manages the driver and the container toolkit of those nodes)"
            if conflict["gpu_operator"] else "")
    return (f"{conflict['found']} already advertises {conflict['resource']} on the cluster's GPU nodes{also}; a "
            f"second device plugin for the same resource would double-count GPUs. Choose one: keep it and leave "
            f"{conflict['stack']} out of gpu_sharing_stacks; replace it ({conflict['remove']}; then run again); or "
            f"set gpu_sharing_stacks_existing_device_plugin: adopt to keep it and deploy the rest")


def _adopted(p, api, assumed):
    """The chosen stacks another device plugin already serves, to leave out of the plan (existing_device_plugin
    adopt): ``[{stack, resource, found: [...]}]``. Refused (KgnError, nothing changed) when existing_device_plugin
    is refuse, when the cluster's DaemonSets could not be read, and when the adopted stack's sharing setting
    would not reach the adopted device plugin."""
    if not api.get("reachable") or not advertising_nvidia_gpu(p["stacks"]):
        return []  # nothing is applied, or no chosen stack advertises what another device plugin does
    components = api.get("components")
    if components is None:
        assumed.append("the DaemonSets of the cluster were not read: no check for another NVIDIA device plugin")
        return []
    if components.get("error") or not isinstance(components.get("daemonsets"), list):
        raise KgnError(
            f"Could not check whether another NVIDIA device plugin already runs in the cluster: "
            f"{components.get('error') or 'the DaemonSets were not listed'}. Give the kubeconfig the right to list "
            f"DaemonSets in every namespace (and nvidia.com ClusterPolicies), or leave nvidia_device_plugin out of "
            f"gpu_sharing_stacks. Nothing was changed.")
    conflicts = stack_conflicts(p["stacks"], components)
    if not conflicts:
        return []
    with_dra = [c for c in conflicts if c["stack"] == "nvidia_dra"]
    if with_dra:  # adopting another device plugin cannot stand in for DRA: refused either way
        found = "; ".join(c["found"] for c in with_dra)
        raise KgnError(
            f"Refused to deploy the NVIDIA DRA driver next to another device plugin: {found} advertises nvidia.com/gpu "
            f"on the cluster's GPU nodes, and the DRA kubelet plugin would publish the same GPUs in ResourceSlices, so "
            f"one GPU could go to two pods (NVIDIA's chart refuses the same: the DRA driver \"cannot be deployed "
            f"alongside the standard GPU device plugin on the same node\"). Choose one: turn that device plugin off "
            f"({with_dra[0]['remove']}; NVIDIA's guide for the DRA driver with the GPU Operator installs the Operator "
            f"with its device plugin disabled), then run again; or keep it and leave nvidia_dra out of "
            f"gpu_sharing_stacks. gpu_sharing_stacks_existing_device_plugin: adopt does not apply to nvidia_dra. "
            f"Nothing was changed (no manifest written, applied or deleted).")
    if p["existing_device_plugin"] == "refuse":
        raise KgnError("Refused to deploy a second device plugin: " + " | ".join(map(_conflict_text, conflicts))
                       + ". Nothing was changed (no manifest written, applied or deleted).")
    found = "; ".join(c["found"] for c in conflicts)
    if any(c["stack"] == "hami" for c in conflicts):
        raise KgnError(
            f"gpu_sharing_stacks_existing_device_plugin is adopt, but {found} cannot stand in for HAMi's device "
            f"plugin: HAMi's scheduler places pods by the GPU memory and cores its own device plugin registers on each "
            f"node. Replace it ({conflicts[0]['remove']}) and run again, or leave hami out of gpu_sharing_stacks. "
            f"Nothing was changed.")
    if p["sharing"] != "none":
        raise KgnError(
            f"gpu_sharing_stacks_existing_device_plugin is adopt, so {found} is kept instead of this project's "
            f"device plugin, but gpu_sharing_stacks_device_plugin_sharing is {p['sharing']}: that setting configures "
            f"only this project's device plugin and would not reach the adopted one. Set "
            f"gpu_sharing_stacks_device_plugin_sharing to none (and configure sharing where the adopted device plugin "
            f"is managed), or replace it ({conflicts[0]['remove']}) and run again. Nothing was changed.")
    return [{"stack": stack, "resource": NVIDIA_GPU, "found": [c["found"] for c in conflicts if c["stack"] == stack]}
            for stack in dict.fromkeys(c["stack"] for c in conflicts)]


def _desired_objects(p, planned):
    given = p["manifests"]
    if not isinstance(given, dict):
        raise KgnError(f"stacks_plan: manifests must map each planned manifest path to its rendered text, "
                       f"got {type(given).__name__}")
    wanted = [m["path"] for m in planned]
    missing = [path for path in wanted if path not in given]
    extra = sorted(set(given) - set(wanted))
    if missing or extra:
        raise KgnError(
            "the rendered manifests are not the planned ones"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; not planned: {', '.join(extra)}" if extra else "")
            + ". Render exactly the templates of the plan (the gpu_sharing_stacks role does). Nothing was changed.")
    objects = []
    for m in planned:
        for obj in manifests.manifest_objects(given[m["path"]], m["path"]):
            objects.append({**obj, "stack": m["stack"], "path": m["path"]})
    return objects


def _prune(api, desired, assumed):
    """Labelled objects of the API that no planned manifest holds, in removal order; refuses removing a CRD
    whose custom objects would go with it."""
    if not api.get("reachable") or not isinstance(api.get("objects"), list):
        assumed.append("the API was not read (no answer, or apply disabled): nothing is planned for removal")
        return []
    wanted = {_identity(obj) for obj in desired}
    remove = [obj for obj in api["objects"]
              if obj.get("kind") != "Namespace" and _ours(obj) and _identity(obj) not in wanted]
    custom = api.get("custom_objects") or {}
    ours_custom = [obj for listed in custom.values() for obj in listed.get("objects") or []
                   if _ours(obj) and _identity(obj) not in wanted]
    going = {_identity(obj) for obj in remove + ours_custom}
    blocked = []
    for crd in (obj for obj in remove if obj["kind"] == "CustomResourceDefinition"):
        listed = custom.get(crd["name"])
        stack = crd.get("labels", {}).get(STACK_LABEL) or "its stack"
        if listed is None or listed.get("error"):
            blocked.append(f"CustomResourceDefinition {crd['name']} ({stack}) is no longer wanted, but its custom "
                           f"objects could not be listed ({(listed or {}).get('error') or 'not read'}), so it is not "
                           f"known what deleting it would delete")
            continue
        remaining = [obj for obj in listed.get("objects") or [] if _identity(obj) not in going]
        if remaining:
            resource = f"{crd.get('crd', {}).get('plural') or crd['name'].split('.')[0]}." \
                       f"{crd.get('crd', {}).get('group') or crd['name'].split('.', 1)[-1]}"
            commands = "; ".join(
                f"kubectl delete {resource} {'-n ' + obj['namespace'] + ' ' if obj.get('namespace') else ''}"
                f"{obj['name']}" for obj in remaining)
            blocked.append(
                f"CustomResourceDefinition {crd['name']} is no longer wanted ({stack} is not in gpu_sharing_stacks), "
                f"but {len(remaining)} object(s) of it remain that this project did not create: "
                f"{', '.join(_shown(obj) for obj in remaining)}; deleting the CRD would delete them too. Delete them "
                f"yourself ({commands}) and run again, or keep {stack} in gpu_sharing_stacks")
    if blocked:
        raise KgnError("Refused to remove a CustomResourceDefinition: " + " | ".join(blocked)
                       + ". Nothing was changed (no manifest written, applied or deleted).")

    def order(obj):
        kind = obj["kind"]
        rank = (REMOVE_ORDER.index(kind) if kind in REMOVE_ORDER
                else len(REMOVE_ORDER) + 1 if kind == "CustomResourceDefinition" else len(REMOVE_ORDER))
        return rank, obj.get("namespace") or "", obj["name"]

    return [dict({k: obj.get(k, "") for k in ("group", "version", "kind", "namespace", "name")},
                 stack=(obj.get("labels") or {}).get(STACK_LABEL, ""))
            for obj in sorted(remove + ours_custom, key=order)]


def stacks_plan(inputs, observed=None):
    """The GPU-sharing stacks section of the host plan (the control-plane host that applies, or the control
    machine for a managed control plane).

    ``inputs``: the gpu_sharing_stacks settings (STACK_INPUTS: kubernetes_version, stacks, namespace,
    manifest_dir, device_plugin_release, images, registry_mirror, sharing, mig_strategy, replicas, gpushare_mps,
    secondary_scheduler, secondary_scheduler_name, secondary_scheduler_image, control_plane_hosts, samples,
    existing_device_plugin) and, from the module, ``manifests``: ``{relative path: rendered text}`` of the planned
    templates.
    ``observed``: ``files`` (relative paths of the manifests in manifest_dir) and ``api``: ``{reachable, error,
    objects (every object labelled app.kubernetes.io/managed-by=kube-gpu-nodes, as api.api_objects gives them),
    custom_objects {CRD name: {objects, error}}, components {daemonsets, cluster_policies, error} (every DaemonSet
    of the cluster and the GPU Operator's ClusterPolicies)}``; missing = not read, nothing removed, said in
    ``assumed``.

    ``hami``: HAMi's own kube-scheduler when hami is chosen (the same in-cluster scheduler code as ``secondary``,
    with HAMi's extender), else ``{enabled: false}``.

    Refused (KgnError, nothing changed): bad stacks or options, Kubernetes before 1.16 (1.18 for hami), a sharing
    mode the device plugin release lacks, a Policy-era version for the second kube-scheduler, removing a CRD while
    custom objects of it that this project did not create remain, and a chosen stack whose resource another
    device plugin already advertises (stack_conflicts) unless existing_device_plugin is adopt: then that stack's
    own manifests are left out and ``adopted`` names what is kept.
    """
    p = _stack_inputs(inputs)
    observed = observed or {}
    if not isinstance(observed, dict):
        raise KgnError("stacks_plan: observed must be a mapping (files, api)")
    plan = _template_plan(p)
    if p["manifests"] is None:
        return plan
    return _finished(plan, p, observed)


def _template_plan(p):
    """The first half of the plan: which templates, with the values they render (no manifest text yet)."""
    _problems(p)
    stacks = _stack_list(p["stacks"])
    p["stacks"] = stacks
    catalog = stack_catalog(stacks)
    api = _kubernetes(p) if stacks else None
    dp = _device_plugin(p) if "nvidia_device_plugin" in stacks else None
    policy = isolation.envvar_policy(p["envvar_unprivileged"], stacks, p["kubernetes_version"])
    secondary = _secondary(p, catalog) if stacks else {"enabled": False}
    own_scheduler = _hami(p) if "hami" in stacks else {"enabled": False}
    # the API server's discovery is read by the module (finish_plan): until then the version's resource.k8s.io
    dra_plan = dra.dra_plan(p, None) if "nvidia_dra" in stacks else {"enabled": False}
    return {
        "kubernetes_version": p["kubernetes_version"],
        "stacks": stacks,
        "namespace": p["namespace"],
        "manifest_dir": p["manifest_dir"],
        "api": api,
        "device_plugin": dp,
        # who may ask for GPUs by NVIDIA_VISIBLE_DEVICES, and the device list strategy that works with it
        "isolation": {**policy, "device_list_strategy": isolation.device_list_strategy(policy)},
        "catalog": catalog,
        "images": _images(p, dp),
        "sample_images": {s: stack_image(SAMPLE_IMAGES[s], p["registry_mirror"]) for s in stacks} if p["samples"]
        else {},
        "sharing": p["sharing"],
        "mig_strategy": p["mig_strategy"],
        "replicas": p["replicas"],
        "gpushare_mps": p["gpushare_mps"],
        "existing_device_plugin": p["existing_device_plugin"],
        "secondary": secondary,
        "hami": own_scheduler,
        "dra": dra_plan,
        "samples": p["samples"],
        "labels": {"managed_by": dict(MANAGED_BY), "stack": STACK_LABEL},
        "manifests": _manifest_list(p, dp, secondary, dra_plan) if stacks else [],
        "files": [],
        "objects": [],
        "remove_files": [],
        "prune": [],
        "adopted": [],
        "assumed": [dra_plan["assumed"]] if dra_plan.get("assumed") else [],
    }


def finish_plan(plan, manifests, observed=None):
    """The second half of the plan, from the template plan (``stacks_plan`` without manifests, as the
    k8s_manifests action planned it on the controller), the manifests rendered from it (``{path: text}``) and
    what the module read (``observed``, as in ``stacks_plan``): the objects, the files to write, what another
    device plugin already serves (adopted), and what to remove. The template plan is not planned again."""
    if not isinstance(plan, dict) or not isinstance(plan.get("manifests"), list) \
            or "existing_device_plugin" not in plan:
        raise KgnError("finish_plan: plan must be the stacks plan without manifests (stacks_plan(settings))")
    observed = observed or {}
    if not isinstance(observed, dict):
        raise KgnError("stacks_plan: observed must be a mapping (files, api)")
    p = {key: plan[key] for key in ("stacks", "manifest_dir", "sharing", "existing_device_plugin")}
    p["manifests"] = manifests
    return _finished(copy.deepcopy(plan), p, observed)


def _finished(plan, p, observed):
    assumed = plan["assumed"]
    served = (observed.get("api") or {}).get("served") if observed else None
    if (plan.get("dra") or {}).get("enabled") and served is not None:
        # what the API server's discovery serves: the version the templates rendered, or a refusal naming the gates
        api = dra.resource_api(plan["kubernetes_version"], served.get(dra.RESOURCE_GROUP, []),
                               plan["dra"]["resource_api"])
        if plan["dra"].get("assumed") in assumed:
            assumed.remove(plan["dra"]["assumed"])
        plan["dra"]["assumed"] = api["assumed"]
    planned = plan["manifests"]
    objects = _desired_objects(p, planned)
    adopted = _adopted(p, observed.get("api") or {}, assumed) if observed else []
    if adopted:  # the adopted stacks' own manifests are left out; their samples stay (they use the adopted one)
        left_out = {a["stack"] for a in adopted}
        planned = [m for m in planned if m["template"].split("/", 1)[0] not in left_out]
        objects = [o for o in objects if o["path"] in {m["path"] for m in planned}]
    plan.update(manifests=planned, objects=objects, adopted=adopted)
    plan["files"] = [{"path": f"{p['manifest_dir']}/{m['path']}", "content": p["manifests"][m["path"]],
                      "mode": "0644", "stack": m["stack"]} for m in planned]
    if not observed:
        assumed.append("nothing was read from the host or the API (a render): no file or object is planned for "
                       "removal")
        return plan
    files = observed.get("files")
    if isinstance(files, list):
        keep = {m["path"] for m in planned}
        plan["remove_files"] = sorted(f"{p['manifest_dir']}/{f}" for f in files if f not in keep)
    else:
        assumed.append(f"the files in {p['manifest_dir']} were not read: none is planned for removal")
    plan["prune"] = _prune(observed.get("api") or {}, objects, assumed)
    return plan


def stacks_labelled(labels):
    """The stacks whose selector labels a node carries (its labels as the API shows them): what it runs now."""
    labels = labels or {}
    return [name for name, entry in _CATALOG.items()
            if entry["node_labels"] and all(labels.get(k) == v for k, v in entry["node_labels"].items())]


def dra_switch(node, labels, wanted, pods, cluster_stacks):
    """dra.switch_plan for a node as the API shows it: ``labels`` (the Node's labels: which stacks it runs now),
    ``wanted`` (its gpu_sharing_stacks), ``pods`` (``kubectl get pods --field-selector spec.nodeName=<node> -o json``:
    those that hold GPUs must leave first) and ``cluster_stacks`` (the control plane's gpu_sharing_stacks)."""
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig.mig import mig_gpu_pods

    return dra.switch_plan(node, stacks_labelled(labels), _stack_list(wanted), mig_gpu_pods(pods),
                           _stack_list(cluster_stacks))
