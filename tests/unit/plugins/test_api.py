"""The API side, pure: api_nodes (one node list per API host), api_host (which host runs kubectl for a host),
node_list and api_objects (what the modules read of kubectl's answers)."""

from __future__ import annotations

import json

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import api_host, api_nodes, api_objects, node_list
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

NODE = {
    "metadata": {"name": "gpu-1", "labels": {"a": "1"}, "annotations": {"kube-gpu-nodes.io/managed-labels": "a"}},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}},
}


def answer(host: str, rc: int = 0, stdout: str = "", **over) -> dict:
    return {"item": {"host": host, "kubectl": "kubectl"}, "rc": rc, "stdout": stdout, "stderr": ""} | over


def test_indexes_each_node_by_api_host_and_name():
    listed = {"results": [answer("cp1", stdout=json.dumps({"items": [NODE, {"metadata": {"name": "cpu-1"}}]}))]}
    index = api_nodes(listed)
    assert index["cp1"]["ok"] is True and index["cp1"]["error"] == ""
    assert index["cp1"]["nodes"]["gpu-1"] == {
        "labels": {"a": "1"},
        "annotations": {"kube-gpu-nodes.io/managed-labels": "a"},
        "allocatable": {"nvidia.com/gpu": "8"},
        "capacity": {"nvidia.com/gpu": "8"},
    }
    assert index["cp1"]["nodes"]["cpu-1"] == {"labels": {}, "annotations": {}, "allocatable": {}, "capacity": {}}


def test_only_the_asked_fields_are_kept():
    listed = [answer("cp1", stdout=json.dumps({"items": [NODE]}))]
    assert api_nodes(listed, ["labels"])["cp1"]["nodes"]["gpu-1"] == {"labels": {"a": "1"}}
    with pytest.raises(KgnError, match="fields"):
        api_nodes(listed, ["spec"])


def test_a_failed_or_unreachable_api_host_keeps_its_first_error_line():
    listed = {"results": [
        answer("cp1", rc=1, stderr="The connection to the server was refused\nmore detail"),
        {"item": {"host": "cp2"}, "unreachable": True, "msg": "ssh: connect to host cp2 port 22: timed out"},
        answer("cp3", stdout="not json"),
    ]}
    index = api_nodes(listed)
    assert index["cp1"] == {"ok": False, "error": "The connection to the server was refused", "nodes": {}}
    assert index["cp2"]["ok"] is False and "timed out" in index["cp2"]["error"]
    assert index["cp3"]["ok"] is False and "did not answer with a node list" in index["cp3"]["error"]


def test_skipped_results_are_left_out_and_a_plain_list_is_accepted():
    assert api_nodes([{"item": {"host": "cp1"}, "skipped": True}]) == {}


@pytest.mark.parametrize("bad", ["text", {"results": [{"rc": 0}]}, {"results": [{"item": ["cp1"]}]}])
def test_input_that_is_not_a_looped_register_is_refused(bad):
    with pytest.raises(KgnError, match="api_nodes"):
        api_nodes(bad)


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


def test_the_loop_item_may_be_the_api_host_itself():
    answer = {"results": [{"item": "cp1", "rc": 0, "stdout": '{"items": []}'}]}
    assert api_nodes(answer) == {"cp1": {"ok": True, "error": "", "nodes": {}}}
