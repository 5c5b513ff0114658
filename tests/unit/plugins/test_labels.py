"""Node labels from GPU facts + stacks, and the label patch that only touches this project's labels.

The facts mirror the real nvidia-smi samples in tests/unit/library/fixtures (tesla-t4.xml,
a100-sxm4-80gb-mig.xml) in the shape the gpu_facts module returns.
"""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels.labels import (
    MANAGED_ANNOTATION,
    kubelet_node_labels,
    labels_plan,
    node_gpu_problems,
    node_label_patch,
    node_labels,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan

T4 = {
    "gpu_present": True,
    "driver_version": "515.105.01",
    "cuda_version": "11.7",
    "gpus": [
        {
            "product_name": "Tesla T4",
            "uuid": "GPU-t4",
            "memory_total_mib": 15360,
            "compute_capability": "7.5",
            "mig_mode_current": "N/A",
        }
    ],
}
A100_MIG = {
    "gpu_present": True,
    "driver_version": "535.54.03",
    "cuda_version": "12.2",
    "gpus": [
        {
            "product_name": "NVIDIA A100-SXM4-80GB",
            "uuid": "GPU-a100",
            "memory_total_mib": 81920,
            "compute_capability": "8.0",
            "mig_mode_current": "Enabled",
        }
    ],
}
P4 = {
    "gpu_present": True,
    "driver_version": "470.82.01",
    "cuda_version": "11.4",
    "gpus": [
        {
            "product_name": "Tesla P4",
            "uuid": "GPU-p4",
            "memory_total_mib": 7680,
            "compute_capability": "6.1",
            "mig_mode_current": "N/A",
        }
    ],
}
NO_GPU = {"gpu_present": False, "gpus": [], "driver_version": None, "cuda_version": None}

T4_GPU_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.count": "1",
    "nvidia.com/gpu.product": "Tesla-T4",
    "nvidia.com/gpu.memory": "15360",
    "nvidia.com/gpu.compute.major": "7",
    "nvidia.com/gpu.compute.minor": "5",
    "nvidia.com/gpu.family": "turing",
    "nvidia.com/mig.capable": "false",
    "nvidia.com/cuda.driver-version.major": "515",
    "nvidia.com/cuda.driver-version.minor": "105",
    "nvidia.com/cuda.driver-version.revision": "01",
    "nvidia.com/cuda.driver-version.full": "515.105.01",
    "nvidia.com/cuda.runtime-version.major": "11",
    "nvidia.com/cuda.runtime-version.minor": "7",
    "nvidia.com/cuda.runtime-version.full": "11.7",
    "accelerator": "nvidia-tesla-t4",
    "kube-gpu-nodes.io/gpu.volta-mps": "true",
}


def test_t4_gpushare_node_exact_labels():
    assert node_labels(T4, ["gpushare"]) == {**T4_GPU_LABELS, "gpushare": "true"}


def test_a100_mig_node_with_time_sliced_device_plugin_exact_labels():
    assert node_labels(A100_MIG, ["nvidia_device_plugin"], "time-slicing") == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/cuda.driver-version.major": "535",
        "nvidia.com/cuda.driver-version.minor": "54",
        "nvidia.com/cuda.driver-version.revision": "03",
        "nvidia.com/cuda.driver-version.full": "535.54.03",
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "2",
        "nvidia.com/cuda.runtime-version.full": "12.2",
        "accelerator": "nvidia-a100-sxm4-80gb",
        "kube-gpu-nodes.io/gpu.volta-mps": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/mps.capable": "false",
    }


def test_node_without_gpu_gets_no_stack_labels():
    assert node_labels(NO_GPU, ["gpushare", "elastic_gpu"]) == {"nvidia.com/gpu.present": "false"}
    # before the driver is loaded an operator may still want the selectors
    assert node_labels(NO_GPU, ["elastic_gpu"], "none", False) == {
        "nvidia.com/gpu.present": "false",
        "gpu-node": "true",
    }


@pytest.mark.parametrize(
    ("stack", "selector"),
    [
        ("gpushare", {"gpushare": "true"}),
        ("nano_gpu", {"nano-gpu": "true"}),
        ("elastic_gpu", {"gpu-node": "true"}),
        ("hami", {"gpu": "on"}),  # HAMi's README: without gpu=on its scheduler does not manage the node
        (
            "nvidia_device_plugin",
            {
                "nvidia.com/gpu.deploy.device-plugin": "true",
                "nvidia.com/gpu.sharing-strategy": "none",
                "nvidia.com/mps.capable": "false",
            },
        ),
    ],
)
def test_each_stack_adds_its_selector(stack, selector):
    assert node_labels(T4, [stack]) == {**T4_GPU_LABELS, **selector}


