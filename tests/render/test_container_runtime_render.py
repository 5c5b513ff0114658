"""Render entry point of nvidia_container_runtime for engines the lab cannot run: containerd 2.x
(config version 3) and CRI-O. Runs the real role through ansible-playbook, then parses the files."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from playbook_runner import RENDER_PLAY, render_role, run_playbook, says

PROJECT = Path(__file__).resolve().parents[2]

INVENTORY = """
gpu_nodes:
  hosts:
    node-ctrd2:
      container_runtime: containerd
      kgn_observed_container_runtime:
        versions: {containerd: "2.1.4"}
    node-ctrd2-inline:
      container_runtime: containerd
      nvidia_container_runtime_containerd_dropin_enabled: false
      kgn_observed_container_runtime:
        versions: {containerd: "2.0.0"}
        files:
          /etc/containerd/config.toml: |
            version = 3
            [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
            runtime_type = "io.containerd.runc.v2"
            options = {SystemdCgroup = true}
    node-crio:
      container_runtime: crio
      kgn_observed_container_runtime:
        versions: {crio: "1.31.0"}
    node-docker:
      container_runtime: docker
      kgn_observed_container_runtime:
        versions: {docker: "20.10.24"}
        cri_dockerd: true   # Kubernetes 1.31 has no dockershim
        files:
          /etc/docker/daemon.json: '{"log-driver": "json-file", "exec-opts": ["native.cgroupdriver=systemd"]}'
    node-unknown:
      container_runtime: auto
  vars:
    kubernetes_version: "1.31.2"
    ansible_connection: local
"""

@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    return render_role(tmp_path_factory.mktemp("render"), "nvidia_container_runtime", INVENTORY)


def test_containerd_2_dropin_uses_version_3_paths(rendered):
    main = tomllib.loads((rendered / "node-ctrd2/etc/containerd/config.toml").read_text())
    dropin = tomllib.loads((rendered / "node-ctrd2/etc/containerd/conf.d/99-nvidia.toml").read_text())
    assert main == {"version": 3, "imports": ["/etc/containerd/conf.d/99-nvidia.toml"]}
    assert dropin["version"] == 3
    assert list(dropin["plugins"]) == ["io.containerd.cri.v1.runtime"]
    containerd = dropin["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
    assert containerd["default_runtime_name"] == "nvidia"
    assert containerd["runtimes"]["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"},
    }
    assert "io.containerd.grpc.v1.cri" not in (rendered / "node-ctrd2/etc/containerd/conf.d/99-nvidia.toml").read_text()


def test_containerd_2_inline_copies_runc_systemd_cgroup(rendered):
    config = tomllib.loads((rendered / "node-ctrd2-inline/etc/containerd/config.toml").read_text())
    assert not (rendered / "node-ctrd2-inline/etc/containerd/conf.d").exists()
    containerd = config["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
    assert containerd["default_runtime_name"] == "nvidia"
    assert containerd["runtimes"]["runc"]["options"] == {"SystemdCgroup": True}
    assert containerd["runtimes"]["nvidia"]["options"] == {
        "SystemdCgroup": True,
        "BinaryName": "/usr/bin/nvidia-container-runtime",
    }


def test_crio_dropin(rendered):
    path = rendered / "node-crio/etc/crio/crio.conf.d/99-nvidia.conf"
    dropin = tomllib.loads(path.read_text())
    assert dropin == {
        "crio": {
            "runtime": {
                "default_runtime": "nvidia",
                "runtimes": {"nvidia": {"runtime_path": "/usr/bin/nvidia-container-runtime", "runtime_type": "oci"}},
            }
        }
    }
    assert not (rendered / "node-crio/etc/containerd").exists()


def test_docker_daemon_json_merged(rendered):
    daemon = json.loads((rendered / "node-docker/etc/docker/daemon.json").read_text())
    assert daemon == {
        "log-driver": "json-file",
        "exec-opts": ["native.cgroupdriver=systemd"],
        "default-runtime": "nvidia",
        "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}},
    }


def test_docker_keeps_the_users_key_order(rendered):
    text = (rendered / "node-docker/etc/docker/daemon.json").read_text()
    assert list(json.loads(text)) == ["log-driver", "exec-opts", "runtimes", "default-runtime"]


def test_nothing_recorded_is_assumed_and_said(rendered):
    plan = json.loads((rendered / "node-unknown/_plan/container_runtime.json").read_text())
    assert plan["engine"] == "containerd"  # Kubernetes 1.31: no dockershim
    assert any("containerd 1.7.24 and no other engine" in a for a in plan["assumed"]), plan["assumed"]
    assert any("built-in default" in a for a in plan["assumed"]), plan["assumed"]


def test_docker_without_a_cri_shim_is_refused(tmp_path):
    inventory = {"gpu_nodes": {"hosts": {"node": {
        "container_runtime": "docker", "kubernetes_version": "1.31.2", "ansible_connection": "local",
        "kgn_observed_container_runtime": {"versions": {"docker": "26.1.5"}}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(RENDER_PLAY.format(role="nvidia_container_runtime"))
    result = run_playbook("-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e", f"render_dir={tmp_path}")
    assert result.returncode != 0
    assert says(result.stdout, "has no dockershim (removed in 1.24) and cri-dockerd is not installed")
