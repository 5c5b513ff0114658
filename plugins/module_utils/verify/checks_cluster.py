"""Checks of a GPU node as its cluster sees it: the device plugin registered with kubelet, and through the API the
node registered, its labels, its allocatable GPU resources and the GPUs a stack's device plugin registered
(plugins/module_utils/verify/checks.py says how a check is written)."""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels.labels import MANAGED_ANNOTATION
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import (
    CONTROL_PLANE,
    GPU_NODE,
    NO_API,
    NO_GPU,
    NOT_READ,
    SOURCE_NVML_DEFAULT_RUNTIME,
    api_view,
    cause,
    check,
    failed,
    ok,
    skipped,
)

PLUGIN = ("nvidia_container_toolkit", "container_runtime", "node_labels", "stacks")
FIX_LABELS_FIRST = "fix \"expected node labels present\" first"
SOURCE_GPUSHARE_LABEL = "docs/field-notes.md, kubeasz 1.23 with Aliyun gpushare (gpushare=true node label)"
SOURCE_DEVICE_PLUGINS = ("docs/field-notes.md, CentOS 7.9 + Docker 18.09 + Kubernetes 1.16; "
                         "https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/")


API_ANSWERS_CAUSES = [
    cause("api_server_down",
          cause=("the cluster's API server{at} did not answer: {error}. Nothing this run asks of the "
                 "cluster was done or checked there: labels, the stacks' apply, the pod smoke, the node's "
                 "registration and its GPU resources"),
          fix=("bring the API server back (on a kubeadm control plane: `crictl ps -a --name kube-apiserver` and its"
               " logs, the kubelet that runs it, etcd; a systemd one: `systemctl status kube-apiserver`), or point "
               "kube_api_host / kube_api_kubeconfig at one that answers; then re-run site.yml"),
          source="https://kubernetes.io/docs/tasks/debug/debug-cluster/ (a cluster that does not answer)"),
]


@check("api_answers", "the cluster's API server answers", kinds=(GPU_NODE, CONTROL_PLANE), causes=API_ANSWERS_CAUSES)
def api_answers(seen, want, done):
    """Asked only when the run read an API for this host (an inventory without any, or a render, reads none)."""
    api = seen.get("api") or {}
    if not api.get("read") and not api.get("reachable"):
        return None
    if api.get("reachable"):
        return ok("the API server answered")
    server = api.get("server") or ""
    error = " ".join(str(api.get("error") or "no answer").split())
    return failed(f"the API server{' ' + server if server else ''} did not answer: {error}",
                  server=server, at=f" at {server}" if server else "", error=error)


DEVICE_PLUGIN_SOCKET_CAUSES = [
    cause("plugin_nvml_runtime", with_failed=["runtime_default"],
          cause=("the device plugin cannot start on this node because the container runtime's default "
                 "is not nvidia (its log says \"Failed to initialize NVML: could not load NVML library "
                 "... did you set the docker default runtime to nvidia?\")"),
          fix=("fix \"container runtime's default runtime is nvidia\" first, then delete the device "
               "plugin pod on this node"),
          source=SOURCE_NVML_DEFAULT_RUNTIME),
    cause("plugin_not_scheduled_label", with_failed=["node_labels"],
          cause=("the device plugin DaemonSet selects nodes by label, and this node lacks the label, "
                 "so no plugin pod runs here"),
          fix=FIX_LABELS_FIRST,
          source=SOURCE_GPUSHARE_LABEL),
    cause("plugin_not_running", fallback=True,
          cause=("no device plugin is registered with kubelet (found: {sockets}): the stack's "
                 "DaemonSet is not deployed, its pod is not scheduled here (nodeSelector/tolerations),"
                 " or it is crash-looping"),
          fix=("`kubectl -n kube-system get pods -o wide` for the plugin pod on this node and read its"
               " logs; re-run playbooks/gpu_sharing_stacks.yml if the DaemonSet is missing"),
          source=SOURCE_DEVICE_PLUGINS),
]