def test_mps_sharing_sets_mps_capable_like_gfd():
    labels = node_labels(T4, ["nvidia_device_plugin"], "mps")
    assert labels["nvidia.com/mps.capable"] == "true"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"


def test_pre_volta_gpu_is_not_volta_mps_capable():
    assert node_labels(P4)["kube-gpu-nodes.io/gpu.volta-mps"] == "false"


@pytest.mark.parametrize(
    ("facts", "stacks", "sharing", "gpushare_mps", "expected"),
    [
        (T4, ["gpushare"], "none", True, []),
        (
            P4,
            ["gpushare"],
            "none",
            True,
            ["gpushare_mps is true but this node's GPUs (Tesla P4) do not support Volta MPS"],
        ),
        (P4, ["nvidia_device_plugin"], "mps", False, ["device plugin MPS sharing needs Volta or newer GPUs"]),
        (
            A100_MIG,
            ["nvidia_device_plugin"],
            "mps",
            False,
            ["device plugin MPS sharing is not supported on MIG-enabled"],
        ),
        (A100_MIG, ["nvidia_device_plugin"], "time-slicing", False, []),
    ],
)
def test_gpu_capability_problems(facts, stacks, sharing, gpushare_mps, expected):
    problems = node_gpu_problems(facts, stacks, sharing, gpushare_mps)
    assert len(problems) == len(expected)
    for problem, start in zip(problems, expected, strict=True):
        assert problem.startswith(start)


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        (None, "must be the result of the gpu_facts module"),
        ({"gpus": "x"}, "gpu_facts.gpus must be a list"),
    ],
)
def test_bad_facts_are_refused(facts, message):
    with pytest.raises(KgnError, match=message):
        node_labels(facts, ["gpushare"])


def test_bad_sharing_mode_is_refused():
    with pytest.raises(KgnError, match="sharing is 'timeslicing'"):
        node_labels(T4, ["nvidia_device_plugin"], "timeslicing")


FOREIGN = {"kubernetes.io/hostname": "gpu1", "team": "ml"}


def test_first_run_sets_labels_and_records_them():
    desired = {"gpushare": "true", "accelerator": "nvidia-tesla-t4"}
    change = node_label_patch(desired, FOREIGN, {})
    assert change["patch"] == {
        "metadata": {
            "labels": {"accelerator": "nvidia-tesla-t4", "gpushare": "true"},
            "annotations": {MANAGED_ANNOTATION: "accelerator,gpushare"},
        }
    }
    assert change["changed"] is True


def test_second_run_changes_nothing():
    labels = {**FOREIGN, "gpushare": "true", "accelerator": "nvidia-tesla-t4"}
    change = node_label_patch(
        {"gpushare": "true", "accelerator": "nvidia-tesla-t4"}, labels, {MANAGED_ANNOTATION: "accelerator,gpushare"}
    )
    assert change == {
        "patch": {},
        "changed": False,
        "set": {},
        "removed": [],
        "foreign": [],
        "managed": ["accelerator", "gpushare"],
    }


def test_disabling_a_stack_removes_only_its_recorded_labels():
    # gpushare was enabled before; now the node moves to elastic_gpu
    before = {**FOREIGN, **node_labels(T4, ["gpushare"])}
    recorded = ",".join(sorted(node_labels(T4, ["gpushare"])))
    change = node_label_patch(node_labels(T4, ["elastic_gpu"]), before, {MANAGED_ANNOTATION: recorded})
    assert change["patch"]["metadata"]["labels"] == {"gpu-node": "true", "gpushare": None}
    assert change["removed"] == ["gpushare"]
    assert "team" not in change["patch"]["metadata"]["labels"]
    assert "gpushare" not in change["patch"]["metadata"]["annotations"][MANAGED_ANNOTATION].split(",")


def test_label_set_by_someone_else_is_never_removed_or_adopted():
    # the operator labelled the node by hand as in the kubeasz reference cluster: gpushare=true
    change = node_label_patch({"gpushare": "true"}, {"gpushare": "true"}, {})
    assert change["patch"] == {}
    assert change["managed"] == []
    # disabling the stack later: the hand-made label stays
    assert node_label_patch({}, {"gpushare": "true"}, {})["patch"] == {}


def test_foreign_value_is_reported_not_overwritten_unless_asked():
    change = node_label_patch({"accelerator": "nvidia-tesla-t4"}, {"accelerator": "t4"}, {})
    assert change["patch"] == {}
    assert change["foreign"] == ["accelerator"]
    forced = node_label_patch({"accelerator": "nvidia-tesla-t4"}, {"accelerator": "t4"}, {}, True)
    assert forced["patch"]["metadata"]["labels"] == {"accelerator": "nvidia-tesla-t4"}


