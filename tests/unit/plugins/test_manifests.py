"""Manifest apiVersions, control-plane keys and the device plugin release, per Kubernetes version; the objects
a rendered manifest holds."""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.manifests import (
    CONTROL_PLANE,
    MASTER,
    device_plugin,
    manifest_api,
    manifest_objects,
    manifest_removed_apis,
)

MINORS = range(16, 38)  # from the oldest supported, past the newest in the tables


@pytest.mark.parametrize("minor", MINORS)
def test_every_chosen_api_version_is_served_by_that_version(minor):
    version = f"1.{minor}.0"
    api = manifest_api(version)
    removed = set(manifest_removed_apis(version))
    chosen = {
        f"{api['daemonset']}/DaemonSet",
        f"{api['deployment']}/Deployment",
        f"{api['rbac']}/ClusterRole",
        f"{api['crd']}/CustomResourceDefinition",
        f"{api['priority_class']}/PriorityClass",
        f"{api['runtime_class']}/RuntimeClass",
        f"{api['pod_disruption_budget']}/PodDisruptionBudget",
    }
    assert not chosen & removed


@pytest.mark.parametrize("version", ["1.16.15", "v1.23.1", "1.35.0", "1.37.0"])
def test_api_versions_of_the_supported_range(version):
    api = manifest_api(version)
    assert (api["crd"], api["priority_class"]) == ("apiextensions.k8s.io/v1", "scheduling.k8s.io/v1")
    assert api["daemonset"] == api["deployment"] == "apps/v1"
    assert api["node_priority_class"] == "system-node-critical"


@pytest.mark.parametrize(
    ("minor", "labels", "taints", "tolerations"),
    [
        (19, [MASTER], [MASTER], [MASTER]),
        (20, [MASTER, CONTROL_PLANE], [MASTER], [MASTER, CONTROL_PLANE]),
        (23, [MASTER, CONTROL_PLANE], [MASTER], [MASTER, CONTROL_PLANE]),
        (24, [CONTROL_PLANE], [MASTER, CONTROL_PLANE], [MASTER, CONTROL_PLANE]),
        (25, [CONTROL_PLANE], [CONTROL_PLANE], [MASTER, CONTROL_PLANE]),
        (26, [CONTROL_PLANE], [CONTROL_PLANE], [CONTROL_PLANE]),
    ],
)
def test_control_plane_label_taint_and_when_both_are_tolerated(minor, labels, taints, tolerations):
    api = manifest_api(f"1.{minor}.3")
    assert api["control_plane_labels"] == labels
    assert api["control_plane_taints"] == taints
    assert api["control_plane_tolerations"] == tolerations


def test_removed_apis_grow_with_the_version():
    assert "apiextensions.k8s.io/v1beta1/CustomResourceDefinition" not in manifest_removed_apis("1.21.0")
    assert "extensions/v1beta1/DaemonSet" in manifest_removed_apis("1.16.0")
    assert "apiextensions.k8s.io/v1beta1/CustomResourceDefinition" in manifest_removed_apis("1.22.0")
    assert "policy/v1beta1/PodDisruptionBudget" in manifest_removed_apis("1.25.0")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("latest", "'latest' is not a version"),
        (1.2, "quote it in YAML"),
        (None, "is not set"),
        ("1.15.0", r"1\.15\.0 \(minor 1\.15\) is outside the supported range 1\.x from 1\.16"),
        ("2.0.0", "outside the supported range"),
    ],
)
def test_bad_kubernetes_versions_are_refused(value, message):
    with pytest.raises(KgnError, match=message):
        manifest_api(value)


@pytest.mark.parametrize(
    ("version", "release", "expected"),
    [
        ("1.30.4", None, ("v0.20.0", "deployments/static/nvidia-device-plugin.yml", True, True, "v0.12")),
        ("1.16.15", None, ("v0.20.0", "deployments/static/nvidia-device-plugin.yml", True, True, "v0.12")),
        ("1.23.1", "v0.10.0", ("v0.10.0", "nvidia-device-plugin.yml", False, False, "v0.9")),
        ("1.23.1", "v0.12.0", ("v0.12.0", "nvidia-device-plugin.yml", True, False, "v0.12")),
        ("1.23.1", "v0.15.0", ("v0.15.0", "deployments/static/nvidia-device-plugin.yml", True, True, "v0.12")),
    ],
)
def test_device_plugin_release_layout_and_sharing_support(version, release, expected):
    dp = device_plugin(version, release)
    assert (dp["release"], dp["manifest_path"], dp["time_slicing"], dp["mps"], dp["variant"]) == expected
    assert (
        dp["manifest_url"]
        == f"https://raw.githubusercontent.com/NVIDIA/k8s-device-plugin/{dp['release']}/" + dp["manifest_path"]
    )
    assert dp["image"] == f"nvcr.io/nvidia/k8s-device-plugin:{dp['release']}"


def test_device_plugin_registry_mirror():
    assert (
        device_plugin("1.30.0", None, "mirror.local:5000/nvidia/")["image"]
        == "mirror.local:5000/nvidia/k8s-device-plugin:v0.20.0"
    )


@pytest.mark.parametrize(
    ("version", "release", "message"),
    [
        ("1.30.0", "0.17.4", "not a tag like 'v0.20.0'"),
        ("1.30.0", "v0.8.0", "older than v0.9.0"),
        ("1.15.0", "v0.14.5", "outside the supported range"),
    ],
)
def test_bad_device_plugin_releases_are_refused(version, release, message):
    with pytest.raises(KgnError, match=message):
        device_plugin(version, release)


MANIFEST = """---
# comment: kind: Nope
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: x-role
  labels:
    name: not-the-name
rules: []
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: "x-config"
  namespace: kube-system
data:
  config.yaml: |
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
---
# only a comment
"""


def test_manifest_objects_reads_each_document_without_a_yaml_library():
    assert manifest_objects(MANIFEST) == [
        {"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole", "name": "x-role",
         "namespace": ""},
        {"group": "", "version": "v1", "kind": "ConfigMap", "name": "x-config", "namespace": "kube-system"},
    ]


def test_manifest_objects_refuses_a_document_without_a_name():
    with pytest.raises(KgnError, match=r"stacks/x\.yml: document 1 has no metadata\.name"):
        manifest_objects("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "stacks/x.yml")
