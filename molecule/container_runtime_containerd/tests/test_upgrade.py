"""containerd 1.7 -> 2.1 on the trixie node (side_effect.yml): the node converges in the 2.x layout, keeps the
user's settings (SystemdCgroup = true for runc, and so for nvidia), nvidia the CRI default with CDI on, as the
running containerd says over the CRI (the lab's stand-in crictl makes the real Status call)."""

from __future__ import annotations

import json
import tomllib

import pytest

CASE = "/var/tmp/kgn-side-effect/upgrade.json"
CRI = "io.containerd.cri.v1.runtime"


@pytest.fixture
def upgraded(host):
    if host.file("/etc/kgn-lab-node").content_string.strip() != "trixie":
        pytest.skip("the upgrade case runs on the trixie node")
    return json.loads(host.file(CASE).content_string)


def test_the_node_runs_containerd_2_1_and_converged_twice(host, upgraded):
    assert " 2.1." in host.check_output("containerd --version")
    assert tomllib.loads(upgraded["before"])["version"] == 2  # the 1.7 node's own file
    assert upgraded["changed"] is True and upgraded["again_changed"] is False
    assert upgraded["mode"] == "cdi" and upgraded["cri_plugin"] == CRI


def test_the_config_is_in_the_2x_layout_and_keeps_the_users_settings(host, upgraded):
    main = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
    assert main["version"] == 3 and main["imports"] == ["/etc/containerd/conf.d/99-nvidia.toml"]
    assert main["plugins"][CRI]["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    dropin = tomllib.loads(host.file("/etc/containerd/conf.d/99-nvidia.toml").content_string)
    assert dropin["version"] == 3 and set(dropin["plugins"]) == {CRI}


def test_the_running_containerd_has_nvidia_default_cdi_on_and_systemd_cgroups(host, upgraded):
    config = json.loads(host.check_output("crictl info"))["config"]
    assert config["containerd"]["defaultRuntimeName"] == "nvidia"
    assert config["enableCDI"] is True
    nvidia = config["containerd"]["runtimes"]["nvidia"]["options"]
    assert nvidia["BinaryName"] == "/usr/bin/nvidia-container-runtime" and nvidia["SystemdCgroup"] is True
    journal = host.check_output("journalctl -u containerd --no-pager -n 50")
    assert "Configuration migrated from version 2" not in journal.split("Starting containerd")[-1]