def test_last_managed_label_gone_removes_the_annotation():
    change = node_label_patch({}, {"gpushare": "true"}, {MANAGED_ANNOTATION: "gpushare"})
    assert change["patch"] == {"metadata": {"labels": {"gpushare": None}, "annotations": {MANAGED_ANNOTATION: None}}}


@pytest.mark.parametrize(
    ("desired", "message"),
    [
        ({"gpushare": True}, "not a valid label value"),
        ({"bad key!": "x"}, "not a valid Kubernetes label key"),
        (["gpushare"], "must be a dict"),
    ],
)
def test_bad_label_input_is_refused(desired, message):
    with pytest.raises(KgnError, match=message):
        node_label_patch(desired, {}, {})


def test_kubelet_node_labels_flag():
    assert (
        kubelet_node_labels({"gpushare": "true", "accelerator": "nvidia-tesla-t4"})
        == "accelerator=nvidia-tesla-t4,gpushare=true"
    )
    with pytest.raises(KgnError, match=r"kubernetes\.io / k8s\.io"):
        kubelet_node_labels({"node-role.kubernetes.io/gpu": ""})


# ---------------------------------------------------------------------------------------------------------
# labels_plan: every node one API server serves


def _api(**nodes):
    return {"reachable": True, "error": "", "nodes": nodes}


def _labelled(labels):
    return {"labels": labels, "annotations": {MANAGED_ANNOTATION: ",".join(sorted(labels))}}


def test_labels_plan_is_the_node_labels_section_of_the_host_plan():
    inputs = {"nodes": {"gpu1": {"gpu_facts": T4, "stacks": ["gpushare"]}}}
    assert host_plan({"node_labels": inputs}, {"node_labels": _api(gpu1={})})["node_labels"] == labels_plan(
        inputs, _api(gpu1={}))


def test_each_node_gets_a_patch_only_when_it_differs():
    desired = node_labels(T4, ["gpushare"])
    plan = labels_plan(
        {"nodes": {"gpu1": {"gpu_facts": T4, "stacks": ["gpushare"]},
                   "gpu2": {"gpu_facts": T4, "stacks": ["gpushare"], "node_name": "gpu-2"}}},
        _api(gpu1={"labels": {"kubernetes.io/hostname": "gpu1"}}, **{"gpu-2": _labelled(desired)}),
    )
    first, second = plan["nodes"]["gpu1"], plan["nodes"]["gpu2"]
    assert first["status"] == "patch" and first["set"] == desired
    assert first["patch"]["metadata"]["annotations"][MANAGED_ANNOTATION] == ",".join(sorted(desired))
    assert second["status"] == "unchanged" and second["patch"] == {} and second["node_name"] == "gpu-2"


def test_an_unreachable_api_and_an_unknown_node_are_said_per_node():
    inputs = {"nodes": {"gpu1": {"gpu_facts": T4, "stacks": ["gpushare"]}}}
    down = labels_plan(inputs, {"reachable": False, "error": "connection refused", "nodes": {}})["nodes"]["gpu1"]
    assert (down["status"], down["reason"], down["patch"]) == ("api unreachable", "connection refused", {})
    assert down["desired"]["gpushare"] == "true"  # still said: what it would have got
    missing = labels_plan(inputs, _api(other={}))["nodes"]["gpu1"]
    assert missing["status"] == "not registered" and "gpu1 is not registered" in missing["reason"]


def test_a_node_whose_gpus_cannot_run_its_stacks_is_refused_alone():
    plan = labels_plan(
        {"nodes": {"p4": {"gpu_facts": P4, "stacks": ["gpushare"], "gpushare_mps": True},
                   "two": {"gpu_facts": T4, "stacks": ["gpushare", "nvidia_device_plugin"]},
                   "t4": {"gpu_facts": T4, "stacks": ["gpushare"]}}},
        _api(p4={}, two={}, t4={}))["nodes"]
    assert plan["p4"]["status"] == "refused" and "do not support Volta MPS" in plan["p4"]["problems"][0]
    assert plan["two"]["status"] == "refused" and "both claim every GPU" in plan["two"]["reason"]
    assert plan["p4"]["patch"] == {} and plan["t4"]["status"] == "patch"


