"""nvidia_dra as the stand-in Kubernetes 1.35 API holds it, read with kubectl on the control plane.

converge deployed nvidia_device_plugin and nvidia_dra (/root/dra-deployed.json); side_effect switched the GPU node
to nvidia_dra (/root/dra-switched.json) and removed every stack.
"""

import json

testinfra_hosts = ["nvidia_dra-cp"]

NODE = "nvidia-dra-gpu"
DRA_LABEL = "kube-gpu-nodes.io/nvidia-dra"
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"


def _saved(host, name):
    return json.loads(host.file(f"/root/{name}").content_string)["items"]


def test_the_api_serves_dra_as_1_35_does(host):
    assert json.loads(host.check_output("kubectl get --raw /version"))["gitVersion"] == "v1.35.0+standin"
    group = json.loads(host.check_output("kubectl get --raw /apis/resource.k8s.io"))
    assert [v["version"] for v in group["versions"]] == ["v1"]  # the betas are off by default


def test_the_dra_driver_was_deployed_in_the_versions_the_cluster_serves(host):
    found = {(o["kind"], o["metadata"]["name"]): o for o in _saved(host, "dra-deployed.json")}
    classes = {name: o for (kind, name), o in found.items() if kind == "DeviceClass"}
    assert sorted(classes) == ["compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com",
                               "gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    assert {o["apiVersion"] for o in classes.values()} == {"resource.k8s.io/v1"}
    assert classes["gpu.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"] == \
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
    assert "extendedResourceName" not in classes["gpu.nvidia.com"]["spec"]  # DRAExtendedResource is alpha in 1.35
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
    assert "train-0" not in [o["metadata"]["name"] for o in items if o["kind"] == "Pod"]


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
