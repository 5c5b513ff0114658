"""Labels and stacks as a real Kubernetes API server (v1.36.3) holds them, read with kubectl on the control plane.

converge: gpushare; side_effect: check mode with no stack, then nvidia_device_plugin + elastic_gpu (gpushare
removed), a refused removal of elastic_gpu, then nvidia_device_plugin only (elastic_gpu removed). The node and
gpushare's objects as they were before the side effect are in /root/*-before-side-effect.json.
"""

import json

import pytest

testinfra_hosts = ["gpu-labels-stacks-cp"]

NODE = "gpu-labels-stacks-gpu"
MANAGED = "kube-gpu-nodes.io/managed-labels"
HAND_LABEL = ("example.com/team", "ml")
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
STACK_DIR = "/etc/kubernetes/kube-gpu-nodes/stacks"
MANAGED_BY = "app.kubernetes.io/managed-by=kube-gpu-nodes"


def _kubectl_json(host, *args):
    return json.loads(host.check_output("kubectl " + " ".join(args) + " -o json"))


def _managed(node):
    return set(filter(None, node["metadata"].get("annotations", {}).get(MANAGED, "").split(",")))


def test_the_api_is_a_real_kube_apiserver_of_the_cluster_version(host):
    version = json.loads(host.check_output("kubectl get --raw /version"))
    assert version["gitVersion"] == "v1.36.3"
    assert host.check_output("kubectl get --raw /readyz") == "ok"


def test_gpushare_labelled_the_node_and_recorded_what_it_set(host):
    before = json.loads(host.file("/root/node-before-side-effect.json").content_string)
    labels = before["metadata"]["labels"]
    assert labels["gpushare"] == "true"  # what the gpushare device plugin DaemonSet selects on
    assert labels["nvidia.com/gpu.present"] == "false"  # from gpu_facts: this node has no GPU
    assert DEVICE_PLUGIN_LABEL not in labels
    assert {"gpushare", "nvidia.com/gpu.present"} <= _managed(before)
    assert labels[HAND_LABEL[0]] == HAND_LABEL[1]
    assert HAND_LABEL[0] not in _managed(before)


def test_disabling_gpushare_removed_only_its_labels(host):
    before = json.loads(host.file("/root/node-before-side-effect.json").content_string)
    after = _kubectl_json(host, "get", "node", NODE)
    labels = after["metadata"]["labels"]
    assert "gpushare" not in labels
    assert labels[DEVICE_PLUGIN_LABEL] == "true"
    assert labels[HAND_LABEL[0]] == HAND_LABEL[1]  # never the project's: survives
    assert labels["kubernetes.io/hostname"] == NODE  # the kubelet's labels survive too
    assert "gpushare" not in _managed(after) and DEVICE_PLUGIN_LABEL in _managed(after)
    kept = {k: v for k, v in before["metadata"]["labels"].items() if k != "gpushare"}
    assert {k: labels.get(k) for k in kept} == kept  # nothing else was removed or changed


def test_the_node_reports_no_gpu_resource(host):
    node = _kubectl_json(host, "get", "node", NODE)
    allocatable = node["status"]["allocatable"]
    assert set(allocatable) == {"cpu", "memory", "pods"}  # no nvidia.com/gpu, no aliyun.com/gpu-mem


def _gpushare_before(host):
    doc = json.loads(host.file("/root/gpushare-before-side-effect.json").content_string)
    return {(item["kind"], item["metadata"]["name"]): item for item in doc["items"]}