@pytest.mark.parametrize(("settings", "message"), [
    ({"sharing": "mig"}, "sharing mode is 'mig'"),
    ({"require_gpu": "yes"}, "require_gpu must be true or false"),
    ({"extra": {"team": 1}}, "not a valid label value"),
    ({"colour": "red"}, "unknown node setting"),
    ({"stacks": ["hamy"]}, "unknown stack"),
])
def test_bad_settings_refuse_that_node_with_the_fix(settings, message):
    entry = labels_plan({"nodes": {"gpu1": {"gpu_facts": T4, **settings}}}, _api(gpu1={}))["nodes"]["gpu1"]
    assert entry["status"] == "refused" and message in entry["reason"]


def test_two_inventory_hosts_on_one_node_are_refused():
    plan = labels_plan({"nodes": {"a": {"node_name": "n"}, "b": {"node_name": "n"}}}, _api(n={}))["nodes"]
    assert plan["a"]["status"] == plan["b"]["status"] == "refused"
    assert "a and b all map to the node n" in plan["a"]["reason"]


def test_unknown_gpu_facts_set_no_gpu_label_and_keep_the_recorded_ones():
    before = _labelled({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "Tesla-T4", "gpushare": "true"})
    entry = labels_plan({"nodes": {"gpu1": {"gpu_facts": {}, "stacks": ["nano_gpu"]}}},
                        _api(gpu1=before))["nodes"]["gpu1"]
    assert entry["desired"] == {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "Tesla-T4",
                                "nano-gpu": "true"}
    assert entry["removed"] == ["gpushare"]  # a stack label: known to go
    assert any("GPU labels" in note and "kept" in note for note in entry["assumed"])


def test_a_render_without_gpu_facts_never_claims_there_is_no_gpu():
    plan = labels_plan({"nodes": {"gpu1": {"stacks": ["gpushare"]}}}, {})
    entry = plan["nodes"]["gpu1"]
    assert entry["status"] == "render"
    assert entry["patch"]["metadata"]["labels"] == {"gpushare": "true"}
    assert "nvidia.com/gpu.present" not in entry["desired"]
    assert any(note.startswith("gpu1: no GPU facts") for note in plan["assumed"])
    assert any("against a node without labels" in note for note in plan["assumed"])


def test_a_render_with_the_recorded_node_sends_only_what_differs():
    desired = node_labels(T4, ["gpushare"])
    entry = labels_plan({"nodes": {"gpu1": {"gpu_facts": T4, "stacks": ["gpushare"]}}},
                        {"nodes": {"gpu1": _labelled(desired)}})["nodes"]["gpu1"]
    assert entry["status"] == "render" and entry["patch"] == {}
    assert any("recorded by the last run" in note for note in entry["assumed"])


@pytest.mark.parametrize(("inputs", "observed", "message"), [
    ({"gpu1": {}}, {}, "inputs must be"),
    ({"nodes": {}}, {"reachable": "yes"}, "reachable must be"),
    ({"nodes": {}}, {"reachable": True, "nodes": []}, "observed.nodes must map"),
])
def test_labels_plan_refuses_malformed_input(inputs, observed, message):
    with pytest.raises(KgnError, match=message):
        labels_plan(inputs, observed)


def test_the_runtime_mode_is_a_label_when_known():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels import labels as lab

    plan = lab.labels_plan({"nodes": {"n1": {"runtime_mode": "cdi"}, "n2": {}}},
                           {"reachable": True, "nodes": {"n1": {"labels": {}}, "n2": {"labels": {
                               lab.RUNTIME_MODE_LABEL: "legacy"}, "annotations": {
                               lab.MANAGED_ANNOTATION: lab.RUNTIME_MODE_LABEL}}}})
    assert plan["nodes"]["n1"]["desired"][lab.RUNTIME_MODE_LABEL] == "cdi"
    assert plan["nodes"]["n2"]["desired"][lab.RUNTIME_MODE_LABEL] == "legacy"  # not known this run: kept
    refused = lab.labels_plan({"nodes": {"n1": {"runtime_mode": "jit-cdi"}}}, {"reachable": True, "nodes": {}})
    assert refused["nodes"]["n1"]["status"] == "refused"
    assert "runtime mode is 'jit-cdi'" in refused["nodes"]["n1"]["reason"]


def test_the_driver_flavour_label_is_what_the_node_says():
    h100 = {"gpu_present": True, "gpus": [{"product_name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}],
            "kernel_module": {"version": "580.159.04", "flavour": "open", "source": "/proc/driver/nvidia/version"}}
    assert node_labels(h100)["kube-gpu-nodes.io/driver.kernel-module"] == "open"
    # the node does not say (no module loaded, modinfo silent): no label, never an assumed one
    unknown = {**h100, "kernel_module": {"version": "", "flavour": "", "source": ""}}
    assert "kube-gpu-nodes.io/driver.kernel-module" not in node_labels(unknown)
