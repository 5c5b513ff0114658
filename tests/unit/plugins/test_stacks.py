"""The stack catalog, the extenders it hands to kube-scheduler, and the conflict checks."""

from __future__ import annotations

import re

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler import (
    scheduler_config,
    scheduler_variant,
)
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import (
    STACKS,
    secondary_scheduler,
    stack_catalog,
    stack_conflicts,
    stack_extenders,
    stack_image,
    stack_problems,
    stack_service_urls,
    stacks_plan,
)
from reference_extenders import gpushare

URLS = {
    "gpushare": "http://127.0.0.1:32766",
    "nano_gpu": "http://127.0.0.1:32765",
    "elastic_gpu": "http://127.0.0.1:32764",
}


def test_gpushare_extender_matches_the_reference_policy():
    # the gpushare design and kubeasz 1.23 reference clusters (docs/field-notes.md)
    assert stack_extenders(["gpushare"], URLS) == [gpushare("http://127.0.0.1:32766/gpushare-scheduler")]


def test_nano_gpu_extender_has_prioritize_and_weight_as_in_the_superedge_reference_cluster():
    [ext] = stack_extenders(
        ["nano_gpu"],
        {"nano_gpu": "http://10.0.0.1:8080/api/v1/namespaces/kube-system/services/nano-gpu-scheduler/proxy/"},
    )
    assert ext["url_prefix"].endswith("/services/nano-gpu-scheduler/proxy/scheduler")
    assert (ext["filter_verb"], ext["prioritize_verb"], ext["bind_verb"], ext["weight"]) == (
        "filter",
        "priorities",
        "bind",
        1,
    )
    assert ext["managed_resources"] == [{"name": "nano-gpu/gpu-percent", "ignored_by_scheduler": False}]


def test_elastic_gpu_extender_manages_core_and_memory():
    [ext] = stack_extenders(["elastic_gpu"], URLS)
    assert {r["name"] for r in ext["managed_resources"]} == {"elasticgpu.io/gpu-core", "elasticgpu.io/gpu-memory"}


def test_device_plugin_has_no_extender_and_https_follows_scheme():
    assert stack_extenders(["nvidia_device_plugin"], {}) == []
    [ext] = stack_extenders(
        ["gpushare", "nvidia_device_plugin"],
        {"gpushare": "https://cp:32766/gpushare-scheduler/"},
        {"gpushare": {"insecure": True}},
    )
    assert ext["url_prefix"] == "https://cp:32766/gpushare-scheduler"  # path not appended twice
    assert ext["enable_https"] is True
    assert ext["tls"] == {"insecure": True}


@pytest.mark.parametrize(
    ("stacks", "urls", "message"),
    [
        (["gpushare"], {}, "no extender base URL for stack 'gpushare'"),
        (["gpushare"], {"gpushare": "127.0.0.1:32766"}, "must start with http:// or https://"),
        (["gpushare", "nano_gpu"], URLS, "only one binding extender"),
        (["hamy"], URLS, "unknown stack(s) 'hamy'"),
        ("gpushare", URLS, "must be a list"),
        (["gpushare"], {"gpushare": "http://x"}, None),
    ],
)
def test_extender_bad_input_is_refused(stacks, urls, message):
    if message is None:
        assert stack_extenders(stacks, urls)[0]["url_prefix"] == "http://x/gpushare-scheduler"
        return
    with pytest.raises(KgnError, match=message.replace("(", r"\(").replace(")", r"\)")):
        stack_extenders(stacks, urls)


@pytest.mark.parametrize("version", ["1.18.0", "1.20.1", "1.22.3", "1.23.1", "1.30.4"])
@pytest.mark.parametrize("stack", ["gpushare", "nano_gpu", "elastic_gpu"])
def test_every_extender_is_accepted_by_the_scheduler_config_filter(stack, version):
    doc = scheduler_config(version, stack_extenders([stack], URLS), "/etc/kubernetes/scheduler.conf")
    assert doc["extenders"][0]["urlPrefix"].startswith(URLS[stack])


def test_catalog_lists_every_stack_with_selector_labels():
    catalog = stack_catalog()
    assert tuple(catalog) == STACKS == ("nvidia_device_plugin", "gpushare", "nano_gpu", "elastic_gpu", "hami",
                                        "nvidia_dra")
    assert catalog["nvidia_dra"]["node_labels"] == {"kube-gpu-nodes.io/nvidia-dra": "true"}
    assert catalog["gpushare"]["node_labels"] == {"gpushare": "true"}
    assert catalog["elastic_gpu"]["node_labels"] == {"gpu-node": "true"}
    assert catalog["gpushare"]["service"]["node_port"] == 32766
    # callers get copies: changing them does not change the catalog
    catalog["gpushare"]["node_labels"]["x"] = "y"
    assert stack_catalog(["gpushare"])["gpushare"]["node_labels"] == {"gpushare": "true"}


