"""k8s_manifests module, run through `ansible localhost -m` against a fake kubectl: what it writes, applies and
removes, in check mode and for real, when the API is down, when a CRD still holds someone else's objects, and when
another NVIDIA device plugin already runs in the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubectl_fake import answer, calls, install, items, run_module

DS = "nvidia_device_plugin/daemonset-v0.12.yml"
DS_TEXT = """---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin-daemonset
  namespace: kube-system
  labels:
    app.kubernetes.io/managed-by: kube-gpu-nodes
    kube-gpu-nodes.io/stack: nvidia_device_plugin
spec: {}
"""
OURS = {"app.kubernetes.io/managed-by": "kube-gpu-nodes"}


def _object(api, kind, name, namespace="kube-system", stack="gpushare", labels=None, spec=None):
    meta = {"name": name, "labels": dict(OURS, **{"kube-gpu-nodes.io/stack": stack}) if labels is None else labels}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": meta, **({"spec": spec} if spec else {})}


DAEMONSET = _object("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset", stack="nvidia_device_plugin",
                    spec={"template": {"spec": {"containers": [
                        {"name": "nvidia-device-plugin-ctr", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"}]}}})
OLD_EXTENDER = _object("apps/v1", "Deployment", "gpushare-schd-extender")
# a provider's managed add-on (OKE's name), not labelled as the project's
FOREIGN = _object("apps/v1", "DaemonSet", "nvidia-gpu-device-plugin", labels={"k8s-app": "nvidia-gpu-device-plugin"},
                  spec={"template": {"spec": {"containers": [
                      {"name": "nvidia-gpu-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.14.1"}]}}})
# discovery of a 1.30 cluster without DRA (resource.k8s.io is beta and off before 1.34)
APIS = json.dumps({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
    {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]},
    {"name": "admissionregistration.k8s.io",
     "versions": [{"groupVersion": "admissionregistration.k8s.io/v1", "version": "v1"}]}]})
NO_OPERATOR = answer(rc=1, stderr='error: the server doesn\'t have a resource type "clusterpolicies"\n')


@pytest.fixture
def setup(tmp_path):
    stacks = tmp_path / "stacks"
    (stacks / "gpushare").mkdir(parents=True)
    (stacks / "gpushare/extender-deployment.yml").write_text("old gpushare manifest\n")

    def make(rules, **over):
        kubectl = install(tmp_path / "bin", rules)
        args = {"settings": {"kubernetes_version": "1.30.4", "stacks": ["nvidia_device_plugin"],
                             "manifest_dir": str(stacks)},
                "manifests": {DS: DS_TEXT}, "kubectl": str(kubectl), "kubeconfig": "/fake/admin.conf", **over}
        return args, stacks, tmp_path / "bin"

    return make


def _ready(listed, dry_run, daemonsets=()):
    suffix = " (server dry run)" if dry_run else ""
    return [
        {"match": ["get", "--raw", "/readyz"], "answers": [answer("ok")]},
        {"match": ["get", "--raw", "/apis"], "answers": [answer(APIS)]},
        {"match": ["get", "-l", "app.kubernetes.io/managed-by=kube-gpu-nodes"], "answers": listed},
        {"match": ["get", "daemonsets.apps", "--all-namespaces"], "answers": [answer(items(*daemonsets))]},
        {"match": ["get", "clusterpolicies.nvidia.com"], "answers": [NO_OPERATOR]},
        {"match": ["apply"], "answers": [answer(f"daemonset.apps/nvidia-device-plugin-daemonset created{suffix}\n")]},
        {"match": ["delete"], "answers": [answer(f'deployment.apps "gpushare-schd-extender" deleted{suffix}\n')]},
    ]


def test_check_mode_lists_every_removal_and_changes_nothing(setup):
    args, stacks, bin_dir = setup(_ready([answer(items(OLD_EXTENDER))], True))
    result = run_module("gpu_sharing_stacks", args, check=True)
    assert result["status"] == "CHANGED", result
    assert result["removed"] == ["Deployment kube-system/gpushare-schd-extender (gpushare)"]
    assert result["removed_files"] == [str(stacks / "gpushare/extender-deployment.yml")]
    assert "Objects would be removed (no longer chosen): Deployment kube-system/gpushare-schd-extender" in result["msg"]
    assert (stacks / "gpushare/extender-deployment.yml").exists() and not (stacks / DS).exists()
    changing = [c for c in calls(bin_dir) if c["argv"][0] in ("apply", "delete")]
    assert [c["argv"][0] for c in changing] == ["apply", "delete"]
    assert all("--dry-run=server" in c["argv"] for c in changing)
    assert changing[0]["stdin"].strip() == DS_TEXT.strip()  # the planned text, not a file on disk


def test_apply_writes_applies_then_prunes_and_checks_the_api(setup):
    listed = [answer(items(OLD_EXTENDER)), answer(items(DAEMONSET))]
    args, stacks, bin_dir = setup(_ready(listed, False))
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "CHANGED", result
    assert (stacks / DS).read_text() == DS_TEXT and (stacks / DS).stat().st_mode & 0o777 == 0o644
    assert not (stacks / "gpushare").exists()  # its files removed, the emptied folder too
    assert [p.read_text() for p in (stacks / ".backup/gpushare").iterdir()] == ["old gpushare manifest\n"]
    argvs = [c["argv"] for c in calls(bin_dir)]
    assert ["apply", "--dry-run=none", "-f", str(stacks / DS)] in argvs
    delete = next(a for a in argvs if a[0] == "delete")
    assert delete[:2] == ["delete", "deployment.apps/gpushare-schd-extender"] and "--dry-run=none" in delete
    assert argvs.index(delete) > argvs.index(["apply", "--dry-run=none", "-f", str(stacks / DS)])  # prune after
    assert result["live"]["missing"] == [] and result["live"]["left"] == []
    assert result["ansible_facts"]["kgn_observed_stacks"]["files"] == ["gpushare/extender-deployment.yml"]


def test_the_cluster_is_not_searched_for_device_plugins_when_no_chosen_stack_advertises_nvidia_gpu(setup):
    args, _, bin_dir = setup(_ready([answer(items(OLD_EXTENDER))], True),
                             settings={"kubernetes_version": "1.30.4", "stacks": []}, manifests={})
    result = run_module("gpu_sharing_stacks", args, check=True)
    assert result["status"] == "CHANGED", result
    argvs = [c["argv"] for c in calls(bin_dir)]
    assert not [a for a in argvs if a[:2] in (["get", "daemonsets.apps"], ["get", "clusterpolicies.nvidia.com"])]


def test_a_bad_stack_list_is_refused_without_a_traceback(setup):
    args, _, _ = setup(_ready([answer(items())], True), settings={"kubernetes_version": "1.30.4",
                                                                  "stacks": "nvidia_device_plugin"})
    result = run_module("gpu_sharing_stacks", args, check=True)
    assert result["status"] == "FAILED!" and "must be a list of stack names" in result["msg"], result


def test_an_object_the_api_does_not_show_after_the_apply_fails_the_module(setup):
    listed = [answer(items()), answer(items())]
    args, _, _ = setup(_ready(listed, False))
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "FAILED!"
    assert "missing DaemonSet kube-system/nvidia-device-plugin-daemonset" in result["msg"]


def test_no_api_server_writes_the_files_and_says_not_applied(setup):
    rules = [{"match": ["get", "--raw", "/readyz"],
              "answers": [answer(rc=1, stderr="The connection to the server 10.0.0.1:6443 was refused\n")]}]
    args, stacks, bin_dir = setup(rules)
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "CHANGED" and result["applied"] is False
    assert result["msg"].startswith(f"NOT APPLIED: the manifests are written to {stacks}")
    assert "The connection to the server 10.0.0.1:6443 was refused" in result["msg"]
    assert (stacks / DS).exists()
    assert [c["argv"][:2] for c in calls(bin_dir)] == [["get", "--raw"]]  # nothing applied or deleted


def test_apply_disabled_writes_the_files_and_never_asks_the_api(setup):
    args, stacks, bin_dir = setup([], apply=False)
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "CHANGED" and "apply is disabled" in result["msg"]
    assert (stacks / DS).exists() and calls(bin_dir) == []


def test_a_crd_with_someone_elses_objects_is_refused_before_anything_changes(setup):
    crd = _object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "elasticgpuclasses.elasticgpu.io", "",
                  "elastic_gpu", spec={"group": "elasticgpu.io", "names": {"plural": "elasticgpuclasses",
                                                                            "kind": "ElasticGPUClass"}})
    theirs = _object("elasticgpu.io/v1alpha1", "ElasticGPUClass", "team-class", "", labels={})
    custom = {"match": ["get", "elasticgpuclasses.elasticgpu.io"], "answers": [answer(items(theirs))]}
    rules = [*_ready([answer(items(crd))], False), custom]
    args, stacks, bin_dir = setup(rules)
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "FAILED!"
    assert "ElasticGPUClass team-class" in result["msg"]
    assert "kubectl delete elasticgpuclasses.elasticgpu.io team-class" in result["msg"]
    assert "Nothing was changed" in result["msg"]
    assert not (stacks / DS).exists() and (stacks / "gpushare/extender-deployment.yml").exists()
    assert not [c for c in calls(bin_dir) if c["argv"][0] in ("apply", "delete")]


def test_manifests_that_are_not_the_plan_are_refused(setup):
    args, stacks, _ = setup([], apply=False, manifests={"other.yml": DS_TEXT})
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "FAILED!" and "not the planned ones" in result["msg"]
    assert not Path(stacks / "other.yml").exists()


def test_render_writes_the_manifests_and_the_plan_without_kubectl(setup, tmp_path):
    args, _, bin_dir = setup([], render_dir=str(tmp_path / "out"), render_host="cp1")
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "CHANGED"
    assert (tmp_path / "out/cp1" / str(args["settings"]["manifest_dir"]).lstrip("/") / DS).read_text() == DS_TEXT
    assert (tmp_path / "out/cp1/_plan/stacks.json").exists() and calls(bin_dir) == []


def test_a_second_device_plugin_is_refused_in_check_mode_before_anything_changes(setup):
    args, stacks, bin_dir = setup(_ready([answer(items())], True, [DAEMONSET, FOREIGN]))
    result = run_module("gpu_sharing_stacks", args, check=True)
    assert result["status"] == "FAILED!"
    assert result["msg"].startswith(
        "Refused to deploy a second device plugin: DaemonSet kube-system/nvidia-gpu-device-plugin (image "
        "nvcr.io/nvidia/k8s-device-plugin:v0.14.1; labels k8s-app=nvidia-gpu-device-plugin) already advertises "
        "nvidia.com/gpu")  # our own DaemonSet, also listed, is not named
    assert "gpu_sharing_stacks_existing_device_plugin: adopt" in result["msg"]
    assert not [c for c in calls(bin_dir) if c["argv"][0] in ("apply", "delete")]
    assert not (stacks / DS).exists()


def test_adopt_applies_nothing_of_ours_for_the_resource_and_says_what_is_kept(setup):
    args, stacks, bin_dir = setup(_ready([answer(items(DAEMONSET)), answer(items())], False, [DAEMONSET, FOREIGN]))
    args["settings"]["existing_device_plugin"] = "adopt"
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "CHANGED", result
    assert "Adopted (gpu_sharing_stacks_existing_device_plugin: adopt): nvidia_device_plugin is not deployed, " \
           "nvidia.com/gpu stays with DaemonSet kube-system/nvidia-gpu-device-plugin" in result["msg"]
    argvs = [c["argv"] for c in calls(bin_dir)]
    assert not [a for a in argvs if a[0] == "apply"] and not (stacks / DS).exists()
    # ours, deployed by an earlier run, goes; theirs is never deleted
    assert [a[1] for a in argvs if a[0] == "delete"] == ["daemonset.apps/nvidia-device-plugin-daemonset"]


def test_dra_on_1_33_without_the_beta_api_served_is_refused_before_any_change(setup, tmp_path):
    """The version the role rendered (v1beta2 on 1.33) is checked against the API server's discovery."""
    dra_files = {"nvidia_dra/device-classes.yml": "", "nvidia_dra/rbac-kubelet-plugin.yml": "",
                 "nvidia_dra/admission-policy.yml": "", "nvidia_dra/kubelet-plugin.yml": ""}
    args, stacks, bin_dir = setup(_ready([answer(items())], False),
                                  settings={"kubernetes_version": "1.33.5", "stacks": ["nvidia_dra"],
                                            "dra_compute_domains": False, "manifest_dir": str(tmp_path / "stacks")},
                                  manifests=dra_files)
    result = run_module("gpu_sharing_stacks", args)
    assert result["status"] == "FAILED!", result
    assert "needs the beta API resource.k8s.io/v1beta2, which this API server does not serve" in result["msg"]
    assert "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true on kube-apiserver" \
        in result["msg"]
    assert not [c for c in calls(bin_dir) if c["argv"][0] in ("apply", "delete")]
    assert not (stacks / "nvidia_dra").exists()
