"""Checks of a GPU node that runs NVIDIA's DRA driver (the nvidia_dra stack), on the live system: the kubelet plugin
registered with the kubelet (the node's plugins_registry), its ResourceSlices publishing one device per GPU or MIG
device the node shows, the release's DeviceClasses in the API, and no device plugin still advertising nvidia.com/gpu
on the node. The decisions are dra.py's (registration_problems, slice_problems, device_class_problems,
allocatable_problems); here they become checks with causes (plugins/module_utils/verify/checks.py says how a check is
written), and the report's ``dra`` column.

What the checks read (verify.verify_host builds it): ``seen["dra"]`` (``view``: the node's GPUs and its
plugins_registry), ``seen["api"]["dra"]`` (``api_part``: the ResourceSlices and DeviceClasses of the API server, read
once per API server with the other kinds, verify.API_RESOURCES) and ``want["dra"]`` (``expected``: whether the node
runs nvidia_dra, and what the recorded stacks plan deployed).
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.report import column
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks as catalog
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import (
    GPU_NODE,
    NO_GPU,
    NOT_READ,
    api_view,
    cause,
    check,
    failed,
    ok,
    skipped,
)

SLICES = "resourceslices.resource.k8s.io"
CLASSES = "deviceclasses.resource.k8s.io"
# What verify reads of the API for these checks (verify.API_RESOURCES adds them to its read).
API_RESOURCES = (SLICES, CLASSES)
KUBELET_PLUGIN = dra.NAME + "-kubelet-plugin"
CHECKS = ("dra_registered", "dra_resourceslices", "dra_device_classes", "dra_no_device_plugin")
# The concerns whose change makes these checks pass (the node's labels select the kubelet plugin's DaemonSet).
CONCERNS = ("node_labels", "stacks")
NOT_SERVED = "the API server does not serve resource.k8s.io"


def api_part(listed):
    """The DRA kinds of one k8s_read answer (``listed``: its ``resources``): per kind ``{read, served, error,
    items}``; ``read`` False when the answer has no such kind (an older read)."""
    part = {}
    for key, resource in (("resourceslices", SLICES), ("deviceclasses", CLASSES)):
        entry = (listed or {}).get(resource)
        if not isinstance(entry, dict):
            part[key] = {"read": False, "served": False, "error": "", "items": []}
            continue
        part[key] = {"read": True, "served": bool(entry.get("served")), "error": entry.get("error") or "",
                     "items": list(entry.get("items") or [])}
    return part


def gpus(gpu_facts, states):
    """The node's GPUs as the DRA checks compare them with what is published: ``gpu_facts`` when the inventory gives
    them (gpu_node_verify_gpu_facts), else what the nvidia_driver concern recorded live (its gpu_facts answer);
    the MIG mode and MIG device count of each GPU from the nvidia_mig concern's live state when it recorded one (it
    runs after the driver, so a MIG layout it changed is newer there). None when nothing says."""
    facts = gpu_facts or ((((states or {}).get("nvidia_driver") or {}).get("live") or {}).get("gpu")) or None
    if not isinstance(facts, dict):
        return None
    found = [dict(g) for g in facts.get("gpus") or [] if isinstance(g, dict)]
    mig_state = (states or {}).get("nvidia_mig") or {}
    if not gpu_facts and ((mig_state.get("plan") or {}).get("managed")):
        live = {g.get("index"): g for g in (mig_state.get("live") or {}).get("gpus") or [] if isinstance(g, dict)}
        for gpu in found:
            now = live.get(gpu.get("index"))
            if now is not None:
                # mig.current_state: one profile per GPU instance, each with its one compute instance (a MIG device)
                gpu.update(mig_mode_current="Enabled" if now.get("mig") else "Disabled",
                           mig_device_count=len(now.get("profiles") or []))
    return found


def view(probe, states, gpu_facts=None):
    """``seen["dra"]``: ``{gpus (None: not read), gpus_from, registry ({dir, dir_exists, entries}, None: the host
    was not reached)}``."""
    registry = None if probe is None else (probe or {}).get("kubelet_plugins_registry")
    return {"gpus": gpus(gpu_facts, states),
            "gpus_from": "gpu_node_verify_gpu_facts" if gpu_facts else "the nvidia_driver concern's recorded GPUs",
            "registry": registry if isinstance(registry, dict) or registry is None else None}


def expected(stacks, states):
    """``want["dra"]``: whether the node runs nvidia_dra, and from the recorded stacks plan (kgn_state_stacks) the
    resource.k8s.io version, whether compute domains are deployed (two more DeviceClasses and a second registration)
    and the namespace; the chart's defaults where no plan was recorded (``assumed`` says so)."""
    plan = ((states or {}).get("stacks") or {}).get("plan") or {}
    recorded = plan.get("dra") if isinstance(plan.get("dra"), dict) and plan["dra"].get("enabled") else None
    compute_domains = (recorded or {}).get("compute_domains")
    return {"enabled": "nvidia_dra" in (stacks or []),
            "resource_api": (recorded or {}).get("resource_api") or "",
            "compute_domains": True if compute_domains is None else bool(compute_domains),
            "namespace": plan.get("namespace") or "kube-system",
            "assumed": "" if recorded else "no recorded stacks plan: the chart's default (compute domains on) is "
                                           "expected"}