def test_no_problem_for_one_stack_per_node():
    assert stack_problems({"gpu1": ["gpushare"], "gpu2": ["nvidia_device_plugin"]}) == []
    assert stack_problems(["elastic_gpu"], True) == []


def test_two_gpu_claiming_stacks_on_one_node_are_refused():
    [problem] = stack_problems({"gpu1": ["gpushare", "nvidia_device_plugin"]})
    assert problem.startswith("gpu1: stacks gpushare and nvidia_device_plugin both claim every GPU")
    assert "host_vars" in problem


def test_two_binding_extenders_in_one_cluster_are_refused():
    problems = stack_problems({"gpu1": ["gpushare"], "gpu2": ["nano_gpu"]})
    assert problems == [
        "stacks gpushare and nano_gpu both bind pods through a scheduler extender and kube-scheduler "
        "accepts only one binding extender per cluster; choose one of them in gpu_sharing_stacks"
    ]


def test_extender_stack_on_managed_control_plane_says_what_to_do_instead():
    [problem] = stack_problems(["elastic_gpu"], False)
    assert "stack elastic_gpu needs a kube-scheduler extender" in problem
    assert "nvidia_device_plugin with time-slicing or MPS" in problem
    assert "set gpu_sharing_stacks_secondary_scheduler to auto or true" in problem
    assert stack_problems(["nvidia_device_plugin"], False) == []


def test_extender_stack_on_managed_control_plane_is_fine_with_a_secondary_scheduler():
    assert stack_problems(["elastic_gpu"], False, True, True) == []
    assert stack_problems({"gpu1": ["gpushare"], "gpu2": ["nano_gpu"]}, False, True, True) != []
    assert "secondary_scheduler must be true or false" in stack_problems(["gpushare"], False, True, "auto")[0]


@pytest.mark.parametrize(("setting", "control_plane", "expected"), [
    ("auto", [], True), ("auto", ["cp1"], False), (True, ["cp1"], True), (False, [], False), ("false", [], False),
])
def test_secondary_scheduler_setting(setting, control_plane, expected):
    assert secondary_scheduler(setting, control_plane) is expected


def test_secondary_scheduler_refuses_other_values():
    with pytest.raises(KgnError, match="gpu_sharing_stacks_secondary_scheduler must be auto"):
        secondary_scheduler("yes", [])


def test_bad_values_become_problems_not_tracebacks():
    problems = stack_problems({"gpu1": "gpushare", "gpu2": ["hamy"]}, "yes")
    assert len(problems) == 3
    assert "gpu_sharing_stacks of gpu1 must be a list" in problems[0]
    assert "unknown stack(s) 'hamy'" in problems[1]
    assert "scheduler_changeable must be true or false" in problems[2]


@pytest.mark.parametrize(
    ("image", "mirror", "expected"),
    [
        ("nvcr.io/nvidia/k8s-device-plugin:v0.17.4", "", "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"),
        (
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.4",
            "mirror.local:5000",
            "mirror.local:5000/nvidia/k8s-device-plugin:v0.17.4",
        ),
        (
            "nanogpu/nano-gpu-agent:0.3.0",
            "mirror.local:5000/hub/",
            "mirror.local:5000/hub/nanogpu/nano-gpu-agent:0.3.0",
        ),
        (
            "registry.cn-hangzhou.aliyuncs.com/acs/k8s-gpushare-plugin:v2-1.11-aff8a23",
            "harbor.lan",
            "harbor.lan/acs/k8s-gpushare-plugin:v2-1.11-aff8a23",
        ),
    ],
)
def test_images_go_through_the_registry_mirror(image, mirror, expected):
    assert stack_image(image, mirror) == expected


@pytest.mark.parametrize(
    ("image", "mirror", "message"),
    [
        ("", "", "not an image reference"),
        ("nvcr.io/x:1", "https://mirror", "without a scheme"),
    ],
)
def test_bad_images_and_mirrors_are_refused(image, mirror, message):
    with pytest.raises(KgnError, match=message):
        stack_image(image, mirror)


def test_service_urls_are_the_in_cluster_dns_names_of_the_extender_services():
    urls = stack_service_urls(["nvidia_device_plugin", "elastic_gpu"], "kube-system")
    assert urls == {"elastic_gpu": "http://elastic-gpu-scheduler.kube-system.svc:39999"}
    [ext] = stack_extenders(["elastic_gpu"], urls)
    assert ext["url_prefix"] == "http://elastic-gpu-scheduler.kube-system.svc:39999/scheduler"
    with pytest.raises(KgnError, match="set gpu_sharing_stacks_namespace"):
        stack_service_urls(["gpushare"], "")


# ---------------------------------------------------------------------------------------------------------
# stacks_plan: the templates, the decisions per version, and what is removed

DIR = "/etc/kubernetes/kube-gpu-nodes/stacks"
OURS = {"app.kubernetes.io/managed-by": "kube-gpu-nodes"}
IMAGES = {"gpushare_extender": "a/b:1", "gpushare_device_plugin": "a/c:1", "nano_gpu_scheduler": "a/d:1",
          "nano_gpu_agent": "a/e:1", "elastic_gpu_scheduler": "a/f:1", "elastic_gpu_agent": "a/g:1"}


