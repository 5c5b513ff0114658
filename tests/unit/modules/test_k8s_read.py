"""k8s_read module against a fake kubectl: every resource listed in every namespace, a kind the server does not
serve said per resource, raw paths, and an API that is not ready said once."""

from __future__ import annotations

import json

from kubectl_fake import answer, calls, install, items, run_module

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu1", "managedFields": [{"manager": "kubelet"}]},
        "status": {"images": [{"names": ["big"]}], "allocatable": {"nvidia.com/gpu": "1"}}}


def test_each_resource_is_listed_and_slimmed(tmp_path):
    rules = [{"match": ["get", "--raw", "/readyz"], "answers": [answer("ok")]},
             {"match": ["get", "nodes"], "answers": [answer(items(NODE))]},
             {"match": ["get", "resourceslices.resource.k8s.io"], "answers": [
                 answer(rc=1, stderr='error: the server doesn\'t have a resource type "resourceslices"\n')]},
             {"match": ["get", "--raw", "/apis"], "answers": [answer(json.dumps({"groups": []}))]}]
    args = {"resources": ["nodes", "resourceslices.resource.k8s.io"], "raw": ["/apis"], "api_host": "cp1",
            "kubectl": str(install(tmp_path / "bin", rules)), "kubeconfig": "/fake/admin.conf"}
    result = run_module("k8s_read", args, check=True)
    assert result["status"] == "SUCCESS" and result["reachable"] is True
    node = result["resources"]["nodes"]["items"][0]
    assert "managedFields" not in node["metadata"] and "images" not in node["status"]
    assert result["resources"]["resourceslices.resource.k8s.io"]["served"] is False
    assert result["raw"]["/apis"]["json"] == {"groups": []}
    listed = [c["argv"] for c in calls(tmp_path / "bin") if c["argv"][1] == "nodes"]
    assert listed == [["get", "nodes", "--all-namespaces", "--output=json"]]


def test_an_api_that_is_not_ready_is_said_once(tmp_path):
    rules = [{"match": ["get"], "answers": [answer(rc=1, stderr="The connection to the server was refused\n")]},
             {"match": ["config", "view"], "answers": [answer("https://10.0.0.1:6443")]}]
    args = {"resources": ["nodes", "daemonsets.apps"], "kubectl": str(install(tmp_path / "bin", rules))}
    result = run_module("k8s_read", args)
    assert result["reachable"] is False and "connection to the server was refused" in result["error"]
    assert "kubectl on the control machine" in result["error"] and "/etc/kubernetes/admin.conf" in result["error"]
    # one request to the server; then the kubeconfig names the address that did not answer (read locally)
    assert [c["argv"][0] for c in calls(tmp_path / "bin")] == ["get", "config"] and result["resources"] == {}
    assert result["server"] == "https://10.0.0.1:6443"


def test_served_resources_are_read_in_one_kubectl_get_and_placed_by_kind(tmp_path):
    together = "nodes,daemonsets.apps,deviceclasses.resource.k8s.io"
    listed = items(NODE, {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "plugin"}},
                   {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"}})
    rules = [{"match": ["get", "--raw", "/readyz"], "answers": [answer("ok")]},
             {"match": ["get", together], "answers": [answer(listed)]}]
    args = {"resources": together.split(","), "kubectl": str(install(tmp_path / "bin", rules))}
    result = run_module("k8s_read", args, check=True)
    found = {name: [i["metadata"]["name"] for i in entry["items"]] for name, entry in result["resources"].items()}
    assert found == {"nodes": ["gpu1"], "daemonsets.apps": ["plugin"],
                     "deviceclasses.resource.k8s.io": ["gpu.nvidia.com"]}
    assert [c["argv"][1] for c in calls(tmp_path / "bin")] == ["--raw", together]


def test_an_object_of_a_kind_it_cannot_place_falls_back_to_one_read_per_resource(tmp_path):
    odd = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    rules = [{"match": ["get", "--raw", "/readyz"], "answers": [answer("ok")]},
             {"match": ["get", "nodes,daemonsets.apps"], "answers": [answer(items(NODE, odd))]},
             {"match": ["get", "nodes"], "answers": [answer(items(NODE))]},
             {"match": ["get", "daemonsets.apps"], "answers": [answer(items())]}]
    args = {"resources": ["nodes", "daemonsets.apps"], "kubectl": str(install(tmp_path / "bin", rules))}
    result = run_module("k8s_read", args, check=True)
    assert [i["metadata"]["name"] for i in result["resources"]["nodes"]["items"]] == ["gpu1"]
    assert result["resources"]["daemonsets.apps"] == {"served": True, "error": "", "items": []}
    assert [c["argv"][1] for c in calls(tmp_path / "bin")] == ["--raw", "nodes,daemonsets.apps", "nodes",
                                                               "daemonsets.apps"]


def test_a_resource_the_server_does_not_serve_is_named_and_the_rest_read_together_again(tmp_path):
    rules = [{"match": ["get", "--raw", "/readyz"], "answers": [answer("ok")]},
             {"match": ["get", "nodes,resourceslices.resource.k8s.io,daemonsets.apps"], "answers": [
                 answer(rc=1, stderr='error: the server doesn\'t have a resource type "resourceslices"\n')]},
             {"match": ["get", "nodes,daemonsets.apps"], "answers": [answer(items(NODE))]}]
    args = {"resources": ["nodes", "resourceslices.resource.k8s.io", "daemonsets.apps"],
            "kubectl": str(install(tmp_path / "bin", rules))}
    result = run_module("k8s_read", args, check=True)
    slices = result["resources"]["resourceslices.resource.k8s.io"]
    assert slices["served"] is False and slices["items"] == [] and "resourceslices" in slices["error"]
    assert [i["metadata"]["name"] for i in result["resources"]["nodes"]["items"]] == ["gpu1"]
    assert result["resources"]["daemonsets.apps"]["items"] == []
    assert len(calls(tmp_path / "bin")) == 3  # readyz, all three, the two served
