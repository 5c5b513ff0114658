"""Every example inventory renders, each host by its own OS and runtime: the file list per host, and the files
that differ by OS family (apt or yum, the adopted drivers' blocks).

The examples describe the reference clusters: CentOS 7 and Oracle Linux 7 with drivers installed before any
tool ran, a kubeasz Debian node installed from packages, Ubuntu edge nodes with a hand-installed 450 driver.
"""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_schemas
import pytest
from playbook_runner import render_ok

TOP = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (TOP / "inventories" / "examples").iterdir() if (p / "hosts.yml").is_file())

APT_BLOCK = "etc/apt/preferences.d/kgn-nvidia-driver.pref"
BLACKLIST = "etc/modprobe.d/kgn-blacklist-nouveau.conf"
# the toolkit's config.toml carries the runtime mode (legacy on these Docker nodes, docs/cdi.md)
TOOLKIT_CONFIG = "etc/nvidia-container-runtime/config.toml"
CENTOS7_GPU = ["etc/docker/daemon.json", BLACKLIST, TOOLKIT_CONFIG, "etc/yum.conf",
               "etc/yum.repos.d/nvidia-container-toolkit.repo"]
FILES = {
    "centos7-docker18-k8s1.16-device-plugin": {
        "gpu1": CENTOS7_GPU, "gpu2": CENTOS7_GPU, "gpu3": CENTOS7_GPU,
        "master1": ["etc/kubernetes/kube-gpu-nodes/stacks/nvidia_device_plugin/daemonset-v0.12.yml"],
    },
    "kubeasz-1.23-gpushare": {
        "node-101": [APT_BLOCK, "etc/apt/sources.list.d/kgn-nvidia-driver.sources",
                     "etc/apt/sources.list.d/nvidia-container-toolkit.list", "etc/docker/daemon.json",
                     *(f"etc/kubernetes/kube-gpu-nodes/stacks/gpushare/{name}.yml" for name in (
                         "device-plugin-daemonset-plain", "device-plugin-rbac", "extender-deployment",
                         "extender-rbac", "extender-service")),
                     "etc/kubernetes/scheduler-policy-config.yaml", BLACKLIST, TOOLKIT_CONFIG,
                     "etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf"],
    },
    "oke-elastic-gpu": {
        # CRI-O 1.23+ with toolkit 1.20: CDI mode, the toolkit's refresh service pointed at our spec
        "gpu-pool-1": ["etc/crio/crio.conf.d/99-nvidia.conf", BLACKLIST, TOOLKIT_CONFIG,
                       "etc/nvidia-container-toolkit/nvidia-cdi-refresh.env", "etc/yum.conf",
                       "etc/yum.repos.d/nvidia-container-toolkit.repo"],
        "localhost": [f"var/tmp/kube-gpu-nodes/stacks/{name}.yml" for name in (
            "elastic_gpu/agent", "elastic_gpu/crd-elasticgpuclaims", "elastic_gpu/crd-elasticgpuclasses",
            "elastic_gpu/crd-elasticgpus", "elastic_gpu/crd-gpus", "elastic_gpu/scheduler",
            "secondary_scheduler/config", "secondary_scheduler/deployment", "secondary_scheduler/rbac")],
    },
    "superedge-nano-gpu": {
        "cloud-master": ["etc/kubernetes/kube-gpu-nodes/stacks/nano_gpu/agent.yml",
                         "etc/kubernetes/kube-gpu-nodes/stacks/nano_gpu/scheduler.yml",
                         "etc/kubernetes/manifests/kube-scheduler.yaml", "etc/kubernetes/scheduler-policy-config.json"],
        "edge-gpu1": [APT_BLOCK, "etc/apt/sources.list.d/nvidia-container-toolkit.list", "etc/docker/daemon.json",
                      BLACKLIST, TOOLKIT_CONFIG],
    },
}
ADOPTED = {"centos7-docker18-k8s1.16-device-plugin": {"gpu1": "460.32.03", "gpu2": "460.32.03", "gpu3": "510.47.03"},
           "oke-elastic-gpu": {"gpu-pool-1": ""}, "superedge-nano-gpu": {"edge-gpu1": "450.102.04"}}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = {}
    for name in EXAMPLES:
        out[name] = tmp_path_factory.mktemp(name)
        render_ok("playbooks/render.yml", "-i", f"inventories/examples/{name}", "-e", f"render_dir={out[name]}")
    return out


def files_per_host(root: Path) -> dict:
    return {host.name: sorted(str(p.relative_to(host)) for p in host.rglob("*")
                              if p.is_file() and p.relative_to(host).parts[0] != "_plan")
            for host in root.iterdir() if host.is_dir()}


def test_every_example_is_covered():
    assert sorted(FILES) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_host_gets_the_files_of_its_os_and_runtime(rendered, name):
    assert files_per_host(rendered[name]) == {host: sorted(paths) for host, paths in FILES[name].items()}


@pytest.mark.parametrize("name", sorted(ADOPTED))
def test_hand_installed_drivers_are_adopted_and_blocked_by_their_os_package_manager(rendered, name):
    for host, version in ADOPTED[name].items():
        plan = json.loads((rendered[name] / host / "_plan/nvidia_driver.json").read_text())
        assert plan["adopted"]["version"] == version and plan["missing"] == [] and plan["specs"] == []
        if plan["family"] == "redhat":
            main = (rendered[name] / host / "etc/yum.conf").read_text()
            assert main.startswith("[main]\nexclude=nvidia-[!cd]* ") and " kmod-nvidia* " in main
        else:
            pin = (rendered[name] / host / APT_BLOCK).read_text()
            assert "Pin: version *\nPin-Priority: -1\n" in pin and f"({version})" in pin


def test_the_packaged_kubeasz_node_is_not_adopted(rendered):
    plan = json.loads((rendered["kubeasz-1.23-gpushare"] / "node-101/_plan/nvidia_driver.json").read_text())
    assert plan["adopted"] is None and "Pin-Priority: 1001" in (
        rendered["kubeasz-1.23-gpushare"] / "node-101" / APT_BLOCK).read_text()


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_kubernetes_object_is_valid_for_the_hosts_own_version(rendered, name):
    """Static pods, stack manifests and samples, strictly, against the OpenAPI schema of the host's version."""
    checked = kubernetes_schemas.check_render(rendered[name])
    assert checked and all(checked.values()), checked
