"""Verify judges the plans and live states the modules recorded: the checks and the causes they lead to."""

from __future__ import annotations

import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import api_answer
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.checks import diagnose, run_checks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.verify import verify_expected, verify_observed
from conftest import ROOT

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
    checks = diagnose(run_checks(observed, verify_expected(SETTINGS, {})))
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
    check = {c["id"]: c for c in run_checks(observed, verify_expected(SETTINGS, {}))}["runtime_registered"]
    assert check["status"] == "skipped" and "recorded no state" in check["summary"]


def test_a_newer_minor_on_the_newest_known_variant_reaches_the_report():
    """kubernetes_version_allow_newer: the plan records it, the expectation carries it, the report's cell says it."""
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.report import _scheduler_cell
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler.scheduler import scheduler_variant

    variant = scheduler_variant("1.38.1", True)
    plan = {"action": "configure", "health_url": "https://10.0.0.1:10259/healthz", "variant": variant,
            "newer_than_known": True, "version_note": variant["note"]}
    expected = verify_expected({"host": "cp", "kinds": ["control_plane"], "stacks": ["gpushare"]},
                               {"kube_scheduler": {"plan": plan}})
    assert expected["scheduler"]["variant_minor"] == "1.37"
    assert "newer than 1.37" in expected["scheduler"]["version_note"]
    assert "1.37 variant for a newer Kubernetes (kubernetes_version_allow_newer)" in _scheduler_cell(
        {}, expected, [])


def test_the_scheduler_expectation_comes_from_its_recorded_plan():
    plan = {"action": "configure", "health_url": "https://10.0.0.1:10259/healthz",
            "variant": {"format": "kube_scheduler_configuration", "api_version": "kubescheduler.config.k8s.io/v1beta3",
                        "flag": "--config", "path": "/etc/kubernetes/scheduler-policy-config.yaml"}}
    expected = verify_expected({"host": "cp", "kinds": ["control_plane"], "stacks": ["gpushare"]},
                               {"kube_scheduler": {"plan": plan}})
    assert expected["scheduler"] == {"variant": "v1beta3", "flag": "--config",
                                     "config_path": "/etc/kubernetes/scheduler-policy-config.yaml",
                                     "health_url": "https://10.0.0.1:10259/healthz",
                                     "extender_paths": ["/gpushare-scheduler"], "state_missing": False,
                                     "needs_extender": True, "variant_minor": "", "version_note": ""}
    left_alone = verify_expected({"host": "cp", "kinds": ["control_plane"], "stacks": ["gpushare"]},
                                 {"kube_scheduler": {"plan": {**plan, "action": "leave"}}})
    assert left_alone["scheduler"]["extender_paths"] == []


def test_a_sites_own_extender_is_expected_in_the_config_with_or_without_a_stack_that_needs_one():
    """kube_scheduler_extender_extra_extenders reach the recorded plan's extenders: verify expects them in the
    scheduler's config too (the lab's kubeadm cluster: the device plugin needs none, the site's own does)."""
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.report import _scheduler_cell

    plan = {"action": "configure", "health_url": "https://127.0.0.1:10259/healthz",
            "variant": {"format": "kube_scheduler_configuration", "api_version": "kubescheduler.config.k8s.io/v1",
                        "flag": "--config", "path": "/etc/kubernetes/scheduler-policy-config.yaml"},
            "extenders": [{"url_prefix": "http://10.0.0.1:32766/gpushare-scheduler"},
                          {"url_prefix": "http://127.0.0.1:32767/site-extender/", "ignorable": True}]}
    both = verify_expected({"host": "cp", "kinds": ["control_plane"], "stacks": ["gpushare"]},
                           {"kube_scheduler": {"plan": plan}})
    assert both["scheduler"]["extender_paths"] == ["/gpushare-scheduler", "/site-extender"]
    plan["extenders"] = plan["extenders"][1:]
    own = verify_expected({"host": "cp", "kinds": ["control_plane"], "stacks": ["nvidia_device_plugin"]},
                          {"kube_scheduler": {"plan": plan}})
    assert own["scheduler"]["extender_paths"] == ["/site-extender"] and own["scheduler"]["needs_extender"]
    assert _scheduler_cell({}, own, []) == "v1 (--config)"


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
        verify_observed("not a probe", {})


def test_the_stack_catalog_says_what_verify_expects_of_each_stack():
    expected = verify_expected({"host": "cp", "kinds": ["gpu_node", "control_plane"], "stacks": ["gpushare"]}, {})
    assert expected["device_plugin_sockets"] == [r"aliyun.*\.sock"]
    assert expected["stack_args"] == [{"daemonset": "gpushare-device-plugin-ds", "arg": "--memory-unit",
                                       "stack": "gpushare"}]
    assert verify_expected({"host": "n", "kinds": ["gpu_node"], "stacks": ["gpushare"]}, {})["stack_args"] == []


def test_what_the_module_reads_follows_from_the_settings_and_states():
    states = {"container_runtime": runtime_state(),
              "kube_scheduler": {"plan": {"action": "configure", "variant": {"path": "/etc/k/s.yaml"}}}}
    assert verify.probe_args({"kinds": ["gpu_node", "control_plane"]}, states) == {
        "gpu_node": True, "control_plane": True, "containerd_config": "/etc/containerd/config.toml",
        "scheduler_config_path": "/etc/k/s.yaml", "engine_smoke": {}}
    assert verify.probe_args({"kinds": ["gpu_node"]}, {})["containerd_config"] == ""