def _templates(**inputs):
    return [m["template"] for m in stacks_plan({"kubernetes_version": "1.30.4", "images": IMAGES,
                                                **inputs})["manifests"]]


def _manifest(kind, name, namespace="kube-system", api="apps/v1", stack="x"):
    ns = f"  namespace: {namespace}\n" if namespace else ""
    return (f"---\n# a comment\napiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}"
            f"  labels:\n    kube-gpu-nodes.io/stack: {stack}\nspec: {{}}\n")


def _live(kind, name, namespace="kube-system", group="apps", stack="gpushare", labels=None):
    return {"group": group, "version": "v1", "kind": kind, "namespace": namespace, "name": name,
            "labels": dict(OURS, **{"kube-gpu-nodes.io/stack": stack}) if labels is None else labels}


def test_stacks_plan_is_the_stacks_section_of_the_host_plan():
    inputs = {"kubernetes_version": "1.23.1", "stacks": ["gpushare"], "images": IMAGES}
    assert host_plan({"stacks": inputs})["stacks"] == stacks_plan(inputs)


@pytest.mark.parametrize(("inputs", "expected"), [
    ({"stacks": ["nvidia_device_plugin"]}, ["nvidia_device_plugin/daemonset-v0.12.yml.j2"]),
    ({"stacks": ["nvidia_device_plugin"], "device_plugin_release": "v0.11.0"},
     ["nvidia_device_plugin/daemonset-v0.9.yml.j2"]),
    ({"stacks": ["nvidia_device_plugin"], "sharing": "time-slicing"},
     ["nvidia_device_plugin/config-time-slicing.yml.j2", "nvidia_device_plugin/daemonset-v0.12-config.yml.j2"]),
    ({"stacks": ["nvidia_device_plugin"], "sharing": "mps"},
     ["nvidia_device_plugin/config-mps.yml.j2", "nvidia_device_plugin/mps-control-daemon.yml.j2",
      "nvidia_device_plugin/daemonset-v0.12-config.yml.j2"]),
    ({"stacks": ["gpushare"], "gpushare_mps": True, "control_plane_hosts": ["cp"]},
     ["gpushare/extender-rbac.yml.j2", "gpushare/extender-deployment.yml.j2", "gpushare/extender-service.yml.j2",
      "gpushare/device-plugin-rbac.yml.j2", "gpushare/device-plugin-daemonset-mps.yml.j2"]),
    # a managed control plane: the second kube-scheduler before the samples that use it
    ({"stacks": ["nano_gpu"], "samples": True, "namespace": "gpu-system"},
     ["common/namespace.yml.j2", "nano_gpu/scheduler.yml.j2", "nano_gpu/agent.yml.j2",
      "secondary_scheduler/rbac.yml.j2", "secondary_scheduler/config.yml.j2", "secondary_scheduler/deployment.yml.j2",
      "samples/nano_gpu.yml.j2"]),
    ({"stacks": []}, []),
])
def test_whole_templates_per_stack_and_variant_in_apply_order(inputs, expected):
    assert _templates(**inputs) == expected


def test_versions_images_and_the_second_scheduler_are_decided_in_the_plan():
    plan = stacks_plan({"kubernetes_version": "1.25.4", "stacks": ["elastic_gpu", "nvidia_device_plugin"],
                        "registry_mirror": "mirror.local:5000", "samples": True,
                        "images": {"elastic_gpu_scheduler": "elasticgpu/elastic-gpu-scheduler:0.3.0",
                                   "elastic_gpu_agent": "nanogpu/elastic-gpu-agent:0.3.0"}})
    assert plan["api"]["crd"] == "apiextensions.k8s.io/v1" and plan["api"]["kubernetes_minor"] == "1.25"
    assert plan["device_plugin"]["release"] == "v0.20.0"
    assert plan["images"]["nvidia_device_plugin"] == "mirror.local:5000/nvidia/k8s-device-plugin:v0.20.0"
    assert plan["images"]["elastic_gpu_agent"] == "mirror.local:5000/nanogpu/elastic-gpu-agent:0.3.0"
    assert plan["sample_images"]["elastic_gpu"].startswith("mirror.local:5000/nvidia/samples:")
    secondary = plan["secondary"]
    assert secondary["enabled"] and secondary["image"] == "mirror.local:5000/kube-scheduler:v1.25.4"
    assert [e["urlPrefix"] for e in secondary["config"]["extenders"]] == [
        "http://elastic-gpu-scheduler.kube-system.svc:39999/scheduler"]
    assert len(secondary["config_checksum"]) == 40
    assert [m["stack"] for m in plan["manifests"]][-3:] == ["secondary_scheduler", "elastic_gpu",
                                                            "nvidia_device_plugin"]  # the samples, last


