"""verify's check of the stacks' pods on a node (checks_cluster.stack_pods_running): the pods of the project's own
DaemonSets that do not run, read once per API server (verify.NOT_RUNNING_PODS, a field selector the API server
applies) and named on their node's row. The pod is the NVIDIA device plugin's as the lab's real Kubernetes v1.36.3
showed it on 2026-11-28 (its image cannot be pulled there: no registry is reachable)."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify

NODE = "kgn-gpu-containerd"
MANAGED = {"app.kubernetes.io/managed-by": "kube-gpu-nodes", "kube-gpu-nodes.io/stack": "nvidia_device_plugin"}
MESSAGE = ('Back-off pulling image "nvcr.io/nvidia/k8s-device-plugin:v0.20.0": ErrImagePull: failed to pull and '
           'unpack image "nvcr.io/nvidia/k8s-device-plugin:v0.20.0": failed to resolve image: dial tcp: lookup '
           "nvcr.io: no such host")


def daemonset(name="nvidia-device-plugin-daemonset", labels=MANAGED):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system", "labels": dict(labels)},
            "spec": {"template": {"spec": {"containers": [{"name": "nvidia-device-plugin-ctr"}]}}},
            "status": {"desiredNumberScheduled": 1, "numberReady": 0}}


def pod(node=NODE, owner="nvidia-device-plugin-daemonset", reason="ImagePullBackOff", scheduled=True):
    status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    if scheduled:
        status["containerStatuses"] = [{
            "name": "nvidia-device-plugin-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0", "ready": False,
            "started": False, "state": {"waiting": {"reason": reason, "message": MESSAGE}}}]
    else:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/2 nodes are available: 1 Insufficient cpu."}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "nvidia-device-plugin-daemonset-5v9hh", "namespace": "kube-system",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": owner,
                                              "controller": True}]},
            "spec": {"nodeName": node}, "status": status}


def answer(pods=(), daemonsets=None, raw_read=True):
    raw = {verify.NOT_RUNNING_PODS: {"text": "", "error": "", "json": {"kind": "PodList", "items": list(pods)}}}
    return {"reachable": True, "error": "", "raw": raw if raw_read else {}, "resources": {
        "nodes": {"served": True, "items": [{"metadata": {"name": NODE, "labels": {}}, "status": {}}]},
        "daemonsets.apps": {"served": True, "items": [daemonset()] if daemonsets is None else daemonsets},
        "deployments.apps": {"served": True, "items": []}}}


def judge(api, stacks=("nvidia_device_plugin",)):
    row = verify.verify_host({"host": NODE, "kinds": ["gpu_node"], "stacks": list(stacks)}, {}, {"gpu_node": True},
                             api)
    return row, {c["id"]: c for c in row["checks"]}


def test_a_stack_pod_whose_image_cannot_be_pulled_fails_its_node_naming_pod_image_and_kubelet_words():
    row, checks = judge(answer([pod()]))
    found = checks["stack_pods_running"]
    assert found["status"] == "failed"
    assert found["summary"] == ("kube-system/nvidia-device-plugin-daemonset-5v9hh Pending: ImagePullBackOff "
                                "(nvcr.io/nvidia/k8s-device-plugin:v0.20.0)")
    assert [d["id"] for d in found["diagnosis"]] == ["stack_image_not_pulled"]
    assert "lookup nvcr.io" in found["diagnosis"][0]["cause"]
    assert "kubectl -n kube-system describe pod nvidia-device-plugin-daemonset-5v9hh" in found["diagnosis"][0]["fix"]
    assert row["verdict"] == "failed"


def test_the_check_is_waivable_and_then_says_so():
    row = verify.verify_host({"host": NODE, "kinds": ["gpu_node"], "stacks": ["nvidia_device_plugin"],
                              "waived": ["stack_pods_running"]}, {}, {"gpu_node": True}, answer([pod()]))
    found = next(c for c in row["checks"] if c["id"] == "stack_pods_running")
    assert found["status"] == "waived" and "ImagePullBackOff" in found["summary"]


@pytest.mark.parametrize("case", ["other node", "not ours", "user daemonset"])
def test_pods_of_other_nodes_and_of_daemonsets_the_project_did_not_deploy_are_not_judged_here(case):
    pods = [pod(node="other")] if case == "other node" else [pod(owner="someone-elses")]
    daemonsets = [daemonset(), daemonset("someone-elses", labels={"app": "logging"})]
    _, checks = judge(answer(pods, daemonsets=daemonsets if case != "other node" else None))
    assert checks["stack_pods_running"]["status"] == "ok", checks["stack_pods_running"]


def test_a_pod_not_scheduled_gives_the_schedulers_words():
    _, checks = judge(answer([pod(scheduled=False)]))
    found = checks["stack_pods_running"]
    assert found["status"] == "failed" and "Unschedulable" in found["summary"]
    assert [d["id"] for d in found["diagnosis"]] == ["stack_pod_not_running"]
    assert "Insufficient cpu" in found["diagnosis"][0]["cause"]


def test_unread_pods_are_said_not_read_and_no_stack_means_no_row():
    _, checks = judge(answer([pod()], raw_read=False))
    assert checks["stack_pods_running"]["status"] == "skipped"
    _, checks = judge(answer([pod()]), stacks=())
    assert "stack_pods_running" not in checks


def test_a_long_message_is_cut_at_a_word():
    long = copy.deepcopy(pod())
    long["status"]["containerStatuses"][0]["state"]["waiting"]["message"] = "word " * 200
    _, checks = judge(answer([long]))
    message = checks["stack_pods_running"]["evidence"]["message"]
    assert len(message) <= 300 and message.endswith("word ...")
