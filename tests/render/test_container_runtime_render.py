"""Render entry point of nvidia_container_runtime for engines the lab cannot run: containerd 2.x
(config version 3) and CRI-O. Runs the real role through ansible-playbook, then parses the files."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from playbook_runner import render_role

PROJECT = Path(__file__).resolve().parents[2]

INVENTORY = """
gpu_nodes:
  hosts:
    node-ctrd2:
      container_runtime: containerd
      nvidia_container_runtime_render_containerd_version: "2.1.4"
    node-ctrd2-inline:
      container_runtime: containerd
      nvidia_container_runtime_render_containerd_version: "2.0.0"
      nvidia_container_runtime_containerd_dropin_enabled: false
      nvidia_container_runtime_render_containerd_config:
        version: 3
        plugins:
          io.containerd.cri.v1.runtime:
            containerd:
              runtimes:
                runc: {runtime_type: io.containerd.runc.v2, options: {SystemdCgroup: true}}
    node-crio:
      container_runtime: crio
    node-docker:
      container_runtime: docker
      nvidia_container_runtime_render_docker_config:
        log-driver: json-file
        exec-opts: [native.cgroupdriver=systemd]
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
