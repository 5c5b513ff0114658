"""The DRA checks of verify (plugins/module_utils/verify/checks_dra.py) and the report's DRA column, judged the way the
gpu_node_verify action judges a host (verify.verify_host): the k8s_read answer of the API server, the node's
recorded states and the gpu_node_verify module's probe. The node is the captured H100 (tests/unit/fixtures/
nvidia-h100-80gb-hbm3-580); its ResourceSlice is what NVIDIA's DRA kubelet plugin v0.4.1 publishes for it
(dra_slices.py). Each failure asserts the check that fails and the registered cause that explains it."""

from __future__ import annotations

import copy

import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks_dra, verify
from conftest import ROOT
from dra_slices import H100, h100

NODE = "h100-node"
H100_FACTS = gpu.parse_nvidia_smi_xml((H100 / "nvidia-smi-q-x.xml").read_text())
REGISTERED = ["compute-domain.nvidia.com-reg.sock", "gpu.nvidia.com-reg.sock"]
MIG_LAYOUT = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
DRA_LABELS = {"kube-gpu-nodes.io/nvidia-dra": "true"}


def classes(compute_domains=True):
    """The DeviceClasses as the API returns them after playbooks/gpu_sharing_stacks.yml applied the release's."""
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": c["name"]},
             "spec": c["spec"]} for c in dra.device_classes("resource.k8s.io/v1", compute_domains)]


def kubelet_plugin(ready=1):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "dra-driver-nvidia-gpu-kubelet-plugin", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"containers": [{"name": "gpus"}]}}},
            "status": {"desiredNumberScheduled": 1, "numberReady": ready}}


def answer(slices=None, device_classes=None, labels=None, allocatable=None, served=True, daemonsets=None):
    """The k8s_read answer of the API server (a cluster that does not serve resource.k8s.io: served False)."""
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE, "labels": dict(DRA_LABELS if labels is None else labels)},
            "status": {"allocatable": dict({"cpu": "32"} if allocatable is None else allocatable)}}

    def kind(items):
        if not served:
            return {"served": False, "items": [],
                    "error": 'error: the server doesn\'t have a resource type "resourceslices"'}
        return {"served": True, "error": "", "items": items}

    return {"reachable": True, "error": "", "resources": {
        "nodes": {"served": True, "items": [node]},
        "daemonsets.apps": {"served": True, "items": [kubelet_plugin()] if daemonsets is None else daemonsets},
        "deployments.apps": {"served": True, "items": []},
        "mutatingwebhookconfigurations.admissionregistration.k8s.io": {"served": True, "items": []},
        "resourceslices.resource.k8s.io": kind([h100(node=NODE)] if slices is None else slices),
        "deviceclasses.resource.k8s.io": kind(classes() if device_classes is None else device_classes)}}


def states(facts=H100_FACTS, mig_live=None, dra_plan=None):
    """The recorded states: the driver's live GPUs (its gpu_facts answer), nvidia_mig's live layout, the stacks plan
    of the API host."""
    found = {"nvidia_driver": {"plan": {}, "live": {"gpu": copy.deepcopy(facts)}}}
    if mig_live is not None:
        found["nvidia_mig"] = {"plan": {"managed": True, "layout": "custom"}, "live": {"gpus": mig_live}}
    if dra_plan is not None:
        found["stacks"] = {"plan": {"namespace": "kube-system", "dra": dra_plan}}
    return found


def probe(entries=REGISTERED, exists=True):
    return {"gpu_node": True, "pci_devices": [{"address": "0000:00:06.0", "device": "0x2330", "class": "0x030200"}],
            "modules": {"nvidia": True, "nouveau": False},
            "kubelet_plugins_registry": {"dir": "/var/lib/kubelet/plugins_registry", "dir_exists": exists,
                                         "entries": list(entries)}}


def judge(api=None, recorded=None, probed=None, stacks=("nvidia_dra",), **settings):
    row = verify.verify_host(dict({"host": NODE, "kinds": ["gpu_node"], "stacks": list(stacks), "expect_gpu": True},
                                  **settings),
                             states() if recorded is None else recorded, probe() if probed is None else probed,
                             answer() if api is None else api)
    return row, {c["id"]: c for c in row["checks"]}


def causes(found):
    """The ids of the causes that explain a result; every value the texts name is in its evidence (else "?")."""
    for item in found["diagnosis"]:
        assert "?" not in item["cause"] + item["fix"], item
    return [d["id"] for d in found["diagnosis"]]


def test_a_node_the_dra_driver_alone_serves_passes_every_dra_check():
    row, checks = judge()
    assert {k: checks[k]["status"] for k in checks_dra.CHECKS} == dict.fromkeys(checks_dra.CHECKS, "ok")
    assert checks["dra_registered"]["summary"] == "registered: " + ", ".join(REGISTERED)
    assert checks["dra_resourceslices"]["summary"] == "1 device(s) for 1 GPU(s): gpu-0"
    assert checks["dra_device_classes"]["evidence"]["missing"] == []
    assert checks["dra_no_device_plugin"]["summary"] == "nvidia.com/gpu: none"
    assert row["dra"] == "ok"
    # the device plugin's own rows do not apply to a node the DRA driver serves (no "skipped: no stack" there)
    assert "device_plugin_socket" not in checks and "allocatable" not in checks