def _no_device_plugin(want, evidence):
    """A node without a device plugin stack: NVIDIA's DRA driver serves its GPUs (its own checks, checks_dra.py,
    say whether it does: no row here), or no stack at all (skipped, said)."""
    if "nvidia_dra" in (want.get("stacks") or []):
        return None
    return skipped("skipped: no GPU-sharing stack on this node", **evidence)


@check("device_plugin_socket", "device plugin socket registered with kubelet", kinds=(GPU_NODE,), concerns=PLUGIN,
       causes=DEVICE_PLUGIN_SOCKET_CAUSES)
def device_plugin_socket(seen, want, done):
    device_plugin = seen.get("device_plugin")
    wanted = want.get("device_plugin_sockets") or []
    if device_plugin is None:
        return skipped(NOT_READ, sockets=[], expected=wanted, dir="")
    sockets = list(device_plugin.get("sockets") or [])
    evidence = {"sockets": sockets, "expected": wanted, "dir": device_plugin.get("dir") or ""}
    if not (seen.get("gpu") or {}).get("present"):
        return skipped(NO_GPU, **evidence)
    if not wanted:
        return _no_device_plugin(want, evidence)
    found = [s for s in sockets if any(re.fullmatch(p, s) for p in wanted)]
    if found:
        return ok(f"registered: {', '.join(found)}", **evidence)
    where = evidence["dir"] or "the kubelet device-plugins folder"
    return failed(f"no device plugin socket under {where} (found: {', '.join(sockets) or 'none'})", **evidence)


PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")

STACK_PODS_CAUSES = [
    cause("stack_image_not_pulled", when={"pulling": True},
          cause=("{pod} ({daemonset}) cannot get its image {image}: {reason} ({message}); the node cannot reach the "
                 "registry, the name or tag is wrong, or a pull secret is missing, and until it runs the stack "
                 "does nothing on this node"),
          fix=("`kubectl -n {namespace} describe pod {pod}`; mirror the image to a registry the node reaches (and "
               "point the stack's image at it), or load it into the node's engine on an air-gapped node"),
          source="https://kubernetes.io/docs/concepts/containers/images/#imagepullbackoff"),
    cause("stack_pod_not_running", fallback=True,
          cause="{pod} ({daemonset}) is {phase}: {reason} ({message})",
          fix="`kubectl -n {namespace} describe pod {pod}` and the logs of its containers",
          source="https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/"),
]


@check("stack_pods_running", "the stacks' pods on this node run", kinds=(GPU_NODE,), concerns=("stacks",),
       causes=STACK_PODS_CAUSES, applies="stacks", reads=("api",))
def stack_pods_running(seen, want, done):
    """The pods of the project's DaemonSets on this node that do not run, as the API server shows them (an image
    that cannot be pulled, a pod not scheduled, a failed one), one result per pod."""
    api = api_view(seen)
    pods = api.get("stack_pods_not_running")
    if pods is None:
        return skipped(NOT_READ, node_name=api.get("node_name"))
    if not pods:
        return ok(f"no pod of the stacks' DaemonSets on {api.get('node_name')} is waiting or failed",
                  node_name=api.get("node_name"))
    results = []
    for pod in pods:
        first = (pod.get("waiting") or [{}])[0]
        evidence = {"node_name": api.get("node_name"), "pod": pod["name"], "namespace": pod["namespace"],
                    "daemonset": pod.get("daemonset"), "phase": pod.get("phase"), "image": first.get("image") or "",
                    "reason": first.get("reason") or "unknown", "message": first.get("message") or "",
                    "pulling": first.get("reason") in PULL_REASONS, "waiting": pod.get("waiting") or []}
        image = f" ({evidence['image']})" if evidence["image"] else ""
        results.append(failed(f"{pod['namespace']}/{pod['name']} {evidence['phase']}: {evidence['reason']}{image}",
                              **evidence))
    return results