def _runs_dra(seen, want):
    """Whether the node runs nvidia_dra: the DRA checks have no line on any other node."""
    return bool((want.get("dra") or {}).get("enabled"))


def _present(seen):
    """Whether the node has GPUs the kubelet plugin publishes (the GPUs the DRA view read, else the GPU check's)."""
    found = (seen.get("dra") or {}).get("gpus")
    return bool(found) if found is not None else bool((seen.get("gpu") or {}).get("present"))


def _daemonset(seen, want):
    namespace = (want.get("dra") or {}).get("namespace")
    for found in (seen.get("api") or {}).get("daemonsets") or []:
        if found.get("name") == KUBELET_PLUGIN and found.get("namespace") in (namespace, None):
            return found
    return None


def _node(seen):
    """The node's API object ({labels, allocatable, ...}), None when the API was not read or has no such node."""
    return (api_view(seen) or {}).get("node")


def _plugin_evidence(seen, want):
    ds = _daemonset(seen, want)
    wanted = want.get("dra") or {}
    labels = (_node(seen) or {}).get("labels")
    return {"namespace": wanted.get("namespace"), "daemonset": KUBELET_PLUGIN,
            "daemonset_found": ds is not None if api_view(seen) is not None else None,
            "ready": f"{ds.get('ready')}/{ds.get('desired')}" if ds else "",
            "node_name": (seen.get("api") or {}).get("node_name") or want.get("host"),
            # the kubelet plugin's DaemonSet selects this label (None: the node was not read)
            "labels_missing": None if labels is None else any(str(labels.get(k)) != v
                                                              for k, v in dra.NODE_LABELS.items())}


SOURCE_DRIVER = (f"NVIDIA's DRA driver {dra.RELEASE} ({dra.REPOSITORY} at {dra.COMMIT[:8]}): "
                 f"deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml, "
                 f"cmd/gpu-kubelet-plugin/driver.go; docs/stacks.md (nvidia_dra)")
LOGS = ("`kubectl -n {namespace} get pods -o wide -l " + dra.NAME + "-component=kubelet-plugin` for the pod on "
        "{node_name}, and its logs (`kubectl -n {namespace} logs <pod> -c gpus`)")

PLUGIN_CAUSES = [
    cause("dra_not_deployed", when={"daemonset_found": False},
          cause="the DRA driver is not deployed in the cluster: there is no DaemonSet {namespace}/{daemonset}, so no "
                "kubelet plugin runs on this node",
          fix="add nvidia_dra to the control plane's gpu_sharing_stacks and run playbooks/gpu_sharing_stacks.yml",
          source=SOURCE_DRIVER),
    cause("dra_label_missing", when={"labels_missing": True},
          cause="the kubelet plugin's DaemonSet selects nodes labelled kube-gpu-nodes.io/nvidia-dra=true, and this "
                "node lacks the label, so no kubelet plugin pod runs here",
          fix="fix \"expected node labels present\" first: run playbooks/nvidia_dra_switch.yml -l <node> for a node "
              "that moves from a device plugin, else playbooks/gpu_node_labels.yml",
          source=SOURCE_DRIVER),
    cause("dra_plugin_not_running", fallback=True,
          cause="the kubelet plugin pod on {node_name} is not running or not ready (DaemonSet {daemonset}: "
                "{ready} ready): it waits for the driver in its init container, cannot write CDI specs (the "
                "runtime's CDI mode is off), or crash-loops",
          fix=LOGS + "; fix the driver and runtime checks above first, then delete the pod so it starts again",
          source=SOURCE_DRIVER),
]