def test_gpushare_objects_had_the_apiversions_of_1_36_and_the_project_labels(host):
    before = _gpushare_before(host)
    extender = before[("Deployment", "gpushare-schd-extender")]
    assert extender["apiVersion"] == "apps/v1"
    template = extender["spec"]["template"]
    # 1.16+: priorityClassName, not the removed critical-pod annotation; 1.26+: only the control-plane taint
    assert template["spec"]["priorityClassName"] == "system-cluster-critical"
    assert "scheduler.alpha.kubernetes.io/critical-pod" not in template["metadata"].get("annotations", {})
    keys = {t["key"] for t in template["spec"]["tolerations"]}
    assert "node-role.kubernetes.io/control-plane" in keys and "node-role.kubernetes.io/master" not in keys
    assert host.run("kubectl get priorityclass system-cluster-critical").rc == 0
    plugin = before[("DaemonSet", "gpushare-device-plugin-ds")]
    assert plugin["apiVersion"] == "apps/v1"
    pod = plugin["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpushare": "true"}
    command = pod["containers"][0].get("command", []) + pod["containers"][0].get("args", [])
    assert "--memory-unit=GiB" in command
    service = before[("Service", "gpushare-schd-extender")]
    assert service["spec"]["ports"][0]["nodePort"] == 32766
    role = before[("ClusterRole", "gpushare-schd-extender")]
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1"
    for item in before.values():
        labels = item["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "kube-gpu-nodes"
        assert labels["kube-gpu-nodes.io/stack"] == "gpushare"


@pytest.mark.parametrize("stack", ["gpushare", "elastic_gpu"])
def test_stacks_taken_out_left_nothing_in_the_api(host, stack):
    kinds = "deployments,daemonsets,services,serviceaccounts,configmaps,clusterroles,clusterrolebindings,roles," \
            "rolebindings,customresourcedefinitions"
    left = _kubectl_json(host, "get", kinds, "--all-namespaces", "-l", f"kube-gpu-nodes.io/stack={stack}")
    assert left["items"] == []


def test_the_removed_objects_are_gone_by_name_too(host):
    assert host.run("kubectl -n kube-system get deployment gpushare-schd-extender").rc != 0
    assert host.run("kubectl -n kube-system get daemonset gpushare-device-plugin-ds").rc != 0
    assert host.run("kubectl get clusterrole gpushare-device-plugin").rc != 0
    assert host.run("kubectl -n kube-system get deployment elastic-gpu-scheduler").rc != 0
    assert "elasticgpu.io" not in host.check_output("kubectl get crd -o name")  # CRDs removed last, once empty


def test_what_the_project_deploys_now_carries_its_labels(host):
    ours = _kubectl_json(host, "get", "daemonsets,deployments,clusterroles", "--all-namespaces", "-l", MANAGED_BY)
    assert [(i["kind"], i["metadata"]["name"]) for i in ours["items"]] == [
        ("DaemonSet", "nvidia-device-plugin-daemonset")]
    assert ours["items"][0]["metadata"]["labels"]["kube-gpu-nodes.io/stack"] == "nvidia_device_plugin"


def test_device_plugin_daemonset_selects_the_label_the_node_now_has(host):
    plugin = _kubectl_json(host, "-n", "kube-system", "get", "daemonset", "nvidia-device-plugin-daemonset")
    assert plugin["apiVersion"] == "apps/v1"
    selector = plugin["spec"]["template"]["spec"].get("nodeSelector", {})
    node = _kubectl_json(host, "get", "node", NODE)
    assert selector and all(node["metadata"]["labels"].get(k) == v for k, v in selector.items())


def test_only_the_chosen_stack_has_manifest_files_and_they_match_the_api(host):
    manifests = host.check_output(f"find {STACK_DIR} -path '*/.backup' -prune -o -name '*.yml' -print").split()
    assert manifests and all("/nvidia_device_plugin/" in m for m in manifests)
    assert not host.file(f"{STACK_DIR}/gpushare").exists and not host.file(f"{STACK_DIR}/elastic_gpu").exists
    for manifest in manifests:
        diff = host.run(f"kubectl diff -f {manifest}")
        assert diff.rc == 0, f"{manifest} differs from the API: {diff.stdout}{diff.stderr}"


def test_an_apiversion_removed_in_1_16_is_refused_by_the_real_server(host):
    result = host.run(
        "printf 'apiVersion: extensions/v1beta1\\nkind: DaemonSet\\nmetadata: {name: old, namespace: kube-system}\\n"
        "spec: {template: {spec: {containers: [{name: a, image: b}]}}}\\n' | kubectl apply -f -"
    )
    assert result.rc != 0
    assert 'no matches for kind "DaemonSet" in version "extensions/v1beta1"' in result.stderr
    assert host.run("kubectl -n kube-system get daemonset old").rc != 0
