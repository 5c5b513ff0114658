"""Real kube-scheduler v1.22.3 given a hand-wired Policy file (it refuses it) -> the role at 1.22.3 (v1beta2, running
again) -> binaries upgraded to v1.36.3 -> the role at 1.36.3 (v1), then the refused-config fault and its rollback."""

import json

import yaml

POLICY = "/etc/kubernetes/scheduler-policy-config.json"
CONFIG = "/etc/kubernetes/scheduler-policy-config.yaml"
UNIT = "/etc/systemd/system/kube-scheduler.service"
DROPIN = "/etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf"
EXTENDER = "http://127.0.0.1:32766/gpushare-scheduler"


def _evidence(host, name):
    return (host.file(f"/root/kgn-test/{name}.cmdline").content_string,
            host.file(f"/root/kgn-test/{name}.healthz").content_string)


def test_the_real_1_22_scheduler_refused_the_hand_wired_policy_file(host):
    """Upstream v1.22.3 turns a Policy without priorities into a v1beta2 configuration it cannot load."""
    said = host.file("/root/kgn-test/policy-1.22.journal").content_string
    assert 'no kind "NodeResourcesLeastAllocatedArgs" is registered for version "kubescheduler.config.k8s.io/v1beta2"' \
        in said


def test_at_1_22_the_role_moved_the_policy_to_a_v1beta2_config_and_the_scheduler_runs(host):
    cmdline, health = _evidence(host, "at-1.22")
    # the flag left the unit, the extender went into the config
    assert cmdline.count(f"--config={CONFIG}") == 1 and "--policy-config-file" not in cmdline
    assert health == "ok"


def test_at_1_36_the_config_is_a_v1_document_and_the_policy_file_is_gone(host):
    doc = yaml.safe_load(host.file(CONFIG).content_string)
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    [extender] = doc["extenders"]  # the Policy's extender carried over, not duplicated
    assert extender["urlPrefix"] == EXTENDER
    assert extender["enableHTTPS"] is False
    assert not host.file(POLICY).exists
    backups = host.run("ls -A /etc/kubernetes/kgn-backups").stdout.split()
    assert any(name.startswith("scheduler-policy-config.json.") for name in backups)  # kept only as a backup


def test_the_owners_unit_is_kept_and_the_dropin_runs_the_config_without_the_policy_flag(host):
    # the owner's own line stays in the owner's file; the drop-in's ExecStart replaces the command (systemd)
    assert host.file(UNIT).content_string.count(f"--policy-config-file={POLICY}") == 1
    dropin = host.file(DROPIN).content_string
    assert "--policy-config-file" not in dropin and dropin.count(f"--config={CONFIG}") == 1
    shown = host.check_output("systemctl show -p ExecStart --value kube-scheduler")
    assert f"--config={CONFIG}" in shown and "--policy-config-file" not in shown


def test_the_real_1_36_scheduler_runs_config_once_and_is_healthy(host):
    cmdline, health = _evidence(host, "after-fault")
    assert cmdline.count(f"--config={CONFIG}") == 1 and "--policy-config-file" not in cmdline
    assert health == "ok"
    assert host.check_output("/opt/kube/bin/kube-scheduler --version") == "Kubernetes v1.36.3"
    assert json.loads(host.check_output("kubectl get --raw /version"))["gitVersion"] == "v1.36.3"


def test_fault_was_rolled_back_byte_for_byte_and_named(host):
    fault = json.loads(host.file("/root/kgn-test/fault.json").content_string)
    assert fault["before"] == fault["after"]
    assert fault["healthz"] == "ok"
    # the real binary's words, as its structured log writes them (quotes escaped)
    own_error = (r'no kind \"KubeSchedulerConfiguration\" is registered for version '
                 r'\"kubescheduler.config.k8s.io/v1beta1\"')
    assert len(fault["messages"]) == 2 and all(own_error in m for m in fault["messages"])
    # first attempt: refused by the binary before anything was written; then (pre-check off) the rollback
    assert "refuses the new config, so nothing was changed" in fault["messages"][0]
    assert "restored" in fault["messages"][1] and "is healthy again" in fault["messages"][1]