NODE_REGISTERED_CAUSES = [
    cause("node_not_registered",
          cause=("the API has no node named {node_name}: kubelet is not running, or the node "
                 "registered under another name"),
          fix=("check `systemctl status kubelet`; set gpu_node_verify_node_name for this host if its "
               "node name differs"),
          source=("https://kubernetes.io/docs/concepts/architecture/nodes/ (node names and "
                  "self-registration)")),
]


@check("node_registered", "node registered in the API", kinds=(GPU_NODE,), causes=NODE_REGISTERED_CAUSES)
def node_registered(seen, want, done):
    api = api_view(seen)
    if api is None:
        reason = (seen.get("api") or {}).get("error") or "no API server reachable from this inventory"
        return skipped(NO_API, reason=reason)
    if not api.get("node"):
        return failed(f"node {api.get('node_name')!r} is not registered in the API", node_name=api.get("node_name"))
    return ok(f"node {api.get('node_name')} registered", node_name=api.get("node_name"))


def _wanted_labels(seen, want):
    labels = want.get("labels") or {}
    if not (seen.get("gpu") or {}).get("present") and want.get("labels_without_gpu") is not None:
        # gpu_node_labels labels a GPU-less node only nvidia.com/gpu.present=false (require_gpu)
        labels = want["labels_without_gpu"]
    return labels


NODE_LABELS_CAUSES = [
    cause("label_missing", when={"missing": {"nonempty": True}},
          cause=("label(s) {missing} missing on node {node_name}: removed by hand (`kubectl label node"
                 " ... key-`), or the node object was re-created (labels set through the API are lost "
                 "when a node re-registers)"),
          fix=("re-run playbooks/gpu_node_labels.yml (or `kubectl label node {node_name} <key>=<value>`); "
               "to survive re-registration also pass them to kubelet with --node-labels "
               "(gpu_node_labels role option)"),
          source=("docs/field-notes.md, kubeasz 1.23 with Aliyun gpushare (kubectl label node <node> "
                  "gpushare=true); kubelet --node-labels, "
                  "https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/")),
    cause("label_wrong", fallback=True,
          cause="label value(s) differ from what the stacks select on: {wrong}",
          fix="re-run playbooks/gpu_node_labels.yml (it overwrites the project's labels only)",
          source=("https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/ "
                  "(nodeSelector); docs/stacks.md")),
]


@check("node_labels", "expected node labels present", kinds=(GPU_NODE,), concerns=("node_labels",),
       causes=NODE_LABELS_CAUSES, reads=("node",))
def node_labels(seen, want, done):
    api = api_view(seen)
    labels = api["node"].get("labels") or {}
    wanted = _wanted_labels(seen, want)
    missing = sorted(k for k in wanted if k not in labels)
    wrong = sorted(k for k, v in wanted.items() if k in labels and str(labels[k]) != str(v))
    managed = [k for k in str((api["node"].get("annotations") or {}).get(MANAGED_ANNOTATION) or "").split(",")
               if k in labels]
    evidence = {"missing": missing, "wrong": {k: labels[k] for k in wrong}, "expected": dict(wanted),
                "node_name": api.get("node_name"), "managed": {k: labels[k] for k in sorted(managed)}}
    if missing or wrong:
        parts = [f"missing {', '.join(f'{k}={wanted[k]}' for k in missing)}" if missing else "",
                 f"wrong {', '.join(f'{k}={labels[k]} (want {wanted[k]})' for k in wrong)}" if wrong else ""]
        return failed("; ".join(p for p in parts if p), **evidence)
    if wanted:
        return ok(", ".join(f"{k}={v}" for k, v in sorted(wanted.items())), **evidence)
    return skipped("skipped: no labels expected", **evidence)


