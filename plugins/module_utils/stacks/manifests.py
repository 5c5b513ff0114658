"""Kubernetes manifest decisions by Kubernetes version, and the NVIDIA device plugin release.

Functions (parts of the stacks plan, stacks.stacks_plan):
  manifest_api           apiVersions (Deployment, DaemonSet, RBAC, CRD, PriorityClass, ...),
                             control-plane labels/taints/tolerations, critical-pod annotation vs
                             priorityClassName, for one Kubernetes version
  manifest_removed_apis  "apiVersion/Kind" pairs no longer served by that version
  device_plugin          the NVIDIA k8s-device-plugin release for a version, its manifest layout
                             and which sharing modes (time-slicing, MPS) it supports
  manifest_objects       which objects a rendered stack manifest holds (read on the node, no YAML library)

Every fact cites a key of docs/versions.md: C = manifest API removals,
[KEP-2067] = master -> control-plane label and taint, [PR-80342] = critical-pod annotation,
E1-E3 = device plugin ([DP], [DP-README-0.17]).
"""

import re

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.version import kubernetes_minor

MASTER = "node-role.kubernetes.io/master"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"

# (apiVersion, kind, removed in minor) [WEB-DEPR-GUIDE] via docs/versions.md C.
_REMOVED = (
    ("extensions/v1beta1", "DaemonSet", 16),
    ("extensions/v1beta1", "Deployment", 16),
    ("apps/v1beta1", "Deployment", 16),
    ("apps/v1beta2", "Deployment", 16),
    ("apps/v1beta2", "DaemonSet", 16),
    ("extensions/v1beta1", "NetworkPolicy", 16),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRole", 22),
    ("rbac.authorization.k8s.io/v1beta1", "ClusterRoleBinding", 22),
    ("rbac.authorization.k8s.io/v1beta1", "Role", 22),
    ("rbac.authorization.k8s.io/v1beta1", "RoleBinding", 22),
    ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", 22),
    ("admissionregistration.k8s.io/v1beta1", "MutatingWebhookConfiguration", 22),
    ("admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration", 22),
    ("scheduling.k8s.io/v1beta1", "PriorityClass", 22),
    ("node.k8s.io/v1beta1", "RuntimeClass", 25),
    ("policy/v1beta1", "PodSecurityPolicy", 25),
    ("policy/v1beta1", "PodDisruptionBudget", 25),
)


def _minor(version, what="kubernetes_version"):
    return kubernetes_minor(version, what, newest=False)


def manifest_api(kubernetes_version):
    """Manifest API decisions for one Kubernetes version, as a plain dict."""
    m = _minor(kubernetes_version)
    if m < 20:
        labels = [MASTER]
    elif m < 24:
        labels = [MASTER, CONTROL_PLANE]  # kubeadm sets both 1.20-1.23 [KEP-2067] stage 1
    else:
        labels = [CONTROL_PLANE]  # master label no longer set on new nodes from 1.24 [KEP-2067]
    if m < 24:
        taints = [MASTER]
    elif m == 24:
        taints = [MASTER, CONTROL_PLANE]  # both taints in 1.24, master taint removed 1.25 [KEP-2067]
    else:
        taints = [CONTROL_PLANE]
    # Tolerate both keys for 1.20-1.25: nodes made or upgraded in that window may carry either
    # (docs/versions.md C and its decision rules: "the project tolerates both keys on 1.20-1.25").
    tolerations = [MASTER] if m < 20 else [MASTER, CONTROL_PLANE] if m <= 25 else [CONTROL_PLANE]
    return {
        "kubernetes_minor": f"1.{m}",
        "deployment": "apps/v1",
        "daemonset": "apps/v1",
        "rbac": "rbac.authorization.k8s.io/v1",
        "crd": "apiextensions.k8s.io/v1",
        "priority_class": "scheduling.k8s.io/v1",
        "runtime_class": "node.k8s.io/v1" if m >= 20 else "node.k8s.io/v1beta1",
        "pod_disruption_budget": "policy/v1" if m >= 21 else "policy/v1beta1",
        "control_plane_labels": labels,
        "control_plane_taints": taints,
        "control_plane_tolerations": tolerations,
        "node_priority_class": "system-node-critical",
        "cluster_priority_class": "system-cluster-critical",
    }


