"""The API side, pure: api_host (which host runs kubectl for a host) and kube_api (where to delegate, with which
kubeconfig), the cluster a control plane belongs to, node_list, api_objects, slim and pods_using (what the modules
read of kubectl's answers)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import (
    api_host,
    api_objects,
    blocking_budgets,
    cluster_failures,
    cluster_members,
    node_list,
    pods_using,
    slim,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.kube import DEFAULT_KUBECONFIG, kube_api, kube_api_targets
from counting_hostvars import CountingHostvars

NODE = {
    "metadata": {"name": "gpu-1", "labels": {"a": "1"}, "annotations": {"kube-gpu-nodes.io/managed-labels": "a"}},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}},
}


# The lab's shape: two clusters in one inventory, each in its own group, plus a parent group spanning both.
GROUPS = {
    "all": ["cp-a", "cp-b", "gpu-a", "gpu-b", "gpu-lone"],
    "ungrouped": [],
    "kube_control_plane": ["cp-a", "cp-b"],
    "gpu_nodes": ["gpu-a", "gpu-b", "gpu-lone"],
    "clusters": ["cp-a", "cp-b", "gpu-a", "gpu-b"],
    "cluster_a": ["cp-a", "gpu-a"],
    "cluster_b": ["cp-b", "gpu-b"],
}


@pytest.mark.parametrize(("host", "expected"), [
    ("gpu-a", "cp-a"),  # its own cluster's control plane
    ("gpu-b", "cp-b"),  # not cp-a, which "clusters" (a bigger group) also shares
    ("gpu-lone", "cp-a"),  # no cluster group: the first control-plane host
    ("cp-b", "cp-b"),  # a control-plane host talks to its own cluster
])
def test_api_host_is_a_control_plane_host_of_the_hosts_cluster(host, expected):
    assert api_host(host, GROUPS, {}) == expected


def test_kube_api_host_wins_and_an_empty_one_is_not_set():
    assert api_host("gpu-a", GROUPS, {"gpu-a": {"kube_api_host": "cp-b"}}) == "cp-b"
    assert api_host("gpu-a", GROUPS, {"gpu-a": {"kube_api_host": ""}}) == "cp-a"


def test_no_control_plane_host_means_the_control_machine():
    assert api_host("gpu-a", {"all": ["gpu-a"], "kube_control_plane": [], "gpu_nodes": ["gpu-a"]}, {}) == ""
    assert api_host("gpu-a", {"all": ["gpu-a"], "gpu_nodes": ["gpu-a"]}, {}) == ""


def test_the_first_control_plane_host_of_the_group_in_kube_control_plane_order():
    groups = dict(GROUPS, kube_control_plane=["cp-b", "cp-a2", "cp-a"], cluster_a=["cp-a", "cp-a2", "gpu-a"])
    assert api_host("gpu-a", groups, {}) == "cp-a2"


@pytest.mark.parametrize(("host", "groups", "hostvars", "message"), [
    ("", GROUPS, {}, "inventory host name"),
    ("gpu-a", ["cp-a"], {}, "groups must be"),
    ("gpu-a", GROUPS, "hostvars", "hostvars must be"),
    ("gpu-a", GROUPS, {"gpu-a": {"kube_api_host": ["cp-a"]}}, "kube_api_host of gpu-a is"),
])
def test_api_host_refuses_what_is_not_an_inventory(host, groups, hostvars, message):
    with pytest.raises(KgnError, match=message):
        api_host(host, groups, hostvars)


def test_node_list_keeps_labels_and_annotations_by_name():
    answer = json.dumps({"items": [NODE, {"metadata": {"name": "cpu-1"}}]})
    assert node_list(answer) == {
        "gpu-1": {"labels": {"a": "1"}, "annotations": {"kube-gpu-nodes.io/managed-labels": "a"}},
        "cpu-1": {"labels": {}, "annotations": {}},
    }


def test_api_objects_names_group_kind_namespace_and_the_crd_it_defines():
    answer = {"kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "ds", "namespace": "kube-system", "labels": {"x": "y"},
                      "ownerReferences": [{"kind": "ClusterPolicy", "name": "cluster-policy"}]},
         "spec": {"template": {"spec": {"containers": [{"name": "plugin", "args": ["--fail-on-init-error"],
                                                         "image": "nvcr.io/nvidia/k8s-device-plugin:v0.14.1"}]}}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "kube-system"}},
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
         "metadata": {"name": "gpus.elasticgpu.io"},
         "spec": {"group": "elasticgpu.io", "names": {"plural": "gpus", "kind": "GPU"}}},
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "on"}, "spec": {}},
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "off"},
         "spec": {"devicePlugin": {"enabled": False}}},
    ]}
    found = api_objects(answer)
    assert found[0] == {"group": "apps", "version": "v1", "kind": "DaemonSet", "namespace": "kube-system",
                        "name": "ds", "labels": {"x": "y"}, "owners": ["ClusterPolicy/cluster-policy"],
                        "containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.14.1",
                                        "command": [], "args": ["--fail-on-init-error"]}]}
    assert (found[1]["group"], found[1]["version"]) == ("", "v1") and "containers" not in found[1]
    assert found[2]["crd"] == {"group": "elasticgpu.io", "plural": "gpus", "kind": "GPU"}
    assert found[2]["namespace"] == ""
    assert [(o["name"], o["device_plugin_enabled"]) for o in found[3:]] == [("on", True), ("off", False)]


@pytest.mark.parametrize("answer", ["not json", "{}", '{"items": [{"kind": "X"}]}'])
def test_answers_that_are_not_object_lists_are_refused(answer):
    with pytest.raises(KgnError, match="kubectl get"):
        api_objects(answer)


def test_kube_api_decides_what_an_empty_api_host_means_and_the_kubeconfig():
    assert kube_api("gpu-a", GROUPS, {}) == {"host": "cp-a", "delegate_to": "cp-a", "kubeconfig": DEFAULT_KUBECONFIG,
                                             "where": "kubectl on cp-a"}
    managed = {"all": ["gpu-a"], "gpu_nodes": ["gpu-a"]}
    assert kube_api("gpu-a", managed, {"gpu-a": {"kube_api_kubeconfig": "/home/ci/.kube/config"}}) == {
        "host": "", "delegate_to": "localhost", "kubeconfig": "/home/ci/.kube/config",
        "where": "kubectl on the control machine"}
    # a role's own setting wins, "" included (the control machine)
    assert kube_api("gpu-a", GROUPS, {}, "", "/k")["delegate_to"] == "localhost"
    assert kube_api("gpu-a", GROUPS, {}, "cp-b", "")["kubeconfig"] == DEFAULT_KUBECONFIG
    with pytest.raises(KgnError, match="API host of gpu-a"):
        kube_api("gpu-a", GROUPS, {}, ["cp-a"])


def test_kube_api_targets_are_each_api_server_once_with_a_roles_inventory_setting():
    hostvars = {"gpu-b": {"gpu_node_verify_kubeconfig": "/b.conf"}, "cp-b": {}}
    targets = kube_api_targets(["gpu-a", "cp-a", "gpu-b", "cp-b"], GROUPS, hostvars, "gpu_node_verify")
    assert [(t["host"], t["kubeconfig"]) for t in targets] == [("cp-a", DEFAULT_KUBECONFIG), ("cp-b", "/b.conf"),
                                                               ("cp-b", DEFAULT_KUBECONFIG)]


def test_a_role_that_gives_its_own_values_reads_nothing_of_the_host_back():
    hostvars = CountingHostvars({"gpu-a": {"kube_api_host": "cp-b", "kube_api_kubeconfig": "/a.conf"}})
    assert api_host("gpu-a", GROUPS, hostvars, "") == "cp-a"  # the value the play sees wins over hostvars
    assert api_host("gpu-a", GROUPS, hostvars, "cp-b") == "cp-b"
    assert kube_api("gpu-a", GROUPS, hostvars, "cp-a", "")["kubeconfig"] == DEFAULT_KUBECONFIG
    assert hostvars.reads == []
    # not given: read from hostvars, as before
    assert api_host("gpu-a", GROUPS, hostvars) == "cp-b"
    assert kube_api("gpu-a", GROUPS, hostvars, "cp-b")["kubeconfig"] == "/a.conf"
    assert hostvars.reads == ["gpu-a", "gpu-a"]
    with pytest.raises(KgnError, match="kube_api_host of gpu-a"):
        api_host("gpu-a", GROUPS, hostvars, ["cp-a"])


def test_kube_api_targets_read_each_host_once():
    hostvars = CountingHostvars({"gpu-a": {"kube_api_kubeconfig": "/a.conf"}, "gpu-b": {"kube_api_host": "cp-a"},
                                 "cp-a": {}, "cp-b": {}})
    targets = kube_api_targets(["gpu-a", "gpu-b", "cp-b"], GROUPS, hostvars, "gpu_node_verify")
    assert [(t["host"], t["kubeconfig"]) for t in targets] == [("cp-a", "/a.conf"), ("cp-a", DEFAULT_KUBECONFIG),
                                                               ("cp-b", DEFAULT_KUBECONFIG)]
    assert sorted(hostvars.reads) == ["cp-b", "gpu-a", "gpu-b"]


def test_a_control_planes_cluster_and_the_peers_that_failed_in_a_play():
    groups = dict(GROUPS, kube_control_plane=["cp-a", "cp-a2", "cp-b"], cluster_a=["cp-a", "cp-a2", "gpu-a"])
    assert cluster_members("cp-a2", groups) == ["cp-a", "cp-a2", "gpu-a"]
    failed = {"cp-a": {"kgn_run_failure": {"play": "Point kube-scheduler", "msg": "did not come back"}},
              "cp-b": {"kgn_run_failure": {"play": "Point kube-scheduler"}}, "cp-a2": {}}
    assert cluster_failures("cp-a2", groups, failed, "Point kube-scheduler") == ["cp-a"]
    assert cluster_failures("cp-a2", groups, failed, "Deploy the stacks") == []
    assert cluster_failures("cp-b", groups, failed, "Point kube-scheduler") == []  # its own failure is not a peer's
    lone = {"all": ["cp-1", "cp-2"], "kube_control_plane": ["cp-1", "cp-2"]}
    assert cluster_failures("cp-2", lone, {"cp-1": failed["cp-a"], "cp-2": {}}, "Point kube-scheduler") == ["cp-1"]


def test_slim_leaves_out_what_no_check_reads():
    node = {"kind": "Node", "metadata": {"name": "n", "managedFields": [{}], "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": "{}", "kept": "1"}},
        "status": {"images": [{"names": ["x"]}], "allocatable": {"nvidia.com/gpu": "1"}}}
    assert slim(node) == {"kind": "Node", "metadata": {"name": "n", "annotations": {"kept": "1"}},
                          "status": {"allocatable": {"nvidia.com/gpu": "1"}}}
    assert node["metadata"]["managedFields"] == [{}]  # the answer itself is left as it is


def test_pods_using_a_resource_prefix():
    pods = {"items": [
        {"metadata": {"namespace": "ml", "name": "train"}, "spec": {"containers": [
            {"resources": {"limits": {"nvidia.com/mig-1g.5gb": 1}}}]}},
        {"metadata": {"namespace": "ml", "name": "done"}, "status": {"phase": "Succeeded"},
         "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}},
        {"metadata": {"namespace": "web", "name": "nginx"}, "spec": {"containers": [{}]}}]}
    assert pods_using(pods, "nvidia.com/") == ["ml/train"]
    with pytest.raises(KgnError, match="JSON"):
        pods_using("error: not json")


def _pod(name, labels, namespace="default", phase="Running"):
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "status": {"phase": phase}}


def _budget(name, selector, allowed=0, namespace="default"):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1}}


def test_the_budgets_that_block_a_drain_are_those_that_select_a_pod_of_the_node_and_allow_no_disruption():
    pods = {"items": [_pod("train-0", {"app": "train", "tier": "gpu"}), _pod("web-0", {"app": "web"}),
                      _pod("done", {"app": "train"}, phase="Succeeded"), _pod("other-ns", {"app": "train"}, "ml")]}
    budgets = {"items": [
        _budget("train", {"matchLabels": {"app": "train"}}),
        _budget("web", {"matchLabels": {"app": "web"}}, allowed=1),          # allows one: not blocking
        _budget("gpu-tier", {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}),
        _budget("not-web", {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["train", "web"]}]}),
        _budget("no-selector", None),                                        # selects nothing (policy/v1)
    ]}
    assert blocking_budgets(pods, budgets) == [
        {"budget": "default/gpu-tier", "pods": ["default/train-0"], "allowed": 0, "current_healthy": 1,
         "desired_healthy": 1},
        {"budget": "default/train", "pods": ["default/train-0"], "allowed": 0, "current_healthy": 1,
         "desired_healthy": 1},
    ]
    assert blocking_budgets({"items": []}, budgets) == []
