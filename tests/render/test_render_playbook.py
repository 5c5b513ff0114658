"""playbooks/render.yml writes every file per host under render_dir, contacting no host.

The example inventories point at addresses that do not exist here, so a run that tried to connect
to any of them would fail: a green run is the proof that rendering needs no host.
"""

from __future__ import annotations

import configparser
import json
import tomllib
from pathlib import Path

import kubernetes_schemas
import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation
from playbook_runner import render_ok, run_playbook

TOP = Path(__file__).resolve().parents[2]


def render(inventory: str, out: Path) -> Path:
    render_ok("playbooks/render.yml", "-i", inventory, "-e", f"render_dir={out}")
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    return render("inventories/lab/hosts.yml", tmp_path_factory.mktemp("lab"))


@pytest.fixture(scope="module")
def kubeasz(tmp_path_factory) -> Path:
    return render("inventories/examples/kubeasz-1.23-gpushare", tmp_path_factory.mktemp("kubeasz"))


@pytest.fixture(scope="module")
def centos7(tmp_path_factory) -> Path:
    return render("inventories/examples/centos7-docker18-k8s1.16-device-plugin", tmp_path_factory.mktemp("c7"))


def test_relative_render_dir_is_refused():
    result = run_playbook("playbooks/render.yml", "-e", "render_dir=render")
    assert result.returncode != 0
    assert "absolute folder" in result.stdout


def test_lab_docker_node_gets_nvidia_as_default_runtime(lab):
    daemon = json.loads((lab / "kgn-gpu-docker/etc/docker/daemon.json").read_text())
    assert daemon["default-runtime"] == "nvidia"
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"