REGISTRY_CAUSE = cause(
    "dra_registry_missing", when={"dir_exists": False},
    cause="{dir} does not exist on the node: the kubelet does not run there, or runs with another --root-dir, so no "
          "plugin can register",
    fix="check `systemctl status kubelet`; with another root dir set gpu_node_verify_plugins_registry_dir to its "
        "plugins_registry",
    source="vendor/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go of NVIDIA's DRA driver "
           f"{dra.RELEASE} (registration socket {dra.KUBELET_REGISTRY}/<driver>-reg.sock)")


@check("dra_registered", "DRA kubelet plugin registered with the kubelet", kinds=(GPU_NODE,), concerns=CONCERNS,
       causes=[REGISTRY_CAUSE, *PLUGIN_CAUSES], applies=_runs_dra)
def dra_registered(seen, want, done):
    registry = (seen.get("dra") or {}).get("registry")
    evidence = _plugin_evidence(seen, want)
    if registry is None:
        return skipped(NOT_READ, **evidence)
    evidence.update(dir=registry.get("dir") or dra.KUBELET_REGISTRY, dir_exists=bool(registry.get("dir_exists")),
                    entries=list(registry.get("entries") or []))
    if not _present(seen):
        return skipped(NO_GPU, **evidence)
    problems = dra.registration_problems(evidence["entries"], (want.get("dra") or {}).get("compute_domains", True))
    evidence["problems"] = problems
    if problems:
        return failed("; ".join(problems), **evidence)
    return ok("registered: " + ", ".join(e for e in evidence["entries"] if e.endswith("-reg.sock")), **evidence)


def _kind(seen, key):
    """(items, None) of a DRA kind of the API, or (None, the result that says why it cannot be checked)."""
    entry = (api_view(seen).get("dra") or {}).get(key) or {}
    if not entry.get("read"):
        return None, skipped(f"skipped: {key} not read from the API", served=None)
    if not entry.get("served"):
        return None, failed(f"{NOT_SERVED} (no {key}): Dynamic Resource Allocation is off in this cluster",
                            served=False, error=entry.get("error") or "")
    if entry.get("error"):
        return None, skipped(f"skipped: the API did not list {key}: {entry['error']}", served=True,
                             error=entry["error"])
    return entry.get("items") or [], None


def _not_served_cause(what):
    return cause(
        f"dra_{what}_api_not_served", when={"served": False},
        cause="the API server serves no resource.k8s.io: Dynamic Resource Allocation is off (before 1.34 it is beta "
              "and off by default; from 1.34 it was turned off by hand)",
        fix="turn DynamicResourceAllocation on (its feature gate on kube-apiserver, kube-controller-manager, "
            "kube-scheduler and kubelet, and the resource.k8s.io versions in kube-apiserver's --runtime-config on "
            "1.32 and 1.33), or leave nvidia_dra out of gpu_sharing_stacks; playbooks/gpu_sharing_stacks.yml refuses "
            "nvidia_dra on such a cluster and names what to turn on",
        source=f"docs/prerequisites.md of NVIDIA's DRA driver {dra.RELEASE}; "
               "plugins/module_utils/stacks/dra.py resource_api")