@pytest.mark.parametrize(("inputs", "message"), [
    ({"stacks": ["gpushare", "nano_gpu"]}, "stacks gpushare and nano_gpu both bind pods"),
    ({"stacks": ["gpushare"], "kubernetes_version": "1.15.0"}, "outside the supported range 1.x from 1.16"),
    ({"stacks": ["gpushare"], "kubernetes_version": ""}, "gpu_sharing_stacks_kubernetes_version is not set"),
    ({"stacks": ["nvidia_device_plugin"], "device_plugin_release": "v0.11.0", "sharing": "mps"},
     "NVIDIA device plugin v0.11.0 does not support mps sharing"),
    ({"stacks": ["gpushare"], "sharing": "time-slicing"}, "but nvidia_device_plugin is not in gpu_sharing_stacks"),
    ({"stacks": ["nvidia_device_plugin"], "replicas": 1}, "must be 2-48"),
    ({"stacks": ["nvidia_device_plugin"], "replicas": "1"}, "must be 2-48"),
    ({"stacks": ["nvidia_device_plugin"], "replicas": "four"}, "must be a whole number, got 'four'"),
    ({"stacks": ["hamy"]}, "unknown stack(s) 'hamy'"),
    ({"stacks": ["nano_gpu"], "kubernetes_version": "1.18.20"}, "which takes extenders from a Policy file only"),
    ({"stacks": ["nano_gpu"], "kubernetes_version": "1.25"}, "has no patch release"),
    ({"stacks": ["gpushare"], "control_plane_hosts": ["cp"], "images": {"gpushare_extender": ""}},
     "gpu_sharing_stacks_images.gpushare_extender is empty"),
    ({"stacks": [], "colour": "red"}, "unknown input(s) colour"),
    ({"stacks": [], "manifest_dir": "stacks"}, "must be an absolute folder"),
])
def test_stacks_plan_refusals_say_what_to_fix(inputs, message):
    with pytest.raises(KgnError, match=re.escape(message)):
        stacks_plan({"kubernetes_version": "1.30.4", "images": IMAGES, **inputs})


DP = {"kubernetes_version": "1.30.4", "stacks": ["nvidia_device_plugin"], "manifest_dir": DIR,
      "manifests": {"nvidia_device_plugin/daemonset-v0.12.yml": _manifest("DaemonSet", "nvidia-device-plugin-daemonset",
                                                                          stack="nvidia_device_plugin")}}


def test_the_rendered_manifests_become_files_and_objects():
    plan = stacks_plan(DP, {"files": ["nvidia_device_plugin/daemonset-v0.12.yml"],
                            "api": {"reachable": True, "objects": [], "custom_objects": {}}})
    assert plan["files"] == [{"path": f"{DIR}/nvidia_device_plugin/daemonset-v0.12.yml", "mode": "0644",
                              "content": DP["manifests"]["nvidia_device_plugin/daemonset-v0.12.yml"],
                              "stack": "nvidia_device_plugin"}]
    assert [(o["group"], o["kind"], o["namespace"], o["name"]) for o in plan["objects"]] == [
        ("apps", "DaemonSet", "kube-system", "nvidia-device-plugin-daemonset")]
    assert plan["remove_files"] == [] and plan["prune"] == []


def test_manifests_that_are_not_the_planned_ones_are_refused():
    expected = "missing: nvidia_device_plugin/daemonset-v0.12.yml; not planned: x.yml"
    with pytest.raises(KgnError, match=re.escape(expected)):
        stacks_plan(dict(DP, manifests={"x.yml": ""}), {})


def test_objects_and_files_of_what_is_no_longer_chosen_are_removed_workloads_first_crds_last():
    live = [_live("ClusterRole", "gpushare-schd-extender", "", "rbac.authorization.k8s.io"),
            _live("DaemonSet", "nvidia-device-plugin-daemonset", stack="nvidia_device_plugin"),
            _live("Deployment", "gpushare-schd-extender"),
            _live("CustomResourceDefinition", "gpus.elasticgpu.io", "", "apiextensions.k8s.io", "elastic_gpu"),
            _live("Namespace", "gpu-system", "", "", "common"),
            _live("Service", "gpushare-schd-extender", group=""),
            _live("DaemonSet", "someone-elses", labels={"app": "x"})]
    custom = {"gpus.elasticgpu.io": {"objects": [
        _live("GPU", "ours", "", "elasticgpu.io", "elastic_gpu")], "error": ""}}
    plan = stacks_plan(DP, {"files": ["nvidia_device_plugin/daemonset-v0.12.yml", "gpushare/extender-rbac.yml"],
                            "api": {"reachable": True, "objects": live, "custom_objects": custom}})
    assert [(o["kind"], o["name"], o["stack"]) for o in plan["prune"]] == [
        ("Deployment", "gpushare-schd-extender", "gpushare"),
        ("Service", "gpushare-schd-extender", "gpushare"),
        ("ClusterRole", "gpushare-schd-extender", "gpushare"),
        ("GPU", "ours", "elastic_gpu"),  # the project's own custom object goes before its CRD
        ("CustomResourceDefinition", "gpus.elasticgpu.io", "elastic_gpu"),
    ]  # the desired DaemonSet, the Namespace and an unlabelled object stay
    assert plan["remove_files"] == [f"{DIR}/gpushare/extender-rbac.yml"]


