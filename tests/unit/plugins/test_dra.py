"""NVIDIA's DRA driver (plugins/module_utils/stacks/dra.py): the resource.k8s.io version per Kubernetes minor and
discovery, the refusals, the extended resource, the driver's feature gates, the claims per API version, the node
switch, and the checks of what the kubelet plugin publishes, against ResourceSlices built from a real H100 capture."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra, stacks
from dra_slices import H100, gpus_of, h100, quantity, semver

H100_FACTS = gpu.parse_nvidia_smi_xml((H100 / "nvidia-smi-q-x.xml").read_text())
NODE = "h100-node"


# --- the resource.k8s.io version ----------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "served", "expected"), [
    ("1.32.9", ["v1beta1"], "resource.k8s.io/v1beta1"),
    ("1.33.5", ["v1beta2", "v1beta1"], "resource.k8s.io/v1beta2"),
    ("1.34.1", ["v1"], "resource.k8s.io/v1"),
    ("1.35.0", ["v1", "v1beta2", "v1beta1"], "resource.k8s.io/v1"),
    ("1.37.0", ["v1"], "resource.k8s.io/v1"),
])
def test_the_version_each_minor_serves_is_chosen(version, served, expected):
    api = dra.resource_api(version, served)
    assert api["api_version"] == expected and api["assumed"] == ""
    assert api["stage"] == ("GA" if expected.endswith("/v1") else "beta")


@pytest.mark.parametrize("version", ["1.31.4", "1.30.4", "1.16.15"])
def test_before_1_32_is_refused_with_the_reason(version):
    with pytest.raises(KgnError) as err:
        dra.resource_api(version, ["v1alpha3"])
    text = str(err.value)
    assert f"kubernetes_version is {version}" in text and "1.32 or newer" in text
    assert "alpha before 1.32" in text and "kubeVersion >=1.32.0-0" in text and "nvidia_device_plugin" in text
    assert text.endswith("Nothing was changed.")


@pytest.mark.parametrize(("version", "served", "runtime_config"), [
    ("1.33.5", [], "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true on kube-apiserver"),
    ("1.32.9", [], "--runtime-config=resource.k8s.io/v1beta1=true on kube-apiserver"),
])
def test_a_beta_minor_without_the_api_served_names_the_gates_and_components(version, served, runtime_config):
    with pytest.raises(KgnError) as err:
        dra.resource_api(version, served)
    text = str(err.value)
    assert "(--feature-gates=DynamicResourceAllocation=true) on kube-apiserver, kube-controller-manager, " \
           "kube-scheduler, kubelet" in text
    assert runtime_config in text and "it lists no version of it" in text and "1.34+" in text


def test_1_33_serving_only_v1beta1_is_told_to_render_for_it():
    with pytest.raises(KgnError, match="set gpu_sharing_stacks_dra_resource_api to it") as err:
        dra.resource_api("1.33.5", ["v1beta1"])
    assert "It does serve resource.k8s.io/v1beta1" in str(err.value)
    assert dra.resource_api("1.33.5", ["v1beta1"], "resource.k8s.io/v1beta1")["version"] == "v1beta1"


def test_ga_with_dra_turned_off_is_refused():
    with pytest.raises(KgnError, match="DRA was turned off") as err:
        dra.resource_api("1.34.1", ["v1beta1"])
    assert "resource.k8s.io/v1=false" in str(err.value)


def test_without_discovery_the_minor_decides_and_a_beta_choice_is_assumed():
    assert dra.resource_api("1.34.1")["assumed"] == ""
    api = dra.resource_api("1.33.5")
    assert api["version"] == "v1beta2" and "discovery was not read" in api["assumed"]


def test_an_override_must_exist_in_the_minor():
    with pytest.raises(KgnError, match=r"Kubernetes 1\.32 has resource\.k8s\.io/v1beta1"):
        dra.resource_api("1.32.9", None, "v1beta2")


def test_discovery_is_read_from_the_apis_document():
    doc = {"kind": "APIGroupList", "groups": [
        {"name": "resource.k8s.io", "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"},
                                                 {"groupVersion": "resource.k8s.io/v1beta2", "version": "v1beta2"}]},
        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]}]}
    assert dra.served_groups(json.dumps(doc)) == {"resource.k8s.io": ["v1", "v1beta2"], "apps": ["v1"]}
    with pytest.raises(KgnError, match="APIGroupList"):
        dra.served_groups("{}")


# --- extended resource, feature gates, device classes, claims ------------------------------------------------

@pytest.mark.parametrize(("version", "setting", "enabled"), [
    ("1.33.5", "auto", False), ("1.34.1", "auto", False), ("1.35.0", "auto", False), ("1.36.0", "auto", True),
    ("1.37.0", "auto", True), ("1.34.1", True, True), ("1.36.0", False, False), ("1.35.0", "true", True)])
def test_the_extended_resource_follows_kep_5004(version, setting, enabled):
    minor = int(version.split(".")[1])
    api = "resource.k8s.io/v1" if minor >= 34 else "resource.k8s.io/v1beta2"
    assert dra.extended_resource(version, setting, api)["enabled"] is enabled


def test_the_extended_resource_is_refused_where_the_field_does_not_exist():
    with pytest.raises(KgnError, match=r"exists only in resource\.k8s\.io/v1, from Kubernetes 1\.34"):
        dra.extended_resource("1.33.5", True, "resource.k8s.io/v1beta2")


def test_feature_gates_render_as_the_chart_does_and_its_rules_hold():
    gates = dra.driver_feature_gates({"TimeSlicingSettings": True, "MPSSupport": "true"})
    assert gates["env"] == "MPSSupport=true,TimeSlicingSettings=true,"
    assert gates["effective"]["ComputeDomainCliques"] is True
    with pytest.raises(KgnError, match="ComputeDomainCliques requires IMEXDaemonsWithDNSNames"):
        dra.driver_feature_gates({"IMEXDaemonsWithDNSNames": False})
    with pytest.raises(KgnError, match="Nope is not a feature gate"):
        dra.driver_feature_gates({"Nope": True})
    with pytest.raises(KgnError, match="DynamicMIG is not offered"):
        dra.driver_feature_gates({"DynamicMIG": True})


def test_device_classes_are_the_charts_with_the_extended_resource_on_v1_only():
    ext = dra.extended_resource("1.36.0", "auto", "resource.k8s.io/v1")
    classes = dra.device_classes("resource.k8s.io/v1", True, ext)
    assert [c["name"] for c in classes] == ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com",
                                            "compute-domain-daemon.nvidia.com",
                                            "compute-domain-default-channel.nvidia.com"]
    assert classes[0]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert all("extendedResourceName" not in c["spec"] for c in classes[1:])
    assert [c["name"] for c in dra.device_classes("resource.k8s.io/v1beta1", False)] == [
        "gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]


def test_requests_take_the_shape_of_their_api_version():
    assert dra.device_request("resource.k8s.io/v1beta1", "gpu", "gpu.nvidia.com") == {
        "name": "gpu", "deviceClassName": "gpu.nvidia.com"}
    for api in ("resource.k8s.io/v1beta2", "resource.k8s.io/v1"):
        assert dra.device_request(api, "gpu", "gpu.nvidia.com") == {
            "name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}


def test_samples_follow_the_mig_layouts_and_the_sharing_gates():
    mig = dra.mig_profiles(["all-1g.10gb", [{"devices": "all", "profiles": ["3g.40gb", "2g.20gb"]}], "",
                            "all-disabled", "all-1g.10gb.me"])
    assert mig == {"profiles": ["1g.10gb", "1g.10gb+me", "2g.20gb", "3g.40gb"], "unnamed": False}
    plain = dra.sample_claims("resource.k8s.io/v1", None, dra.mig_profiles(["all-balanced"]))
    assert [c["name"] for c in plain["claims"]] == ["dra-gpu", "dra-mig"] and not plain["extended_pod"]
    gates = dra.driver_feature_gates({"TimeSlicingSettings": True, "MPSSupport": True})
    shared = dra.sample_claims("resource.k8s.io/v1", gates, mig, {"enabled": True})
    names = [c["name"] for c in shared["claims"]]
    assert names == ["dra-gpu", "dra-mig-1g-10gb", "dra-mig-1g-10gb-me", "dra-mig-2g-20gb", "dra-mig-3g-40gb",
                     "dra-time-slicing", "dra-mps"] and shared["extended_pod"]
    mps = shared["claims"][-1]["claim_spec"]["devices"]["config"][0]["opaque"]
    assert mps == {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}}}}


# --- the node: CDI, conflicts, the switch ------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "engine", "versions", "expected"), [
    ("cdi", "auto", None, []),
    ("legacy", "containerd", {"containerd": "2.1.4"}, ["gpu1: nvidia_dra needs CDI"]),
    ("auto", "containerd", {"containerd": "2.1.4"}, []),
    ("auto", "docker", {"docker": "24.0.7"}, ["gpu1: nvidia_dra needs CDI"]),
    ("auto", "auto", None, []),  # assumed versions: the node's own run decides
])
def test_the_validate_play_refuses_dra_where_the_runtime_mode_is_legacy(mode, engine, versions, expected):
    """The mode comes from the runtime's one decision (runtime.runtime_mode), fed with the inventory and what a
    run recorded."""
    from ansible_collections.kgn.gpu_nodes.plugins.filter import inventory
    hostvars = {"gpu1": {"kubernetes_version": "1.34.1", "nvidia_container_runtime_mode": mode,
                         "container_runtime": engine, "nvidia_container_toolkit_version": "1.20.0",
                         "kgn_observed_container_runtime":
                             {"versions": versions, "cri_dockerd": True} if versions else None}}
    roles = Path(__file__).resolve().parents[3] / "roles"
    defaults = {k: v for path in roles.glob("*/defaults/main.yml") for k, v in yaml.safe_load(path.read_text()).items()}
    run = {"gpu1": inventory.RoleInputs("gpu1", hostvars["gpu1"], hostvars, defaults)}
    found = inventory._dra_problems(run, {"gpu1": ["nvidia_dra"]})
    assert len(found) == len(expected)
    assert [p[:len(e)] for p, e in zip(found, expected, strict=True)] == expected


def test_a_node_without_cdi_is_refused_naming_what_to_set():
    [problem] = dra.node_problems("gpu1", ["nvidia_dra"], "1.34.1", "legacy")
    assert problem.startswith("gpu1: nvidia_dra needs CDI") and "nvidia_container_runtime_mode to cdi" in problem
    assert dra.node_problems("gpu1", ["nvidia_dra"], "1.34.1", None) == []
    assert dra.node_problems("gpu1", ["nvidia_device_plugin"], "1.20.1", "legacy") == []
    assert "1.32 or newer" in dra.node_problems("gpu1", ["nvidia_dra"], "1.31.4", "cdi")[0]


def test_dra_and_a_device_plugin_on_one_node_are_refused_naming_both_and_the_way_out():
    [problem] = stacks.stack_problems({"gpu1": ["nvidia_dra", "nvidia_device_plugin"], "gpu2": ["nvidia_dra"]})
    assert problem.startswith("gpu1: nvidia_dra and nvidia_device_plugin would both hand out this node's GPUs")
    assert "playbooks/nvidia_dra_switch.yml -l gpu1" in problem and "cordon, drain" in problem
    # different nodes of one cluster may run them (a migration in progress)
    assert stacks.stack_problems({"gpu1": ["nvidia_device_plugin"], "gpu2": ["nvidia_dra"]}) == []


def test_another_device_plugin_in_the_cluster_is_refused_for_dra_even_with_adopt():
    operator = {"daemonsets": [], "cluster_policies": [{"name": "cluster-policy", "device_plugin_enabled": True}]}
    assert [c["stack"] for c in stacks.stack_conflicts(["nvidia_dra"], operator)] == ["nvidia_dra"]
    inputs = {"kubernetes_version": "1.34.1", "stacks": ["nvidia_dra"], "existing_device_plugin": "adopt",
              "manifests": _manifests("1.34.1")}
    observed = {"files": [], "api": {"reachable": True, "objects": [], "served": {"resource.k8s.io": ["v1"]},
                                     "components": dict(operator, error="")}}
    with pytest.raises(KgnError) as err:
        stacks.stacks_plan(inputs, observed)
    text = str(err.value)
    assert "the NVIDIA GPU Operator (ClusterPolicy cluster-policy)" in text and "devicePlugin.enabled: false" in text
    assert "adopt does not apply to nvidia_dra" in text and "leave nvidia_dra out" in text


def test_the_switch_drains_only_when_pods_hold_gpus_and_needs_dra_deployed():
    plan = dra.switch_plan("gpu1", ["nvidia_device_plugin"], ["nvidia_dra"], ["ml/train-0"], ["nvidia_dra",
                                                                                               "nvidia_device_plugin"])
    assert plan["steps"] == ["cordon", "drain", "switch", "wait", "verify", "uncordon"]
    assert plan["remove"] == ["nvidia_device_plugin"] and plan["gpu_pods"] == ["ml/train-0"]
    idle = dra.switch_plan("gpu1", ["nvidia_device_plugin"], ["nvidia_dra"], [], ["nvidia_dra"])
    assert idle["steps"] == ["cordon", "switch", "wait", "verify", "uncordon"]
    assert dra.switch_plan("gpu1", ["nvidia_dra"], ["nvidia_dra"], [], ["nvidia_dra"])["steps"] == ["verify"]
    with pytest.raises(KgnError, match="not deployed in the cluster"):
        dra.switch_plan("gpu1", ["nvidia_device_plugin"], ["nvidia_dra"], [], ["nvidia_device_plugin"])
    with pytest.raises(KgnError, match="would both hand out"):
        dra.switch_plan("gpu1", [], ["nvidia_dra", "gpushare"], [], ["nvidia_dra"])


# --- what the kubelet plugin publishes (slices built from the real H100 capture) ------------------------------

def test_the_built_slices_are_valid_resource_slices_of_each_version():
    for version, api in (("1.32.0", "resource.k8s.io/v1beta1"), ("1.33.0", "resource.k8s.io/v1beta2"),
                         ("1.34.0", "resource.k8s.io/v1"), ("1.37.0", "resource.k8s.io/v1")):
        for layout in (None, ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]):
            kubernetes_validate.validate(h100(api, mig_layout=layout), version, strict=True)


def test_the_h100_slice_is_the_drivers():
    [device] = h100()["spec"]["devices"]
    assert device["name"] == "gpu-0"
    assert device["attributes"]["type"] == {"string": "gpu"}
    assert device["attributes"]["uuid"] == {"string": "GPU-00000000-0000-0000-0000-000000000000"}
    assert device["attributes"]["driverVersion"] == {"version": "580.159.4"}
    assert device["attributes"]["cudaDriverVersion"] == {"version": "13.0.0"}
    assert device["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": "0000:00:06.0"}
    assert device["attributes"]["brand"] == {"string": "Nvidia"}
    assert device["capacity"] == {"memory": {"value": "81559Mi"}}
    assert (quantity(1), quantity(9984 * 2**20), semver("9.0")) == ("1", "9984Mi", "9.0.0")
    assert gpus_of((H100 / "nvidia-smi-q-x.xml").read_text(), "9.0")[0]["addressing_mode"] == "None"


@pytest.mark.parametrize("api", ["resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1"])
def test_one_device_per_gpu_is_accepted(api):
    assert dra.slice_problems([h100(api)], NODE, H100_FACTS) == []
    assert dra.slice_problems({"items": [h100(api)]}, NODE, H100_FACTS) == []


def test_no_slice_for_a_node_with_gpus_is_a_problem():
    assert "no ResourceSlice of driver gpu.nvidia.com is published for node h100-node" in \
        dra.slice_problems([h100(node="other")], NODE, H100_FACTS)[0]
    assert dra.slice_problems([], NODE, {"gpus": []}) == []


def test_a_slice_for_another_gpu_is_a_problem():
    other = h100()
    other["spec"]["devices"][0]["attributes"]["uuid"]["string"] = "GPU-11111111-1111-1111-1111-111111111111"
    problems = dra.slice_problems([other], NODE, H100_FACTS)
    assert "GPU 0 (GPU-00000000-0000-0000-0000-000000000000) is published 0 time(s)" in problems[0]
    assert "not a GPU or MIG device nvidia-smi lists" in problems[1]


def _mig_facts(count):
    facts = copy.deepcopy(H100_FACTS)
    facts["gpus"][0].update(mig_mode_current="Enabled", mig_device_count=count)
    return facts


def test_mig_devices_are_published_instead_of_the_gpu():
    layout = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    built = h100(mig_layout=layout)
    names = [d["name"] for d in built["spec"]["devices"]]
    # placed where the driver puts them when the nvidia_mig role creates them in its order (mig.creation_order)
    assert names == ["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-2g20gb-14-2",
                     "gpu-0-mig-3g40gb-9-4"]
    big = built["spec"]["devices"][-1]
    assert big["capacity"]["multiprocessors"] == {"value": "60"} and big["capacity"]["memory"] == {"value": "40448Mi"}
    assert [k for k in big["capacity"] if k.startswith("memorySlice")] == [f"memorySlice{i}" for i in range(4, 8)]
    assert big["attributes"]["profile"] == {"string": "3g.40gb"}
    assert dra.slice_problems([built], NODE, _mig_facts(4)) == []
    assert "has 5 MIG device(s), the ResourceSlice publishes 4" in dra.slice_problems([built], NODE, _mig_facts(5))[0]
    assert "is in MIG mode but is published as a whole GPU" in dra.slice_problems([h100()], NODE, _mig_facts(0))[0]


def test_a_pool_still_being_published_is_a_problem_and_an_old_generation_is_ignored():
    current = h100()
    current["spec"]["pool"].update(generation=2, resourceSliceCount=2)
    old = h100(mig_layout=["7g.80gb"])
    assert "1 ResourceSlice(s) of generation 2, not the resourceSliceCount" in \
        dra.slice_problems([old, current], NODE, H100_FACTS)[0]
    current["spec"]["pool"]["resourceSliceCount"] = 1
    assert dra.slice_problems([old, current], NODE, H100_FACTS) == []


def test_device_classes_registration_and_allocatable_checks():
    classes = [{"metadata": {"name": c["name"]}, "spec": c["spec"]}
               for c in dra.device_classes("resource.k8s.io/v1", True)]
    assert dra.device_class_problems({"items": classes}, "resource.k8s.io/v1") == []
    classes[1]["spec"]["selectors"][0]["cel"]["expression"] = "true"
    assert dra.device_class_problems({"items": classes[1:]}, "resource.k8s.io/v1") == [
        "DeviceClass gpu.nvidia.com does not exist",
        "DeviceClass mig.nvidia.com selects ['true'], not the release's selector"]
    assert dra.registration_problems(["gpu.nvidia.com-reg.sock", "compute-domain.nvidia.com-reg.sock"]) == []
    assert dra.registration_problems(["compute-domain.nvidia.com-reg.sock"]) == [
        "/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock is missing: the DRA kubelet plugin for "
        "gpu.nvidia.com is not registered with the kubelet"]
    assert dra.registration_problems(["gpu.nvidia.com-reg.sock"], compute_domains=False) == []
    assert dra.allocatable_problems("n", {"nvidia.com/gpu": "0", "cpu": "8"}) == []
    [busy] = dra.allocatable_problems("n", {"nvidia.com/gpu": "1"})
    assert "advertises nvidia.com/gpu: 1 from a device plugin" in busy


# --- the stacks plan ----------------------------------------------------------------------------------------

def _manifests(version, **settings):
    plan = stacks.stacks_plan(dict({"kubernetes_version": version, "stacks": ["nvidia_dra"]}, **settings))
    return {m["path"]: "" for m in plan["manifests"]}


def test_the_plan_picks_the_templates_and_refuses_an_unserved_beta_version_before_any_change():
    plan = stacks.stacks_plan({"kubernetes_version": "1.33.5", "stacks": ["nvidia_dra"],
                               "dra_compute_domains": False})
    assert [m["template"] for m in plan["manifests"]] == [
        "nvidia_dra/rbac-kubelet-plugin.yml.j2", "nvidia_dra/admission-policy.yml.j2",
        "nvidia_dra/device-classes.yml.j2", "nvidia_dra/kubelet-plugin.yml.j2"]
    assert plan["dra"]["resource_api"] == "resource.k8s.io/v1beta2" and plan["images"]["nvidia_dra"] == dra.IMAGE
    assert any("discovery was not read" in a for a in plan["assumed"])
    observed = {"files": [], "api": {"reachable": True, "objects": [], "served": {"apps": ["v1"]}}}
    inputs = {"kubernetes_version": "1.33.5", "stacks": ["nvidia_dra"], "manifests": _manifests("1.33.5")}
    with pytest.raises(KgnError, match=r"needs the beta API resource\.k8s\.io/v1beta2, which this API server does not"):
        stacks.stacks_plan(inputs, observed)


def test_pruning_lists_the_dra_kinds_and_admission_policies_only_where_served():
    assert "deviceclasses.resource.k8s.io" not in stacks.pruned_resources("1.30.4", {"apps": ["v1"]})
    assert "validatingadmissionpolicies.admissionregistration.k8s.io" in stacks.pruned_resources("1.30.4", {})
    assert "validatingadmissionpolicies.admissionregistration.k8s.io" not in stacks.pruned_resources("1.29.4", {})
    kinds = stacks.pruned_resources("1.34.1", {"resource.k8s.io": ["v1"]})
    assert {"deviceclasses.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io"} <= set(kinds)


def test_the_switch_waits_for_the_slices_and_for_the_device_plugin_to_be_gone():
    node = {"kind": "Node", "metadata": {"name": NODE}, "status": {"allocatable": {"nvidia.com/gpu": "1"}}}
    answer = {"kind": "List", "items": [h100(), node]}
    assert dra.published_problems(answer, NODE, H100_FACTS) == dra.allocatable_problems(NODE, {"nvidia.com/gpu": "1"})
    node["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    assert dra.published_problems(json.dumps(answer), NODE, H100_FACTS) == []
    assert stacks.stacks_labelled({"nvidia.com/gpu.deploy.device-plugin": "true"}) == ["nvidia_device_plugin"]
    plan = stacks.dra_switch(NODE, {"nvidia.com/gpu.deploy.device-plugin": "true"}, ["nvidia_dra"],
                             {"items": [{"metadata": {"namespace": "ml", "name": "train"}, "spec": {"containers": [
                                 {"resources": {"limits": {"nvidia.com/gpu": 1}}}]}}]},
                             ["nvidia_device_plugin", "nvidia_dra"])
    assert plan["drain"] and plan["gpu_pods"] == ["ml/train"] and plan["remove"] == ["nvidia_device_plugin"]


def test_the_lab_stand_in_files_are_what_the_capture_gives():
    """molecule/nvidia_dra publishes this slice and checks against these facts, as a real H100 node would show."""
    files = H100.parents[3] / "molecule" / "nvidia_dra" / "files"
    assert json.loads((files / "h100-resourceslice.json").read_text()) == h100("resource.k8s.io/v1", "nvidia-dra-gpu")
    assert json.loads((files / "h100-gpu-facts.json").read_text()) == H100_FACTS
