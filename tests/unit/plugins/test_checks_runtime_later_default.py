"""Verify's diagnosis when a file of the node, read after ours, decides the default runtime: the cause names that
file and what it sets (not "config.toml was rewritten"); without such a file the old causes stay."""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import diagnose, run_checks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.verify import verify_expected, verify_observed

PROBE = {"gpu_node": True, "control_plane": False, "pci_devices": [], "modules": {"nvidia": False, "nouveau": False},
         "secure_boot": None, "device_plugin": {"dir": "/var/lib/kubelet/device-plugins", "sockets": []},
         "containerd_backup_mentions_nvidia": False}
SETTINGS = {"host": "n1", "kinds": ["gpu_node"], "stacks": ["nvidia_device_plugin"], "expect_gpu": False}
BINARY = {"path": "/usr/bin/nvidia-container-runtime", "exists": True, "executes": True, "version": "1.20.0",
          "error": ""}
V3_KEY = 'plugins."io.containerd.cri.v1.runtime".containerd.default_runtime_name'
ENGINES = {
    "containerd": {"service": "containerd", "files": ["/etc/containerd/conf.d/99-nvidia.toml",
                                                      "/etc/containerd/config.toml"]},
    "crio": {"service": "crio", "files": ["/etc/crio/crio.conf.d/99-nvidia.conf"]},
    "docker": {"service": "docker", "files": ["/etc/docker/daemon.json"]},
}


def state(engine, default_set_by=None, **live):
    plan = {"engine": engine, "service": ENGINES[engine]["service"], "versions": {},
            "files": [{"path": p} for p in ENGINES[engine]["files"]]}
    healthy = {"engine": engine, "answered": True, "active": True, "service": "active (running)", "error": "",
               "default_runtime": "runc", "runtimes": ["nvidia", "runc"], "stale_files": [], "problems": [],
               "binary": BINARY, "default_set_by": default_set_by}
    return {"plan": plan, "live": {**healthy, **live}, "changed": False}


def judged(recorded):
    observed = verify_observed(PROBE, {"container_runtime": recorded})
    return {c["id"]: c for c in diagnose(run_checks(observed, verify_expected(SETTINGS, {})))}


def causes(check):
    return [d["id"] for d in check["diagnosis"]]


def test_containerd_a_later_import_that_sets_runc_is_the_cause_named_with_its_path():
    later = {"path": "/etc/containerd/conf.d/zz-runc.toml", "key": V3_KEY, "value": "runc",
             "ours": "/etc/containerd/conf.d/99-nvidia.toml", "config": "/etc/containerd/config.toml", "table": False}
    checks = judged(state("containerd", later))
    check = checks["runtime_default"]
    assert check["status"] == "failed" and causes(check) == ["containerd_default_set_later"]
    cause = check["diagnosis"][0]["cause"]
    assert cause.startswith(f'/etc/containerd/conf.d/zz-runc.toml sets {V3_KEY} = "runc" and containerd reads it '
                            "after this project's /etc/containerd/conf.d/99-nvidia.toml")
    assert "/etc/containerd/config.toml was not rewritten" in cause
    assert "remove default_runtime_name from /etc/containerd/conf.d/zz-runc.toml" in check["diagnosis"][0]["fix"]
    assert checks["runtime_registered"]["status"] == "ok"


def test_containerd_without_a_later_file_keeps_the_rewritten_config_cause():
    assert causes(judged(state("containerd"))["runtime_default"]) == ["containerd_default_not_nvidia"]


def test_containerd_1x_a_later_cri_table_explains_the_missing_runtime_too():
    later = {"path": "/etc/containerd/conf.d/registry.toml", "value": "runc", "table": True,
             "key": 'plugins."io.containerd.grpc.v1.cri" (the whole table, without default_runtime_name)',
             "ours": "/etc/containerd/conf.d/99-nvidia.toml", "config": "/etc/containerd/config.toml"}
    checks = judged(state("containerd", later, runtimes=["runc"]))
    assert causes(checks["runtime_registered"]) == ["containerd_table_replaced_later"]
    assert "/etc/containerd/conf.d/registry.toml has a [plugins.\"io.containerd.grpc.v1.cri\"] table" in \
        checks["runtime_registered"]["diagnosis"][0]["cause"]
    assert causes(checks["runtime_default"]) == ["containerd_default_set_later"]


def test_crio_a_later_drop_in_is_the_cause_named_with_its_path():
    later = {"path": "/etc/crio/crio.conf.d/99-zz-crun.conf", "key": "[crio.runtime] default_runtime", "value": "crun",
             "ours": "/etc/crio/crio.conf.d/99-nvidia.conf", "config": "/etc/crio/crio.conf"}
    check = judged(state("crio", later, default_runtime="crun"))["runtime_default"]
    assert causes(check) == ["crio_default_set_later"]
    assert check["diagnosis"][0]["cause"].startswith(
        '/etc/crio/crio.conf.d/99-zz-crun.conf sets [crio.runtime] default_runtime = "crun" and CRI-O reads it after '
        "this project's drop-in /etc/crio/crio.conf.d/99-nvidia.conf")
    assert causes(judged(state("crio", default_runtime="crun"))["runtime_default"]) == ["crio_default_not_nvidia"]


@pytest.mark.parametrize(("key", "value", "default_cause", "registered"), [
    ("--default-runtime", "docker-runc", "docker_default_flag", True),
    ("--config-file", "/srv/docker/daemon.json", "docker_config_file_flag", False),
])
def test_docker_a_flag_in_the_unit_is_the_cause_named_with_the_unit(key, value, default_cause, registered):
    later = {"path": "/usr/lib/systemd/system/docker.service", "key": key, "value": value,
             "ours": "/etc/docker/daemon.json", "config": "/etc/docker/daemon.json"}
    runtimes = ["nvidia", "runc"] if registered else ["runc"]
    checks = judged(state("docker", later, default_runtime="docker-runc" if registered else "runc", runtimes=runtimes))
    assert causes(checks["runtime_default"]) == [default_cause]
    assert checks["runtime_default"]["diagnosis"][0]["cause"].startswith(
        f"/usr/lib/systemd/system/docker.service starts dockerd with {key}={value}")
    if not registered:
        assert causes(checks["runtime_registered"]) == ["docker_config_file_elsewhere"]