def test_a_crd_whose_custom_objects_someone_else_made_is_refused_naming_them():
    live = [_live("CustomResourceDefinition", "elasticgpuclaims.elasticgpu.io", "", "apiextensions.k8s.io",
                  "elastic_gpu") | {"crd": {"group": "elasticgpu.io", "plural": "elasticgpuclaims"}}]
    custom = {"elasticgpuclaims.elasticgpu.io": {"objects": [
        _live("ElasticGPUClaim", "team-claim", "ml", "elasticgpu.io", labels={})], "error": ""}}
    with pytest.raises(KgnError) as refused:
        stacks_plan(DP, {"files": [], "api": {"reachable": True, "objects": live, "custom_objects": custom}})
    message = str(refused.value)
    assert "ElasticGPUClaim ml/team-claim" in message
    assert "kubectl delete elasticgpuclaims.elasticgpu.io -n ml team-claim" in message
    assert "keep elastic_gpu in gpu_sharing_stacks" in message and "Nothing was changed" in message


def test_a_crd_whose_custom_objects_could_not_be_listed_is_refused():
    live = [_live("CustomResourceDefinition", "gpus.elasticgpu.io", "", "apiextensions.k8s.io", "elastic_gpu")]
    with pytest.raises(KgnError, match="could not be listed"):
        stacks_plan(DP, {"files": [], "api": {"reachable": True, "objects": live,
                                              "custom_objects": {"gpus.elasticgpu.io": {"error": "forbidden"}}}})


def test_an_empty_stack_list_removes_everything_the_project_deployed():
    live = [_live("DaemonSet", "nvidia-device-plugin-daemonset", stack="nvidia_device_plugin")]
    plan = stacks_plan({"stacks": [], "manifests": {}},
                       {"files": ["nvidia_device_plugin/daemonset-v0.12.yml"],
                        "api": {"reachable": True, "objects": live, "custom_objects": {}}})
    assert [o["name"] for o in plan["prune"]] == ["nvidia-device-plugin-daemonset"]
    assert plan["remove_files"] == [f"{DIR}/nvidia_device_plugin/daemonset-v0.12.yml"]


@pytest.mark.parametrize(("observed", "note"), [
    ({"files": [], "api": {"reachable": False, "error": "refused"}}, "the API was not read"),
    ({"files": [], "api": {"reachable": True, "objects": None}}, "the API was not read"),
    ({}, "a render"),
])
def test_nothing_is_removed_when_the_api_was_not_read_and_the_plan_says_so(observed, note):
    plan = stacks_plan(DP, observed)
    assert plan["prune"] == [] and any(note in a for a in plan["assumed"])


# ---------------------------------------------------------------------------------------------------------
# GPU components already in the cluster: another NVIDIA device plugin

OKE_PLUGIN = _live("DaemonSet", "nvidia-gpu-device-plugin", labels={"k8s-app": "nvidia-gpu-device-plugin"}) | {
    "owners": [], "containers": [{"name": "nvidia-gpu-device-plugin", "command": [], "args": [],
                                  "image": "nvcr.io/nvidia/k8s-device-plugin:v0.14.1"}]}
OPERATOR_PLUGIN = _live("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator",
                        labels={"app": "nvidia-device-plugin-daemonset"}) | {
    "owners": ["ClusterPolicy/cluster-policy"],
    "containers": [{"name": "nvidia-device-plugin", "command": ["/bin/bash", "-c"],
                    "args": ["exec nvidia-device-plugin"], "image": "nvcr.io/nvidia/k8s-device-plugin:v0.14.1"}]}
CLUSTER_POLICY = {"group": "nvidia.com", "version": "v1", "kind": "ClusterPolicy", "namespace": "",
                  "name": "cluster-policy", "labels": {}, "device_plugin_enabled": True}
OURS_DS = _live("DaemonSet", "nvidia-device-plugin-daemonset", stack="nvidia_device_plugin") | {
    "owners": [], "containers": [{"name": "nvidia-device-plugin-ctr", "command": [], "args": [],
                                  "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"}]}
DP_FILE = "nvidia_device_plugin/daemonset-v0.12.yml"


def _found(daemonsets=(), cluster_policies=(), **api):
    return {"files": [DP_FILE], "api": {"reachable": True, "objects": [], "custom_objects": {}, **api,
                                        "components": {"daemonsets": list(daemonsets),
                                                       "cluster_policies": list(cluster_policies), "error": ""}}}