SLICE_CAUSES = [
    _not_served_cause("slices"),
    cause("dra_slices_not_published", when={"published": 0}, with_failed=["dra_registered"],
          cause="the kubelet plugin publishes no ResourceSlice for {node_name} because it is not registered with the "
                "kubelet (see \"DRA kubelet plugin registered with the kubelet\")",
          fix="fix \"DRA kubelet plugin registered with the kubelet\" first", source=SOURCE_DRIVER),
    cause("dra_slices_none", when={"published": 0}, fallback=True,
          cause="no ResourceSlice of driver gpu.nvidia.com names node {node_name}: the kubelet plugin does not run "
                "there, or it failed before it published (it publishes once it has enumerated the GPUs through NVML)",
          fix=LOGS, source=SOURCE_DRIVER),
    cause("dra_slices_pool_incomplete", when={"pool_incomplete": True},
          cause="the node's pool has fewer ResourceSlices than it states: the kubelet plugin is still publishing, or "
                "stopped half-way",
          fix="wait a minute and verify again; if it stays so, " + LOGS, source=SOURCE_DRIVER),
    cause("dra_slices_differ", when={"published": {"not": 0}}, fallback=True,
          cause="what the kubelet plugin published ({published} device(s)) is not one device per GPU or MIG device "
                "that {gpus_from} show ({gpus} GPU(s)): the GPUs or their MIG layout changed since it published, or "
                "the GPU facts are stale",
          fix="re-run the node's apply (site.yml -l <node>) or playbooks/verify.yml so the GPU facts are fresh; if "
              "it still differs, delete the kubelet plugin pod on the node so it publishes again (" + LOGS + ")",
          source="cmd/gpu-kubelet-plugin/nvlib.go of NVIDIA's DRA driver " + dra.RELEASE
                 + " (a GPU in MIG mode is not published, each of its MIG devices is)"),
]


@check("dra_resourceslices", "DRA ResourceSlices publish one device per GPU or MIG device", kinds=(GPU_NODE,),
       concerns=CONCERNS, causes=SLICE_CAUSES, applies=_runs_dra, reads=("api",))
def dra_resourceslices(seen, want, done):
    items, why = _kind(seen, "resourceslices")
    if why is not None:
        return why
    node_name = (seen.get("api") or {}).get("node_name") or want.get("host")
    found = (seen.get("dra") or {}).get("gpus")
    evidence = {"node_name": node_name, "served": True, "gpus_from": (seen.get("dra") or {}).get("gpus_from"),
                "namespace": (want.get("dra") or {}).get("namespace")}
    if found is None:
        return skipped("skipped: the node's GPUs were not read (no recorded nvidia_driver state)", **evidence)
    if not found:
        return skipped(NO_GPU, **evidence)
    published = dra.published_devices(items, node_name)
    problems = dra.slice_problems(items, node_name, {"gpus": found})
    evidence.update(gpus=len(found), published=len(published["devices"]), slices=published["slices"],
                    devices=[d["name"] for d in published["devices"]], problems=problems,
                    pool_incomplete=bool(published["problems"]))
    if problems:
        return failed("; ".join(problems), **evidence)
    return ok(f"{len(published['devices'])} device(s) for {len(found)} GPU(s): {', '.join(evidence['devices'])}",
              **evidence)


CLASS_SOURCE = ("deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml of NVIDIA's DRA driver "
                + dra.RELEASE)
CLASS_CAUSES = [
    _not_served_cause("classes"),
    cause("dra_classes_missing", when={"missing": {"nonempty": True}},
          cause="DeviceClass(es) {missing} do not exist: the DRA driver's objects were not applied (nvidia_dra is not "
                "in the control plane's gpu_sharing_stacks), or were deleted",
          fix="add nvidia_dra to the control plane's gpu_sharing_stacks and run playbooks/gpu_sharing_stacks.yml (it "
              "re-applies what was deleted)",
          source=CLASS_SOURCE),
    cause("dra_classes_changed", fallback=True,
          cause="a DeviceClass selects other devices than the release's CEL selector: it was edited, or applied by "
                "another installer (the upstream chart of another release)",
          fix="run playbooks/gpu_sharing_stacks.yml (it re-applies the release's DeviceClasses); remove the other "
              "installer's release first if there is one",
          source=CLASS_SOURCE),
]


@check("dra_device_classes", "DRA driver's DeviceClasses exist", kinds=(GPU_NODE,), concerns=("stacks",),
       causes=CLASS_CAUSES, applies=_runs_dra, reads=("api",))