def test_a_node_without_nvidia_dra_has_no_dra_check_and_a_dash_even_where_dra_is_not_served():
    row, checks = judge(api=answer(served=False), stacks=("nvidia_device_plugin",),
                        labels={"nvidia.com/gpu.deploy.device-plugin": "true"})
    assert not set(checks_dra.CHECKS) & set(checks)
    assert row["dra"] == "-"
    # a control plane has no DRA column at all
    cp = verify.verify_host({"host": "cp1", "kinds": ["control_plane"], "stacks": ["nvidia_dra"]}, {}, {}, answer())
    assert cp["dra"] == "-" and not set(checks_dra.CHECKS) & {c["id"] for c in cp["checks"]}


def test_the_api_reads_the_dra_kinds_once_with_the_others():
    role_vars = yaml.safe_load((ROOT / "roles/gpu_node_verify/vars/main.yml").read_text())
    assert role_vars["__gpu_node_verify_api_resources"] == list(verify.API_RESOURCES)
    assert role_vars["__gpu_node_verify_api_raw"] == list(verify.API_RAW)
    assert {"resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"} <= set(verify.API_RESOURCES)


def test_a_cluster_that_serves_no_resource_k8s_io_fails_the_dra_node_naming_the_gates():
    row, checks = judge(api=answer(served=False))
    for check_id, cause_id in (("dra_resourceslices", "dra_slices_api_not_served"),
                               ("dra_device_classes", "dra_classes_api_not_served")):
        assert checks[check_id]["status"] == "failed"
        assert causes(checks[check_id]) == [cause_id]
        assert "DynamicResourceAllocation" in checks[check_id]["diagnosis"][0]["fix"]
    assert row["verdict"] == "failed" and row["dra"].startswith("the API server does not serve resource.k8s.io")


@pytest.mark.parametrize(("entries", "exists", "daemonsets", "labels", "cause_id"), [
    (["gpu.nvidia.com-reg.sock"], True, None, None, "dra_plugin_not_running"),
    ([], True, [], None, "dra_not_deployed"),
    ([], True, None, {}, "dra_label_missing"),
    ([], False, None, None, "dra_registry_missing"),
])
def test_a_kubelet_plugin_not_registered_fails_with_its_cause(entries, exists, daemonsets, labels, cause_id):
    row, checks = judge(api=answer(daemonsets=daemonsets, labels=labels), probed=probe(entries, exists))
    found = checks["dra_registered"]
    assert found["status"] == "failed"
    assert cause_id in causes(found)
    if cause_id == "dra_plugin_not_running":
        assert found["summary"].startswith("/var/lib/kubelet/plugins_registry/compute-domain.nvidia.com-reg.sock is "
                                           "missing")
        assert "kubectl -n kube-system get pods -o wide -l dra-driver-nvidia-gpu-component=kubelet-plugin" in \
            found["diagnosis"][0]["fix"]
    assert row["dra"] == found["summary"]


def test_without_compute_domains_only_the_gpu_plugin_and_three_classes_are_expected():
    plan = {"enabled": True, "resource_api": "resource.k8s.io/v1", "compute_domains": False}
    _, checks = judge(api=answer(device_classes=classes(False)), recorded=states(dra_plan=plan),
                      probed=probe(["gpu.nvidia.com-reg.sock"]))
    assert checks["dra_registered"]["status"] == "ok"
    assert checks["dra_device_classes"]["evidence"]["expected"] == ["gpu.nvidia.com", "mig.nvidia.com",
                                                                    "vfio.gpu.nvidia.com"]
    assert checks["dra_device_classes"]["status"] == "ok"


def test_no_slice_for_the_node_fails_and_points_at_the_registration_when_that_failed():
    _, checks = judge(api=answer(slices=[h100(node="other-node")]))
    assert checks["dra_resourceslices"]["status"] == "failed"
    assert causes(checks["dra_resourceslices"]) == ["dra_slices_none"]
    assert "kubectl -n kube-system get pods" in checks["dra_resourceslices"]["diagnosis"][0]["fix"]
    _, checks = judge(api=answer(slices=[]), probed=probe([]))
    assert causes(checks["dra_resourceslices"]) == ["dra_slices_not_published"]


def test_a_slice_that_differs_from_the_gpus_fails():
    other = h100(node=NODE)
    other["spec"]["devices"][0]["attributes"]["uuid"] = {"string": "GPU-ffffffff-0000-0000-0000-000000000000"}
    _, checks = judge(api=answer(slices=[other]))
    found = checks["dra_resourceslices"]
    assert found["status"] == "failed"
    assert "is published 0 time(s) as a whole GPU" in found["summary"]
    assert causes(found) == ["dra_slices_differ"]