def test_a_second_nvidia_device_plugin_is_refused_naming_it_and_the_choices():
    with pytest.raises(KgnError) as refused:
        stacks_plan(DP, _found([OKE_PLUGIN]))
    assert str(refused.value) == (
        "Refused to deploy a second device plugin: DaemonSet kube-system/nvidia-gpu-device-plugin (image "
        "nvcr.io/nvidia/k8s-device-plugin:v0.14.1; labels k8s-app=nvidia-gpu-device-plugin) already advertises "
        "nvidia.com/gpu on the cluster's GPU nodes; a second device plugin for the same resource would double-count "
        "GPUs. Choose one: keep it and leave nvidia_device_plugin out of gpu_sharing_stacks; replace it (kubectl "
        "delete daemonset -n kube-system nvidia-gpu-device-plugin, or, for a provider's managed add-on, switch it off "
        "in the provider's settings: deleted, it comes back; then run again); or set "
        "gpu_sharing_stacks_existing_device_plugin: adopt to keep it and deploy the rest. Nothing was changed (no "
        "manifest written, applied or deleted).")


@pytest.mark.parametrize(("daemonsets", "policies"), [
    ([OPERATOR_PLUGIN], [CLUSTER_POLICY]),
    ([], [CLUSTER_POLICY]),  # the operator has not made its DaemonSet yet
    ([OPERATOR_PLUGIN], []),  # its DaemonSet names its owner
])
def test_the_gpu_operator_is_refused_as_such(daemonsets, policies):
    with pytest.raises(KgnError) as refused:
        stacks_plan(DP, _found(daemonsets, policies))
    message = str(refused.value)
    assert message.startswith("Refused to deploy a second device plugin: the NVIDIA GPU Operator (")
    assert "it also manages the driver and the container toolkit of those nodes" in message
    assert "replace it (uninstall the GPU Operator, or set devicePlugin.enabled: false in its ClusterPolicy" in message
    assert message.count("GPU Operator (") == 1  # one conflict, not one per object of the operator
    if daemonsets:
        assert "DaemonSet gpu-operator/nvidia-device-plugin-daemonset, image nvcr.io/nvidia/k8s-device-plugin:" \
               "v0.14.1)" in message


def test_adopt_keeps_theirs_and_leaves_our_device_plugin_out():
    found = _found([OKE_PLUGIN], objects=[OURS_DS])  # ours was deployed by an earlier run
    plan = stacks_plan(dict(DP, existing_device_plugin="adopt"), found)
    assert plan["adopted"] == [{"stack": "nvidia_device_plugin", "resource": "nvidia.com/gpu", "found": [
        "DaemonSet kube-system/nvidia-gpu-device-plugin (image nvcr.io/nvidia/k8s-device-plugin:v0.14.1; labels "
        "k8s-app=nvidia-gpu-device-plugin)"]}]
    assert plan["manifests"] == [] and plan["objects"] == [] and plan["files"] == []
    assert plan["remove_files"] == [f"{DIR}/{DP_FILE}"]
    assert [(o["namespace"], o["name"]) for o in plan["prune"]] == [("kube-system", "nvidia-device-plugin-daemonset")]


def test_adopt_without_anything_to_adopt_deploys_our_device_plugin():
    plan = stacks_plan(dict(DP, existing_device_plugin="adopt"), _found())
    assert plan["adopted"] == [] and [o["name"] for o in plan["objects"]] == ["nvidia-device-plugin-daemonset"]


def test_adopt_with_sharing_is_refused_because_the_setting_would_not_reach_theirs():
    inputs = dict(DP, existing_device_plugin="adopt", sharing="time-slicing", manifests={
        "nvidia_device_plugin/config-time-slicing.yml": _manifest("ConfigMap", "nvidia-device-plugin-config", api="v1"),
        "nvidia_device_plugin/daemonset-v0.12-config.yml": DP["manifests"][DP_FILE]})
    with pytest.raises(KgnError, match=re.escape("would not reach the adopted one. Set "
                                                 "gpu_sharing_stacks_device_plugin_sharing to none")):
        stacks_plan(inputs, _found([OKE_PLUGIN]))


@pytest.mark.parametrize("daemonset", [
    OURS_DS,  # deployed by this project (labelled)
    OKE_PLUGIN | {"containers": [dict(OKE_PLUGIN["containers"][0], command=["gpu-feature-discovery"])]},
    OKE_PLUGIN | {"containers": [dict(OKE_PLUGIN["containers"][0], image="nvcr.io/nvidia/gpu-feature-discovery:v0.8")]},
])
def test_our_own_device_plugin_and_other_nvidia_programs_are_no_conflict(daemonset):
    # (and a GPU Operator whose ClusterPolicy turns its device plugin off)
    plan = stacks_plan(DP, _found([daemonset], [CLUSTER_POLICY | {"device_plugin_enabled": False}]))
    assert plan["adopted"] == [] and [o["name"] for o in plan["objects"]] == ["nvidia-device-plugin-daemonset"]


