"""The stack catalog, the extenders it hands to kube-scheduler, and the conflict checks."""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler_config
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import (
    STACKS,
    secondary_scheduler,
    stack_catalog,
    stack_extenders,
    stack_image,
    stack_problems,
    stack_service_urls,
)

URLS = {
    "gpushare": "http://127.0.0.1:32766",
    "nano_gpu": "http://127.0.0.1:32765",
    "elastic_gpu": "http://127.0.0.1:32764",
}


def test_gpushare_extender_matches_the_seed_policy():
    # seeds/gpu-sharing-design-policy-json-mps.md and gpushare-on-kubeasz-1.23.md
    assert stack_extenders(["gpushare"], URLS) == [
        {
            "url_prefix": "http://127.0.0.1:32766/gpushare-scheduler",
            "filter_verb": "filter",
            "bind_verb": "bind",
            "enable_https": False,
            "node_cache_capable": True,
            "managed_resources": [{"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": False}],
            "ignorable": False,
        }
    ]


def test_nano_gpu_extender_has_prioritize_and_weight_as_in_the_superedge_seed():
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
        (["hami"], URLS, "unknown stack(s) 'hami'"),
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
    assert tuple(catalog) == STACKS == ("nvidia_device_plugin", "gpushare", "nano_gpu", "elastic_gpu")
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
    problems = stack_problems({"gpu1": "gpushare", "gpu2": ["hami"]}, "yes")
    assert len(problems) == 3
    assert "gpu_sharing_stacks of gpu1 must be a list" in problems[0]
    assert "unknown stack(s) 'hami'" in problems[1]
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