ALLOCATABLE_CAUSES = [
    cause("allocatable_runtime", with_failed=["runtime_default"],
          cause=("the node advertises no {zero} because the device plugin fails under a non-nvidia "
                 "default runtime (NVML)"),
          fix=("fix \"container runtime's default runtime is nvidia\", then delete the device plugin pod"
               " on this node"),
          source=SOURCE_NVML_DEFAULT_RUNTIME),
    cause("allocatable_label", when={"labels_missing": True},
          cause=("the node advertises no {zero} because the stack's DaemonSet does not select it "
                 "(label missing)"),
          fix=FIX_LABELS_FIRST,
          source=SOURCE_GPUSHARE_LABEL),
    cause("allocatable_plugin", fallback=True,
          cause="the node advertises no {zero}: no device plugin registered the resource with kubelet",
          fix=("see \"device plugin socket registered with kubelet\"; `kubectl describe node` shows "
               "Capacity/Allocatable"),
          source=SOURCE_DEVICE_PLUGINS),
]


@check("allocatable", "allocatable shows the stack's GPU resources", kinds=(GPU_NODE,), concerns=PLUGIN,
       causes=ALLOCATABLE_CAUSES, reads=("node",))
def allocatable(seen, want, done):
    node = api_view(seen)["node"]
    found = node.get("allocatable") or {}
    resources = want.get("resources") or []
    zero = sorted(r for r in resources if str(found.get(r, "0")) in ("0", ""))
    evidence = {"resources": list(resources), "allocatable": {r: found.get(r) for r in resources}, "zero": zero,
                "runtime_failed": any(done.status(c) == "failed" for c in ("runtime_binary", "runtime_registered",
                                                                              "runtime_default", "runtime_current")),
                "labels_missing": bool((done.first("node_labels").get("evidence") or {}).get("missing"))}
    if not resources:
        return _no_device_plugin(want, evidence)
    if not (seen.get("gpu") or {}).get("present"):
        return skipped(NO_GPU, **evidence)
    if zero:
        return failed(f"allocatable has no {', '.join(zero)}", **evidence)
    return ok(", ".join(f"{r}={found[r]}" for r in resources), **evidence)


NODE_ANNOTATIONS_CAUSES = [
    cause("hami_not_registered_label", when={"labels_missing": True},
          cause=("HAMi's device plugin did not register this node's GPUs ({absent} missing): its "
                 "DaemonSet selects nodes labelled gpu=on and this node lacks the label"),
          fix="fix \"expected node labels present\" first (playbooks/gpu_node_labels.yml)",
          source="HAMi README, Install (label the GPU nodes gpu=on); docs/stacks.md (hami)"),
    cause("hami_not_registered", fallback=True,
          cause=("{absent} is missing on node {node_name}: HAMi's device plugin is not running there, "
                 "or it cannot read the GPUs (driver, or the container runtime's default is not "
                 "nvidia); without it hami-scheduler places no pod on the node"),
          fix=("`kubectl -n kube-system logs ds/hami-device-plugin -c device-plugin` on this node; fix"
               " the driver and runtime checks first, then delete the device plugin pod on this node"),
          source="HAMi pkg/device/nvidia/device.go (RegisterAnnos); docs/stacks.md (hami)"),
]


@check("node_annotations", "the stack's device plugin registered the node's GPUs (node annotation)",
       kinds=(GPU_NODE,), concerns=PLUGIN, causes=NODE_ANNOTATIONS_CAUSES, applies="node_annotations")
def node_annotations(seen, want, done):
    api = api_view(seen)
    if not (api or {}).get("node"):
        return None  # said by node_registered
    wanted = want["node_annotations"]
    annotations = api["node"].get("annotations") or {}
    absent = [a for a in wanted if not str(annotations.get(a) or "").strip()]
    evidence = {"annotations": wanted, "absent": absent, "node_name": api.get("node_name"),
                "labels_missing": bool((done.first("node_labels").get("evidence") or {}).get("missing")),
                "sizes": {a: len(str(annotations.get(a) or "")) for a in wanted}}
    if not (seen.get("gpu") or {}).get("present"):
        return skipped(NO_GPU, **evidence)
    if absent:
        return failed(f"node {api.get('node_name')} has no {', '.join(absent)}", **evidence)
    return ok(f"{', '.join(wanted)} present", **evidence)

