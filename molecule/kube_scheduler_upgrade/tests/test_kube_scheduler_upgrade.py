"""1.18 -> 1.25 variant switch on the same node, then the refused-config fault and its rollback."""

import json

import yaml

POLICY = "/etc/kubernetes/scheduler-policy-config.json"
CONFIG = "/etc/kubernetes/scheduler-policy-config.yaml"
KUBEASZ_DROPIN = "/etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"


def _kubeadm(host):
    return host.backend.get_hostname().endswith("kubeadm")


def test_at_1_18_the_scheduler_ran_the_policy_file(host):
    cmdline = host.file("/root/kgn-test/at-1.18.cmdline").content_string
    assert cmdline.count(f"--policy-config-file={POLICY}") == 1
    assert "--config" not in cmdline
    assert host.file("/root/kgn-test/at-1.18.healthz").content_string == "ok"


def test_at_1_25_the_config_is_a_v1_document_and_the_policy_file_is_gone(host):
    doc = yaml.safe_load(host.file(CONFIG).content_string)
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    [extender] = doc["extenders"]  # the Policy's extender carried over, not duplicated
    assert extender["urlPrefix"] == "http://127.0.0.1:32766/gpushare-scheduler"
    assert extender["enableHTTPS"] is False
    assert not host.file(POLICY).exists
    backups = host.run("ls -A /etc/kubernetes/kgn-backups").stdout.split()
    assert any(name.startswith("scheduler-policy-config.json.") for name in backups)  # kept only as a backup


def test_no_policy_flag_is_left_anywhere(host):
    places = [MANIFEST] if _kubeadm(host) else [KUBEASZ_DROPIN, "/etc/systemd/system/kube-scheduler.service"]
    for path in places:
        assert "--policy-config-file" not in host.file(path).content_string, path
    if _kubeadm(host):
        pod = yaml.safe_load(host.file(MANIFEST).content_string)
        paths = [v["hostPath"]["path"] for v in pod["spec"]["volumes"]]
        assert POLICY not in paths and paths.count(CONFIG) == 1
    else:
        assert host.file(KUBEASZ_DROPIN).content_string.count(f"--config={CONFIG}") == 1


def test_the_scheduler_runs_config_once_and_is_healthy(host):
    cmdline = host.file("/root/kgn-test/after-fault.cmdline").content_string
    assert cmdline.count(f"--config={CONFIG}") == 1 and "--policy-config-file" not in cmdline
    assert host.file("/root/kgn-test/after-fault.healthz").content_string == "ok"
    version = host.check_output(
        "/opt/kube/bin/kube-scheduler --version" if not _kubeadm(host) else "kube-scheduler --version"
    )
    assert version == "Kubernetes v1.25.16"


def test_fault_was_rolled_back_byte_for_byte_and_named(host):
    fault = json.loads(host.file("/root/kgn-test/fault.json").content_string)
    assert fault["before"] == fault["after"]
    assert fault["healthz"] == "ok"
    own_error = 'no kind "KubeSchedulerConfiguration" is registered for version "kubescheduler.config.k8s.io/v1beta1"'
    assert fault["messages"] and all(own_error in m for m in fault["messages"])
    rollbacks = [m for m in fault["messages"] if "restored" in m]
    assert rollbacks and all("is healthy again" in m for m in rollbacks)
    if not _kubeadm(host):  # first attempt: refused by the binary before anything was written
        assert "refuses the new config, so nothing was changed" in fault["messages"][0]