def test_lab_containerd_node_gets_a_drop_in_with_nvidia_default(lab):
    drop_in = tomllib.loads((lab / "kgn-gpu-containerd/etc/containerd/conf.d/99-nvidia.toml").read_text())
    # containerd 1.7 assumed when nothing was recorded; 2.1 (version 3) once the lab has run and recorded it
    plugins = drop_in["plugins"]
    cri = (plugins.get("io.containerd.cri.v1.runtime") or plugins["io.containerd.grpc.v1.cri"])["containerd"]
    assert cri["default_runtime_name"] == "nvidia"
    assert cri["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    config = tomllib.loads((lab / "kgn-gpu-containerd/etc/containerd/config.toml").read_text())
    assert "/etc/containerd/conf.d/99-nvidia.toml" in config["imports"]


def test_lab_gpu_nodes_get_signed_by_sources_and_the_driver_pin(lab):
    for host in ("kgn-gpu-docker", "kgn-gpu-containerd"):
        source = (lab / host / "etc/apt/sources.list.d/nvidia-container-toolkit.list").read_text()
        assert "signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg" in source
        assert "file:///srv/kgn-nvidia-repo" in source
        assert "blacklist nouveau" in (lab / host / "etc/modprobe.d/kgn-blacklist-nouveau.conf").read_text()
        assert "Pin-Priority: 1001" in (lab / host / "etc/apt/preferences.d/kgn-nvidia-driver.pref").read_text()


def test_lab_toolkit_source_is_still_the_apt_list_only(lab):
    for host in ("kgn-gpu-docker", "kgn-gpu-containerd"):
        source = (lab / host / "etc/apt/sources.list.d/nvidia-container-toolkit.list").read_text()
        assert [line for line in source.splitlines() if not line.startswith("#")] == [
            "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
            "file:///srv/kgn-nvidia-repo/libnvidia-container/stable/deb/$(ARCH) /"
        ]
        assert not (lab / host / "etc/yum.repos.d").exists()


def test_lab_kubeasz_control_plane_gets_v1beta2_config_and_a_systemd_drop_in(lab):
    host = lab / "kgn-cp-kubeasz"
    config = yaml.safe_load((host / "etc/kubernetes/scheduler-policy-config.yaml").read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1beta2"  # Kubernetes 1.22.3
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/kube-scheduler.kubeconfig"
    assert [e["urlPrefix"].rsplit("/", 1)[-1] for e in config["extenders"]] == ["gpushare-scheduler"]
    drop_ins = list((host / "etc/systemd/system/kube-scheduler.service.d").glob("*.conf"))
    assert len(drop_ins) == 1
    assert drop_ins[0].read_text().count("--config=/etc/kubernetes/scheduler-policy-config.yaml") == 1
    assert not (host / "etc/kubernetes/manifests").exists()
    gpushare = host / "etc/kubernetes/kube-gpu-nodes/stacks/gpushare"
    assert "--memory-unit=GiB" in (gpushare / "device-plugin-daemonset-plain.yml").read_text()


def test_lab_kubeadm_control_plane_renders_the_device_plugin(lab):
    host = lab / "kgn-cp-kubeadm"
    daemonset = yaml.safe_load((host / "etc/kubernetes/kube-gpu-nodes/stacks/nvidia_device_plugin/daemonset-v0.12.yml")
                               .read_text())
    assert daemonset["apiVersion"] == "apps/v1"
    assert daemonset["kind"] == "DaemonSet"


def test_reference_kubeasz_single_node_gets_both_roles_files(kubeasz):
    host = kubeasz / "node-101"
    config = yaml.safe_load((host / "etc/kubernetes/scheduler-policy-config.yaml").read_text())
    extender = config["extenders"][0]
    assert extender["urlPrefix"].endswith(":32766/gpushare-scheduler")
    assert extender["enableHTTPS"] is False
    assert extender["managedResources"] == [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": False}]
    assert json.loads((host / "etc/docker/daemon.json").read_text())["default-runtime"] == "nvidia"


def test_reference_centos7_k8s_1_16_gets_no_scheduler_change_and_an_old_layout_device_plugin(centos7):
    # The NVIDIA device plugin needs no extender: kube-scheduler is not touched on 1.16.
    master = centos7 / "master1"
    assert not (master / "etc/kubernetes/scheduler-policy-config.json").exists() or json.loads(
        (master / "etc/kubernetes/scheduler-policy-config.json").read_text()
    ).get("extenders", []) == []
    manifests = list((master / "etc/kubernetes/kube-gpu-nodes/stacks/nvidia_device_plugin").glob("*.yml"))
    assert manifests
    for manifest in manifests:
        for doc in yaml.safe_load_all(manifest.read_text()):
            if doc and doc.get("kind") == "DaemonSet":
                assert doc["apiVersion"] == "apps/v1"
    for gpu in ("gpu1", "gpu2", "gpu3"):
        daemon = json.loads((centos7 / gpu / "etc/docker/daemon.json").read_text())
        assert daemon["default-runtime"] == "nvidia"


def test_reference_centos7_gpu_nodes_get_nvidias_yum_repository_not_an_apt_source(centos7):
    # No toolkit version pinned in the inventory: the default 1.20.0 is the stable/rpm era, which also
    # serves the nvidia-docker2 these Docker 18.09 nodes get.
    for gpu in ("gpu1", "gpu2", "gpu3"):
        parser = configparser.RawConfigParser()
        parser.read_string((centos7 / gpu / "etc/yum.repos.d/nvidia-container-toolkit.repo").read_text())
        assert parser.sections() == ["nvidia-container-toolkit"]
        assert dict(parser["nvidia-container-toolkit"]) == {
            "name": "nvidia-container-toolkit",
            "baseurl": "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch",
            "repo_gpgcheck": "1",
            "gpgcheck": "0",
            "enabled": "1",
            "gpgkey": "https://nvidia.github.io/libnvidia-container/gpgkey",
        }
        assert not (centos7 / gpu / "etc/apt/sources.list.d/nvidia-container-toolkit.list").exists()


def test_every_kubernetes_object_of_the_lab_is_valid_for_its_version(lab):
    """Static pods, stack manifests and samples, strictly, against the OpenAPI schema of each host's version."""
    checked = kubernetes_schemas.check_render(lab)
    assert checked and all(checked.values()), checked


def test_render_plans_the_mig_layout_from_the_gpus_the_last_run_recorded(tmp_path):
    """render.yml renders every role of a GPU node, MIG included: its plan (commands, not files) from the GPUs
    the last run recorded (kgn_observed_nvidia_mig, here the H100 capture's GPUs); a node with none recorded is
    refused as a run there would refuse it."""
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig

    xml = (TOP / "tests/unit/modules/fixtures/nvidia-h100-80gb-hbm3-580/nvidia-smi-q-x.xml").read_text()
    observed = {"gpus": mig.parse_query_xml(xml), "gis": [], "cis": [], "offered": None}
    node = {"kubernetes_version": "1.34.1", "container_runtime": "containerd", "nvidia_mig_layout": "all-3g.40gb",
            "nvidia_mig_strategy": "single", "gpu_sharing_stacks": ["nvidia_device_plugin"],
            "kgn_observed_nvidia_container_toolkit": {"pkg_mgr": "apt"},
            "nvidia_driver_observed": {"os": {"id": "debian", "version_id": "12"}, "architecture": "x86_64"}}
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": {
        "h100": {**node, "kgn_observed_nvidia_mig": observed}, "fresh": node}},
        "kube_control_plane": {"hosts": {}}}, "vars": {"kube_api_kubeconfig": "/etc/kubernetes/admin.conf"}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    result = run_playbook("playbooks/render.yml", "-i", str(tmp_path / "inventory.yml"),
                          "-e", f"render_dir={tmp_path / 'out'}")
    # a layout for a node whose GPUs were never recorded is what a run there would refuse: said, the rest rendered
    assert result.returncode != 0
    assert "fresh: nvidia_mig_layout is 'all-3g.40gb' but nvidia-smi lists no GPU on this node" in result.stdout
    assert "h100: nvidia_mig" not in result.stdout
    plan = json.loads((tmp_path / "out/h100/_plan/nvidia_mig.json").read_text())
    [gpu] = plan["gpus"]
    assert plan["changed"] and gpu["after"].count("3g.40gb") == 2 and plan["assumed"] == []
    assert any("mig -i 0 -e 1" in " ".join(step["argv"]) or "-mig 1" in " ".join(step["argv"])
               for step in plan["commands"])
    assert not (tmp_path / "out/fresh/_plan/nvidia_mig.json").exists()
    # the node's other roles rendered beside it (the role list of render.yml)
    assert (tmp_path / "out/h100/_plan/nvidia_driver.json").exists()
    assert (tmp_path / "out/h100/_plan/cuda_toolkit.yml").exists()