def test_a_device_plugin_for_another_resource_does_not_block_an_unrelated_stack():
    assert stack_conflicts(["gpushare", "elastic_gpu"], {"daemonsets": [OKE_PLUGIN, OPERATOR_PLUGIN]}) == []
    manifests = {f"gpushare/{path}.yml": _manifest("ServiceAccount", path, api="v1")
                 for path in ("extender-rbac", "extender-deployment", "extender-service", "device-plugin-rbac")}
    manifests["gpushare/device-plugin-daemonset-plain.yml"] = _manifest("DaemonSet", "gpushare-device-plugin-ds")
    inputs = {"kubernetes_version": "1.23.1", "stacks": ["gpushare"], "images": IMAGES, "control_plane_hosts": ["cp"],
              "manifests": manifests}
    plan = stacks_plan(inputs, _found([OKE_PLUGIN], [CLUSTER_POLICY]))
    assert plan["adopted"] == [] and len(plan["objects"]) == 5


def test_daemonsets_that_could_not_be_listed_stop_the_run():
    observed = {"files": [], "api": {"reachable": True, "objects": [], "custom_objects": {},
                                     "components": {"error": "`kubectl get daemonsets.apps` failed: Forbidden"}}}
    with pytest.raises(KgnError, match=r"Could not check whether another NVIDIA device plugin .*Forbidden.*Nothing"):
        stacks_plan(DP, observed)


def test_an_unknown_existing_device_plugin_choice_is_refused():
    with pytest.raises(KgnError, match=re.escape("gpu_sharing_stacks_existing_device_plugin is 'keep'; accepted: "
                                                 "refuse, adopt")):
        stacks_plan(dict(DP, existing_device_plugin="keep"))


# --- HAMi ---------------------------------------------------------------------------------------------------
HAMI_IMAGES = {"hami": "", "hami_certgen": "liangjw/kube-webhook-certgen:v1.1.1",
               "hami_certgen_legacy": "jettech/kube-webhook-certgen:v1.5.2"}


def _hami(version="1.29.10", **inputs):
    return stacks_plan({"kubernetes_version": version, "stacks": ["hami"], "images": HAMI_IMAGES,
                        "control_plane_hosts": ["cp"], **inputs})


def test_hami_brings_its_own_scheduler_and_never_extends_the_clusters():
    entry = stack_catalog(["hami"])["hami"]
    assert entry["node_labels"] == {"gpu": "on"} and entry["claims_whole_gpus"]
    assert entry["resources"] == ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"]
    assert entry["allocatable"] == ["nvidia.com/gpu"]
    assert entry["extender"] is None and entry["service"] is None
    own = entry["own_scheduler"]["extender"]
    assert (own["url_prefix"], own["filter_verb"], own["bind_verb"], own["enable_https"], own["tls"]) == (
        "https://127.0.0.1:443", "filter", "bind", True, {"insecure": True})
    assert all(r["ignored_by_scheduler"] for r in own["managed_resources"])
    # nothing for the cluster's kube-scheduler (kube_scheduler_extender role) nor a second scheduler
    assert stack_extenders(["hami", "gpushare"], URLS) == stack_extenders(["gpushare"], URLS)
    assert stack_problems(["hami"], scheduler_changeable=False) == []
    assert _hami(control_plane_hosts=[])["secondary"] == {"enabled": False}


def test_hami_and_gpushare_on_one_node_are_refused_naming_both_and_the_choices():
    [problem] = stack_problems({"gpu1": ["hami", "gpushare"]})
    assert problem.startswith("gpu1: stacks hami and gpushare both claim every GPU of the node")
    assert "keep one stack per node: set gpu_sharing_stacks per host in host_vars" in problem
    assert "nvidia_device_plugin's time-slicing/MPS sharing" in problem
    # on different nodes of one cluster they do not meet: HAMi binds in its own scheduler, gpushare in the cluster's
    assert stack_problems({"gpu1": ["hami"], "gpu2": ["gpushare"]}) == []


def test_hami_and_nvidia_device_plugin_in_one_cluster_are_refused():
    [problem] = stack_problems({"gpu1": ["hami"], "gpu2": ["nvidia_device_plugin"]})
    assert "hami and nvidia_device_plugin both advertise nvidia.com/gpu" in problem
    assert "choose one of them in gpu_sharing_stacks" in problem