def manifest_removed_apis(kubernetes_version):
    """``apiVersion/Kind`` strings the API server of that version no longer serves."""
    m = _minor(kubernetes_version)
    return [f"{api}/{kind}" for api, kind, removed in _REMOVED if m >= removed]


# Device plugin releases (E1): tag -> (manifest path in the repo, style of the init-error setting).
_DP_RELEASE_RE = re.compile(r"^v0\.(\d+)\.(\d+)$")
DP_DEFAULT = "v0.20.0"  # released 2026-08-19 ([DP] tag v0.20.0; docs/versions.md E1, pins)


def _dp_release(release):
    match = _DP_RELEASE_RE.match(str(release or ""))
    if not match:
        raise KgnError(
            f"nvidia device plugin release {release!r} is not a tag like 'v0.20.0'; releases v0.9.0 and newer are "
            f"supported"
        )
    minor, patch = int(match[1]), int(match[2])
    if minor < 9:
        raise KgnError(
            f"nvidia device plugin release {release!r} is older than v0.9.0 (the first nvcr.io image); "
            f"use v0.9.0 or newer"
        )
    return minor, patch


def device_plugin(kubernetes_version, release=None, registry="nvcr.io/nvidia"):
    """NVIDIA device plugin release for a Kubernetes version (or the given ``release``) and its facts."""
    _minor(kubernetes_version)  # refuses a release outside the supported range
    chosen = release or DP_DEFAULT
    dp_minor, _ = _dp_release(chosen)
    root = dp_minor < 15  # E1: root nvidia-device-plugin.yml up to v0.14.x, deployments/static/ from v0.15.0
    path = "nvidia-device-plugin.yml" if root else "deployments/static/nvidia-device-plugin.yml"
    return {
        "release": chosen,
        "image": f"{registry.rstrip('/')}/k8s-device-plugin:{chosen}",
        "manifest_path": path,
        "manifest_url": f"https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/{chosen}/{path}",
        # E2/E3: config file and time-slicing from v0.12.0, MPS from v0.15.0
        "config_file": dp_minor >= 12,
        "time_slicing": dp_minor >= 12,
        "mps": dp_minor >= 15,
        # v0.9-v0.11 pass --fail-on-init-error=false as an argument, v0.12+ use the env variable [DP tags]
        "fail_on_init_error": "env" if dp_minor >= 12 else "arg",
        # whole-template variant the stack role renders: v0.12 = env + optional config file
        "variant": "v0.12" if dp_minor >= 12 else "v0.9",
    }



_TOP_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9]*):\s*(.*?)\s*$")
_META_KEY = re.compile(r"^  (name|namespace):\s*(.*?)\s*$")


def _scalar(text):
    text = text.split(" #", 1)[0].strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def manifest_objects(text, path="manifest"):
    """Which objects a rendered manifest of this project holds: ``[{group, version, kind, name, namespace}]``.

    Reads the block-style YAML the stack templates produce (documents separated by ``---``; ``apiVersion``,
    ``kind`` and ``metadata`` at the top level; ``name`` and ``namespace`` two spaces into ``metadata``), so a
    node needs no YAML library; the render tests check it against a YAML parser for every template. A
    document without apiVersion, kind or metadata.name is refused, naming the file.
    """
    if not isinstance(text, str):
        raise KgnError(f"{path}: the manifest must be text, got {type(text).__name__}")
    found = []
    for number, document in enumerate(re.split(r"(?m)^---[ \t]*$", text), start=1):
        top, meta, in_meta = {}, {}, False
        for line in document.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            match = _TOP_KEY.match(line)
            if match:
                top[match.group(1)] = _scalar(match.group(2))
                in_meta = match.group(1) == "metadata"
                continue
            if in_meta:
                match = _META_KEY.match(line)
                if match:
                    meta[match.group(1)] = _scalar(match.group(2))
        if not top:
            continue  # only comments
        missing = [k for k, v in (("apiVersion", top.get("apiVersion")), ("kind", top.get("kind")),
                                  ("metadata.name", meta.get("name"))) if not v]
        if missing:
            raise KgnError(f"{path}: document {number} has no {', '.join(missing)} (a stack template must give "
                           f"apiVersion, kind and metadata.name as block YAML)")
        group, _, version = top["apiVersion"].rpartition("/")
        found.append({"group": group, "version": version, "kind": top["kind"], "name": meta["name"],
                      "namespace": meta.get("namespace", "")})
    return found