def test_a_pool_still_being_published_fails_with_its_cause():
    partial = h100(node=NODE)
    partial["spec"]["pool"]["resourceSliceCount"] = 2
    _, checks = judge(api=answer(slices=[partial]))
    assert checks["dra_resourceslices"]["status"] == "failed"
    assert causes(checks["dra_resourceslices"]) == ["dra_slices_pool_incomplete"]


def test_the_mig_layout_nvidia_mig_recorded_is_what_the_slices_are_compared_with():
    mig_live = [{"index": 0, "mig": True, "pending": True, "profiles": sorted(MIG_LAYOUT), "complete": True}]
    migged = answer(slices=[h100(node=NODE, mig_layout=MIG_LAYOUT)])
    # the driver's facts were read before nvidia_mig changed the layout (MIG off there): its live state wins
    _, checks = judge(api=migged, recorded=states(mig_live=mig_live))
    assert checks["dra_resourceslices"]["status"] == "ok"
    assert checks["dra_resourceslices"]["evidence"]["published"] == 4
    # the kubelet plugin still publishes the whole GPU after the layout changed
    _, checks = judge(recorded=states(mig_live=mig_live))
    found = checks["dra_resourceslices"]
    assert found["status"] == "failed" and "is in MIG mode but is published as a whole GPU" in found["summary"]
    assert causes(found) == ["dra_slices_differ"]


def test_the_inventorys_gpu_facts_stand_in_for_a_node_without_recorded_gpus():
    _, checks = judge(recorded={})
    assert checks["dra_resourceslices"]["status"] == "skipped"
    _, checks = judge(recorded={}, gpu_facts=H100_FACTS)
    assert checks["dra_resourceslices"]["status"] == "ok"
    assert checks["dra_resourceslices"]["evidence"]["gpus_from"] == "gpu_node_verify_gpu_facts"


@pytest.mark.parametrize(("listed", "cause_id", "text"), [
    (classes()[1:], "dra_classes_missing", "DeviceClass gpu.nvidia.com does not exist"),
    ([dict(c, spec={"selectors": [{"cel": {"expression": "true"}}]}) if c["metadata"]["name"] == "mig.nvidia.com"
      else c for c in classes()], "dra_classes_changed", "DeviceClass mig.nvidia.com selects ['true']"),
])
def test_device_classes_missing_or_changed_fail_with_their_cause(listed, cause_id, text):
    _, checks = judge(api=answer(device_classes=listed))
    found = checks["dra_device_classes"]
    assert found["status"] == "failed" and text in found["summary"]
    assert causes(found) == [cause_id]


@pytest.mark.parametrize(("labels", "cause_id"), [
    ({**DRA_LABELS, "nvidia.com/gpu.deploy.device-plugin": "true"}, "dra_device_plugin_label"),
    (DRA_LABELS, "dra_other_device_plugin"),
])
def test_a_device_plugin_still_advertising_nvidia_com_gpu_fails(labels, cause_id):
    row, checks = judge(api=answer(labels=labels, allocatable={"nvidia.com/gpu": "1"}))
    found = checks["dra_no_device_plugin"]
    assert found["status"] == "failed"
    assert "advertises nvidia.com/gpu: 1 from a device plugin" in found["summary"]
    assert causes(found) == [cause_id]
    assert row["verdict"] == "failed"
    # kubelet keeps the resource at 0 once the device plugin left: that is fine
    _, checks = judge(api=answer(allocatable={"nvidia.com/gpu": "0"}))
    assert checks["dra_no_device_plugin"]["status"] == "ok"


def test_without_an_api_the_dra_checks_are_skipped_not_failed():
    row, checks = judge(api={"reachable": False, "error": "dial tcp 10.0.0.1:6443: connection refused"})
    assert checks["dra_resourceslices"]["status"] == "skipped"
    assert checks["dra_device_classes"]["status"] == "skipped"
    assert checks["dra_no_device_plugin"]["status"] == "skipped"
    assert checks["dra_registered"]["status"] == "ok"  # read on the node itself
    assert row["dra"] == "skipped: no API"


def test_the_stacks_plan_keeps_what_the_dra_checks_expect():
    recorded = {"stacks": {"plan": {"namespace": "gpu", "dra": {"enabled": True, "resource_api": "resource.k8s.io/v1",
                                                                 "compute_domains": False}}}}
    assert checks_dra.expected(["nvidia_dra"], recorded) == {
        "enabled": True, "resource_api": "resource.k8s.io/v1", "compute_domains": False, "namespace": "gpu",
        "assumed": ""}
    assert checks_dra.expected(["nvidia_dra"], {})["compute_domains"] is True
    assert checks_dra.expected(["nvidia_dra"], {})["assumed"]