@pytest.mark.parametrize("version", ["1.18.20", "1.20.15", "1.22.17", "1.25.16", "1.29.10", "1.35.0"])
def test_hamis_scheduler_reads_the_variant_of_its_kubernetes_version(version):
    plan = _hami(version)
    own, variant = plan["hami"], scheduler_variant(version)
    minor = int(version.split(".")[1])
    release = "v2.10.0" if minor >= 23 else "v2.6.0"  # its README: Kubernetes >= 1.23 (v2.10.0), >= 1.18 (v2.6.0)
    assert own["enabled"] and own["name"] == "hami-scheduler" and own["release"] == release
    assert plan["images"]["hami"] == f"projecthami/hami:{release}"
    assert own["leader_election"] is (minor >= 23) and own["device_plugin_host_network"] is (minor < 23)
    assert own["dra_rbac"] is (minor >= 34)
    assert (own["config"]["kind"], own["config"]["apiVersion"]) == (variant["kind"], variant["api_version"])
    assert own["image"] == f"registry.k8s.io/kube-scheduler:v{version}"
    [extender] = own["config"]["extenders"]
    assert extender["urlPrefix"] == "https://127.0.0.1:443"
    assert (extender["filterVerb"], extender["bindVerb"]) == ("filter", "bind")
    if variant["format"] == "policy":
        assert own["command"][1] == "--policy-config-file=/etc/kubernetes/kgn-gpu-scheduler/config.json"
        assert "--scheduler-name=hami-scheduler" in own["command"] and extender["enableHttps"] is True
        assert extender["httpTimeout"] == 30 * 10**9
    else:
        assert own["command"] == ["/usr/local/bin/kube-scheduler",
                                  "--config=/etc/kubernetes/kgn-gpu-scheduler/config.yaml"]
        assert own["config"]["profiles"] == [{"schedulerName": "hami-scheduler"}]
        assert "clientConnection" not in own["config"] and extender["enableHTTPS"] is True
    certgen = "hami_certgen" if int(version.split(".")[1]) >= 22 else "hami_certgen_legacy"
    assert sorted(plan["images"]) == sorted(["hami", certgen]) and own["certgen_image_key"] == certgen
    assert [m["template"] for m in plan["manifests"]] == [
        "hami/rbac.yml.j2", "hami/certgen-create.yml.j2", "hami/scheduler-config.yml.j2", "hami/scheduler.yml.j2",
        "hami/device-plugin.yml.j2", "hami/webhook.yml.j2", "hami/certgen-patch.yml.j2"]


def test_hami_images_honour_the_mirror_and_the_kube_scheduler_override():
    plan = _hami(registry_mirror="mirror.local:5000")
    assert plan["images"]["hami"] == "mirror.local:5000/projecthami/hami:v2.10.0"
    assert _hami(images=dict(HAMI_IMAGES, hami="harbor.lan/hami:v2.10.0-fix"))["images"]["hami"] == (
        "harbor.lan/hami:v2.10.0-fix")
    assert plan["hami"]["image"] == "mirror.local:5000/kube-scheduler:v1.29.10"
    plan = _hami(images=dict(HAMI_IMAGES, hami_kube_scheduler="harbor.lan/k8s/kube-scheduler:v1.29.10-hotfix"))
    assert plan["hami"]["image"] == "harbor.lan/k8s/kube-scheduler:v1.29.10-hotfix"


@pytest.mark.parametrize(("inputs", "message"), [
    ({"kubernetes_version": "1.17.17"}, "HAMi supports Kubernetes 1.18 and newer (v2.6.0 from 1.18, v2.10.0 from 1.23"),
    ({"kubernetes_version": "1.29"}, "set gpu_sharing_stacks_images.hami_kube_scheduler"),
    ({"images": {"hami_certgen": ""}}, "gpu_sharing_stacks_images.hami_certgen is empty"),
    ({"stacks": ["hami", "nvidia_device_plugin"]}, "hami and nvidia_device_plugin both advertise nvidia.com/gpu"),
])
def test_hami_refusals_say_what_to_fix(inputs, message):
    with pytest.raises(KgnError, match=re.escape(message)):
        _hami(**inputs)


def test_hami_cannot_adopt_another_device_plugin():
    inputs = {"kubernetes_version": "1.30.4", "stacks": ["hami"], "manifest_dir": DIR, "images": HAMI_IMAGES,
              "control_plane_hosts": ["cp"], "existing_device_plugin": "adopt",
              "manifests": {m["path"]: _manifest("ConfigMap", m["path"].replace("/", "-").replace(".", "-"), api="v1")
                            for m in _hami("1.30.4")["manifests"]}}
    with pytest.raises(KgnError, match=re.escape("cannot stand in for HAMi's device plugin")):
        stacks_plan(inputs, _found([OKE_PLUGIN]))


def test_taking_hami_out_removes_its_webhook_first_and_its_jobs_with_the_workloads():
    live = [_live("ClusterRole", "hami-scheduler", "", "rbac.authorization.k8s.io", "hami"),
            _live("Job", "hami-admission-create", group="batch", stack="hami"),
            _live("DaemonSet", "hami-device-plugin", stack="hami"),
            _live("Deployment", "hami-scheduler", stack="hami"),
            _live("MutatingWebhookConfiguration", "hami-webhook", "", "admissionregistration.k8s.io", "hami")]
    plan = stacks_plan(DP, {"files": [DP_FILE, "hami/webhook.yml"],
                            "api": {"reachable": True, "objects": live, "custom_objects": {}}})
    assert [(o["kind"], o["name"]) for o in plan["prune"]] == [
        ("MutatingWebhookConfiguration", "hami-webhook"),  # no new pod is sent to a scheduler going away
        ("Deployment", "hami-scheduler"), ("Job", "hami-admission-create"), ("DaemonSet", "hami-device-plugin"),
        ("ClusterRole", "hami-scheduler")]
    assert plan["remove_files"] == [f"{DIR}/hami/webhook.yml"]
