"""Verify judges the plans and live states the modules recorded: the checks and the causes they lead to."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.filter.diagnose import diagnose, verify_checks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify_expected, verify_observed
from conftest import ROOT

CATALOG = yaml.safe_load((ROOT / "roles/gpu_node_verify/vars/main.yml").read_text())["__gpu_node_verify_catalog"]
PROBE = {"gpu_node": True, "control_plane": False, "pci_devices": [], "modules": {"nvidia": False, "nouveau": False},
         "secure_boot": None, "device_plugin": {"dir": "/var/lib/kubelet/device-plugins", "sockets": []},
         "containerd_backup_mentions_nvidia": False}
SETTINGS = {"host": "n1", "kinds": ["gpu_node"], "stacks": ["nvidia_device_plugin"], "expect_gpu": False}


def runtime_state(**live):
    plan = {"engine": "containerd", "service": "containerd", "versions": {"containerd": "2.1.4"},
            "files": [{"path": "/etc/containerd/conf.d/99-nvidia.toml"}, {"path": "/etc/containerd/config.toml"}]}
    healthy = {"engine": "containerd", "answered": True, "active": True, "service": "active (running)", "error": "",
               "default_runtime": "nvidia", "runtimes": ["nvidia", "runc"], "stale_files": [], "problems": [],
               "binary": {"path": "/usr/bin/nvidia-container-runtime", "exists": True, "executes": True,
                          "version": "runc 1.1", "error": ""}}
    return {"plan": plan, "live": {**healthy, **live}, "changed": False}


def judged(state):
    observed = verify_observed(PROBE, {"container_runtime": state})
    checks = diagnose(verify_checks(observed, verify_expected(SETTINGS, {})), CATALOG)
    return {c["id"]: c for c in checks}


def test_a_healthy_engine_passes_every_runtime_check():
    checks = judged(runtime_state())
    for check in ("runtime_binary", "runtime_registered", "runtime_default", "runtime_current"):
        assert checks[check]["status"] == "ok", checks[check]


def test_a_stopped_engine_fails_and_says_it_is_stopped():
    checks = judged(runtime_state(active=False, answered=False, service="inactive (dead)", error=""))
    check = checks["runtime_registered"]
    assert check["status"] == "failed"
    assert "containerd is not running" in check["summary"]
    assert [d["id"] for d in check["diagnosis"]] == ["engine_stopped"]


def test_a_missing_runtime_binary_fails_with_its_cause():
    checks = judged(runtime_state(binary={"path": "nvidia-container-runtime", "exists": False, "executes": False,
                                          "error": "not found"}))
    check = checks["runtime_binary"]
    assert check["status"] == "failed"
    assert [d["id"] for d in check["diagnosis"]] == ["runtime_binary_missing"]
    assert "executable file not found" in check["diagnosis"][0]["cause"]


def test_an_engine_older_than_its_files_is_not_current():
    checks = judged(runtime_state(stale_files=["/etc/containerd/conf.d/99-nvidia.toml"]))
    check = checks["runtime_current"]
    assert check["status"] == "failed"
    assert [d["id"] for d in check["diagnosis"]] == ["engine_not_restarted"]


def test_no_recorded_state_is_said():
    observed = verify_observed(PROBE, {})
    assert observed["runtime"]["engine"] == "none"


def test_the_scheduler_expectation_comes_from_its_recorded_plan():
    plan = {"action": "configure", "health_url": "https://10.0.0.1:10259/healthz",
            "variant": {"format": "kube_scheduler_configuration", "api_version": "kubescheduler.config.k8s.io/v1beta3",
                        "flag": "--config", "path": "/etc/kubernetes/scheduler-policy-config.yaml"}}
    expected = verify_expected({"host": "cp", "kinds": ["control_plane"], "stacks": ["gpushare"]},
                               {"kube_scheduler": {"plan": plan}})
    assert expected["scheduler"] == {"variant": "v1beta3", "flag": "--config",
                                     "config_path": "/etc/kubernetes/scheduler-policy-config.yaml",
                                     "health_url": "https://10.0.0.1:10259/healthz",
                                     "extender_paths": ["/gpushare-scheduler"], "state_missing": False}
    left_alone = verify_expected({"host": "cp", "kinds": ["control_plane"], "stacks": ["gpushare"]},
                                 {"kube_scheduler": {"plan": {**plan, "action": "leave"}}})
    assert left_alone["scheduler"]["extender_paths"] == []


def test_only_a_run_that_is_a_check_as_a_whole_has_pending_concerns():
    states = {"kube_scheduler": {"plan": {}, "changed": True, "check_mode": True},
              "stacks": {"changed": True, "check_mode": True}, "node_labels": {"changed": False, "check_mode": True},
              "nvidia_driver": {"plan": {}, "changed": True, "check_mode": False}}
    settings = {"host": "n", "kinds": ["gpu_node"], "stacks": []}
    assert verify_expected({**settings, "check_mode": True}, states)["pending"] == ["kube_scheduler", "stacks"]
    # playbooks/verify.yml: its concerns run in check mode to see drift, which stays a failure
    assert verify_expected(settings, states)["pending"] == []


def test_bad_input_is_refused():
    with pytest.raises(KgnError):
        verify_observed(None, {})


def test_the_smoke_results_reach_the_observations_and_a_skipped_task_is_no_smoke():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify_observed

    probe = {"gpu_node": True, "smoke": {"engine": {"status": "ok", "summary": "1 GPU(s)"},
                                         "pod": {"skipped": True, "changed": False, "false_condition": "x"}}}
    observed = verify_observed(probe, {})
    assert observed["smoke"] == {"engine": {"status": "ok", "summary": "1 GPU(s)"}, "pod": None}