def test_the_api_answer_of_the_hosts_api_server_is_picked_from_the_looped_read():
    looped = {"results": [{"item": {"host": "cp1"}, "reachable": True, "resources": {}},
                          {"item": {"host": ""}, "reachable": False, "error": "no kubeconfig"},
                          {"item": {"host": "cp2"}, "unreachable": True, "msg": "ssh: timed out"}]}
    assert api_answer(looped, "cp1")["reachable"] is True
    assert api_answer(looped, "")["error"] == "no kubeconfig"
    assert verify.api_view(api_answer(looped, "cp2"), "gpu1") == {
        "reachable": False, "node_name": "gpu1", "error": "ssh: timed out", "read": True, "server": ""}
    assert api_answer(looped, "cp3") is None and api_answer(None, "cp1") is None
    # with a kubeconfig, the target must have it too (two clusters reached from one host)
    two = {"results": [{"item": {"host": "", "kubeconfig": "/a.conf"}, "reachable": True, "cluster": "a"},
                       {"item": {"host": "", "kubeconfig": "/b.conf"}, "reachable": True, "cluster": "b"}]}
    assert api_answer(two, "", "/b.conf")["cluster"] == "b" and api_answer(two, "", "/c.conf") is None


def test_the_pod_smoke_of_the_node_is_picked_from_the_batches_of_its_play():
    ok = {"status": "ok", "summary": "nvidia_device_plugin: Succeeded"}
    looped = {"results": [
        {"item": {"host": "cp1", "nodes": [{"node_name": "gpu1"}, {"node_name": "gpu2"}]}, "status": "ok",
         "nodes": {"gpu1": ok, "gpu2": dict(ok, status="failed")}},
        {"item": {"host": "cp2", "nodes": [{"node_name": "gpu3"}]}, "unreachable": True, "msg": "ssh: timed out"}]}
    assert verify.pod_smoke_answer(looped, "gpu1") == ok
    assert verify.pod_smoke_answer(looped, "gpu2")["status"] == "failed"
    # an unreachable API host answers as itself: no status, so the node's smoke did not run
    unreached = verify.pod_smoke_answer(looped, "gpu3")
    assert unreached["unreachable"] and verify.verify_observed(None, {}, pod_smoke=unreached)["smoke"]["pod"] is None
    assert verify.pod_smoke_answer(looped, "gpu4") is None and verify.pod_smoke_answer(None, "gpu1") is None
    # two clusters may have nodes of the same name: the host's own API server's batch answers
    same_name = {"results": [dict(looped["results"][0], item={"host": "cp1", "nodes": [{"node_name": "gpu1"}]}),
                             {"item": {"host": "cp2", "nodes": [{"node_name": "gpu1"}]}, "nodes": {"gpu1": {
                                 "status": "failed", "summary": "x"}}}]}
    assert verify.pod_smoke_answer(same_name, "gpu1", "cp2")["status"] == "failed"
    assert verify.pod_smoke_answer(same_name, "gpu1", "cp1") == ok
    assert verify.pod_smoke_answer(same_name, "gpu1", "cp3") is None
    # a task Ansible skipped (no batch: a check-mode run, no GPU node with stacks) and a one-node result
    assert verify.pod_smoke_answer({"results": [], "skipped": True}, "gpu1") is None
    assert verify.pod_smoke_answer(ok, "gpu1") == ok
    with pytest.raises(KgnError, match="looped register"):
        verify.pod_smoke_answer(["gpu1"], "gpu1")


def test_a_host_that_stopped_is_judged_from_its_inventory_and_facts():
    """The settings of a host the verify play never reached mirror the role's defaults (roles/gpu_node_verify)."""
    defaults = yaml.safe_load((ROOT / "roles/gpu_node_verify/defaults/main.yml").read_text())
    host_vars = {"gpu_sharing_stacks": ["gpushare"], "gpu_driver_version": "535", "gpu_node_verify_expect_gpu": False,
                 "nvidia_mig_layout": "all-disabled"}
    settings = verify.settings_from_vars("n1", host_vars, {"gpu_nodes": ["n1"], "kube_control_plane": []}, True)
    assert settings == {"host": "n1", "node_name": "n1", "kinds": ["gpu_node"], "stacks": ["gpushare"],
                        "expect_gpu": False, "waived": [], "driver_version": "535", "extra_labels": {},
                        "labels_require_gpu": True, "mig_layout": "all-disabled", "gpu_facts": {},
                        "check_mode": True, "engine_smoke": True, "pod_smoke": True}
    # the same inputs, the same defaults
    assert defaults["gpu_node_verify_expect_gpu"] is True and defaults["gpu_node_verify_labels_require_gpu"] is True
    assert defaults["gpu_node_verify_waived_checks"] == [] and defaults["gpu_node_verify_extra_labels"] == {}
    assert defaults["gpu_node_verify_gpu_facts"] == {}
    assert defaults["gpu_node_verify_engine_smoke"] is True and defaults["gpu_node_verify_pod_smoke"] is True
    assert "gpu_sharing_stacks" in defaults["gpu_node_verify_stacks"]
    assert "gpu_driver_version" in defaults["gpu_node_verify_driver_version"]
    assert "nvidia_mig_layout" in defaults["gpu_node_verify_mig_layout"]
    assert (defaults["gpu_node_verify_gpu_group"], defaults["gpu_node_verify_control_plane_group"]) == (
        "gpu_nodes", "kube_control_plane")