def dra_device_classes(seen, want, done):
    items, why = _kind(seen, "deviceclasses")
    if why is not None:
        return why
    wanted = want.get("dra") or {}
    # only names and selectors are compared: extendedResourceName is dropped by an API server whose gate is off
    problems = dra.device_class_problems(items, wanted.get("resource_api") or "", wanted.get("compute_domains", True))
    names = [c["name"] for c in dra.device_classes("", wanted.get("compute_domains", True))]
    listed = {(o.get("metadata") or {}).get("name") for o in items}
    evidence = {"served": True, "expected": names, "missing": [n for n in names if n not in listed],
                "problems": problems, "assumed": wanted.get("assumed") or ""}
    if problems:
        return failed("; ".join(problems), **evidence)
    return ok(f"{len(names)} DeviceClasses: {', '.join(names)}", **evidence)


ALLOCATABLE_CAUSES = [
    cause("dra_device_plugin_label", when={"device_plugin_labels": {"nonempty": True}},
          cause="the node still carries {device_plugin_labels}, so a device plugin's DaemonSet still runs on it and "
                "advertises nvidia.com/gpu next to the DRA kubelet plugin: one GPU can go to two pods",
          fix="move the node with playbooks/nvidia_dra_switch.yml -l {node_name} (cordon, drain, labels, verify, "
              "uncordon)",
          source="deployments/helm/dra-driver-nvidia-gpu/templates/validation.yaml of NVIDIA's DRA driver "
                 + dra.RELEASE + " (not alongside the standard GPU device plugin on the same node)"),
    cause("dra_other_device_plugin", fallback=True,
          cause="a device plugin this project does not deploy (the GPU Operator's, or one installed by hand) "
                "advertises nvidia.com/gpu on {node_name} next to the DRA kubelet plugin: one GPU can go to two pods",
          fix="remove that device plugin from the node (the GPU Operator: install it with its device plugin "
              "disabled), then delete nvidia.com/gpu from the node's capacity by restarting the kubelet",
          source="deployments/helm/dra-driver-nvidia-gpu/templates/validation.yaml of NVIDIA's DRA driver "
                 + dra.RELEASE),
]


@check("dra_no_device_plugin", "no device plugin advertises nvidia.com/gpu on the DRA node", kinds=(GPU_NODE,),
       concerns=CONCERNS, causes=ALLOCATABLE_CAUSES, applies=_runs_dra, reads=("node",))
def dra_no_device_plugin(seen, want, done):
    node = _node(seen)
    node_name = (seen.get("api") or {}).get("node_name")
    labels = node.get("labels") or {}
    # the labels by which a device plugin stack of the catalog selects the node (every stack but nvidia_dra)
    others = catalog.stack_catalog([s for s in catalog.STACKS if s != "nvidia_dra"])
    selecting = sorted({f"{k}={v}" for e in others.values() for k, v in (e.get("node_labels") or {}).items()
                        if str(labels.get(k)) == str(v)})
    allocatable = node.get("allocatable") or {}
    problems = dra.allocatable_problems(node_name, allocatable)
    evidence = {"node_name": node_name, "allocatable": allocatable.get(dra.EXTENDED_RESOURCE),
                "device_plugin_labels": selecting, "problems": problems}
    if problems:
        return failed("; ".join(problems), **evidence)
    return ok(f"{dra.EXTENDED_RESOURCE}: {allocatable.get(dra.EXTENDED_RESOURCE, 'none')}", **evidence)


@column("dra", "DRA", gpu_node_only=True, before="stack")
def _dra_cell(observed, expected, checks):
    """ok when every DRA check passed, else the first problem (the first skip when nothing failed); '-' for a node
    without nvidia_dra."""
    mine = [c for c in checks if c.get("id") in CHECKS]
    if not mine:
        return "-"
    for statuses in (("failed", "pending", "waived"), ("warn", "skipped")):
        bad = [c for c in mine if c.get("status") in statuses]
        if bad:
            return bad[0].get("summary") or bad[0].get("status")
    return "ok"
