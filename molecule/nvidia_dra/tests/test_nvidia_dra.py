"""nvidia_dra as a real Kubernetes v1.36.3 holds it, read with kubectl on the control plane.

converge deployed nvidia_device_plugin and nvidia_dra (/root/dra-deployed.json); side_effect switched the GPU node
to nvidia_dra (/root/dra-switched.json), verified it (reports-dra), removed every stack and verified it again
(reports-removed); the reports are read on the controller.
"""

import json
import os
from pathlib import Path

testinfra_hosts = ["nvidia-dra-cp"]

NODE = "nvidia-dra-gpu"
DRA_LABEL = "kube-gpu-nodes.io/nvidia-dra"
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"


CP = "nvidia-dra-cp"
GPU = "nvidia-dra-gpu"
DRA_CHECKS = ("dra_registered", "dra_resourceslices", "dra_device_classes", "dra_no_device_plugin")


def _report(folder):
    latest = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / folder / "latest"
    return {row["host"]: row for row in json.loads((latest / "report.json").read_text())["rows"]}


def _checks(row):
    return {c["id"]: c for c in row["checks"]}


def _saved(host, name):
    return json.loads(host.file(f"/root/{name}").content_string)["items"]


def test_the_api_is_a_real_1_36_serving_dra_v1(host):
    assert json.loads(host.check_output("kubectl get --raw /version"))["gitVersion"] == "v1.36.3"
    group = json.loads(host.check_output("kubectl get --raw /apis/resource.k8s.io"))
    assert group["preferredVersion"]["version"] == "v1"
    nodes = json.loads(host.check_output("kubectl get nodes -o json"))["items"]
    kubelets = {n["metadata"]["name"]: n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes}
    assert kubelets == {CP: "v1.36.3", GPU: "v1.36.3"}


def test_the_dra_driver_was_deployed_in_the_versions_the_cluster_serves(host):
    found = {(o["kind"], o["metadata"]["name"]): o for o in _saved(host, "dra-deployed.json")}
    classes = {name: o for (kind, name), o in found.items() if kind == "DeviceClass"}
    assert sorted(classes) == ["compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com",
                               "gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    assert {o["apiVersion"] for o in classes.values()} == {"resource.k8s.io/v1"}
    assert classes["gpu.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"] == \
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    # DRAExtendedResource is on by default from 1.36: pods asking for nvidia.com/gpu are served by DRA too
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert ("ValidatingAdmissionPolicy", "resourceslices-policy-dra-driver-nvidia-gpu") in found
    assert ("ValidatingAdmissionPolicyBinding", "resourceslices-policy-dra-driver-nvidia-gpu") in found
    assert ("Deployment", "dra-driver-nvidia-gpu-controller") in found
    assert ("CustomResourceDefinition", "computedomains.resource.nvidia.com") in found
    plugin = found[("DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin")]["spec"]["template"]["spec"]
    assert plugin["nodeSelector"] == {DRA_LABEL: "true"}
    device_plugin = found[("DaemonSet", "nvidia-device-plugin-daemonset")]["spec"]["template"]["spec"]
    assert device_plugin["nodeSelector"] == {DEVICE_PLUGIN_LABEL: "true"}


def test_the_switch_drained_the_gpu_pod_moved_the_labels_and_uncordoned(host):
    items = _saved(host, "dra-switched.json")
    [node] = [o for o in items if o["kind"] == "Node" and o["metadata"]["name"] == NODE]
    labels = node["metadata"]["labels"]
    assert labels[DRA_LABEL] == "true" and DEVICE_PLUGIN_LABEL not in labels
    assert not node["spec"].get("unschedulable")
    # the real kubelet no longer offers nvidia.com/gpu once the device plugin left the node
    assert node["status"]["allocatable"].get("nvidia.com/gpu", "0") == "0"
    drained = host.file("/root/dra-train-pod").content_string.strip()
    pods = {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}
    assert drained not in pods


def test_the_real_scheduler_gives_the_deployments_new_pod_the_gpu_through_dra(host):
    """From 1.36 the DeviceClass names nvidia.com/gpu (extendedResourceName): the pod the Deployment made again still
    asks for nvidia.com/gpu, and the real scheduler allocates it the H100 of the node's ResourceSlice."""
    items = _saved(host, "dra-claimed.json")
    [pod] = [o for o in items if o["kind"] == "Pod" and o["metadata"].get("labels", {}).get("app") == "train"]
    assert pod["spec"].get("nodeName") == NODE
    # the claim the scheduler made for the pod's nvidia.com/gpu, owned by the pod
    [claim] = [o for o in items if o["kind"] == "ResourceClaim"]
    assert [r["uid"] for r in claim["metadata"]["ownerReferences"]] == [pod["metadata"]["uid"]]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == ("gpu.nvidia.com", NODE, "gpu-0")


def test_removal_left_nothing_of_the_project(host):
    for kinds in ("deviceclasses.resource.k8s.io,validatingadmissionpolicies,validatingadmissionpolicybindings",
                  "daemonsets,deployments,customresourcedefinitions,clusterroles,serviceaccounts"):
        listed = json.loads(host.check_output(
            f"kubectl get {kinds} --all-namespaces -l app.kubernetes.io/managed-by=kube-gpu-nodes -o json"))
        assert listed["items"] == []
    assert not host.file("/etc/kubernetes/kube-gpu-nodes/stacks/nvidia_dra").exists
    # the ResourceSlice is the kubelet plugin's (not labelled as the project's): left alone
    slices = json.loads(host.check_output("kubectl get resourceslices -o json"))["items"]
    assert [s["spec"]["nodeName"] for s in slices] == [NODE]


def test_verify_finds_the_switched_node_served_by_the_dra_driver_alone():
    rows = _report("reports-dra")
    checks = _checks(rows[GPU])
    assert {c: checks[c]["status"] for c in DRA_CHECKS} == dict.fromkeys(DRA_CHECKS, "ok")
    assert checks["dra_registered"]["summary"] == (
        "registered: compute-domain.nvidia.com-reg.sock, gpu.nvidia.com-reg.sock")
    assert checks["dra_resourceslices"]["summary"] == "1 device(s) for 1 GPU(s): gpu-0"
    assert checks["dra_device_classes"]["evidence"]["missing"] == []
    assert checks["dra_no_device_plugin"]["evidence"]["device_plugin_labels"] == []
    assert rows[GPU]["dra"] == "ok" and rows[GPU]["stack"] == "nvidia_dra"
    assert rows[CP]["dra"] == "-" and not set(DRA_CHECKS) & set(_checks(rows[CP]))


def test_verify_after_the_removal_says_the_device_classes_are_gone_and_why():
    row = _report("reports-removed")[GPU]
    found = _checks(row)["dra_device_classes"]
    assert found["status"] == "failed"
    assert found["summary"].startswith("DeviceClass gpu.nvidia.com does not exist")
    assert [d["id"] for d in found["diagnosis"]] == ["dra_classes_missing"]
    assert row["dra"] == found["summary"] and row["verdict"] == "failed"
    # the kubelet plugin's ResourceSlice is not the project's: still there, still the node's GPU
    assert _checks(row)["dra_resourceslices"]["status"] == "ok"