def _toolkit(host: Path) -> dict:
    return tomllib.loads((host / "etc/nvidia-container-runtime/config.toml").read_text())


def _device_plugin(manifest: Path) -> dict:
    return next(d for d in yaml.safe_load_all(manifest.read_text()) if d and d.get("kind") == "DaemonSet")


def test_render_shows_who_may_ask_for_gpus_by_the_variable(lab, centos7):
    """docs/isolation.md: a CDI node (the lab's containerd 2.1, device plugin) and a legacy node (CentOS 7, Docker
    18.09, device plugin v0.9) are closed, with the device plugin's volume mounts; the gpushare node stays open."""
    envvar, mounts = isolation.ENVVAR_KEY, isolation.MOUNTS_KEY
    cdi = _toolkit(lab / "kgn-gpu-containerd")
    assert (cdi[envvar], cdi[mounts]) == (False, True)
    container = _device_plugin(lab / "kgn-cp-kubeadm/etc/kubernetes/kube-gpu-nodes/stacks/nvidia_device_plugin"
                               / "daemonset-v0.12.yml")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"} in container["env"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    gpushare = _toolkit(lab / "kgn-gpu-docker")
    assert (gpushare[envvar], gpushare[mounts]) == (True, True)
    for gpu in ("gpu1", "gpu2", "gpu3"):
        legacy = _toolkit(centos7 / gpu)
        assert (legacy[envvar], legacy[mounts]) == (False, True)
    manifests = (centos7 / "master1/etc/kubernetes/kube-gpu-nodes/stacks/nvidia_device_plugin").glob("*.yml")
    container = _device_plugin(next(manifests))["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"} in container["env"]
