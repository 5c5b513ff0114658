"""kube_scheduler_extender on a real kubeasz-style control plane (systemd unit, kube-scheduler 1.22.3): config,
drop-in, and the real scheduler running that config (its own /configz), healthy."""

import json

import yaml

CONFIG = "/etc/kubernetes/scheduler-policy-config.yaml"
UNIT = "/etc/systemd/system/kube-scheduler.service"
DROPIN = "/etc/systemd/system/kube-scheduler.service.d/90-kube-gpu-nodes-scheduler-config.conf"
KUBEASZ_FLAGS = [  # the kubeasz reference cluster's ExecStart (docs/versions.md A5)
    "--authentication-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig",
    "--authorization-kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig",
    "--bind-address=0.0.0.0",
    "--kubeconfig=/etc/kubernetes/kube-scheduler.kubeconfig",
    "--leader-elect=true",
    "--v=2",
]
HEALTHZ = (
    'python3 -c "import ssl,urllib.request;'
    "print(urllib.request.urlopen('https://127.0.0.1:10259/healthz',"
    'context=ssl._create_unverified_context(),timeout=5).read().decode())"'
)


def _running_args(host):
    pid = host.check_output("systemctl show --property=MainPID --value kube-scheduler.service")
    argv = host.file(f"/proc/{pid}/cmdline").content_string.rstrip("\0").split("\0")
    return argv[argv.index("/opt/kube/bin/kube-scheduler") + 1 :]


def test_config_is_the_v1beta2_document_for_the_detected_1_22(host):
    config = host.file(CONFIG)
    assert config.exists and config.user == "root" and config.mode == 0o644
    doc = yaml.safe_load(config.content_string)
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1beta2"  # 1.22: v1beta2 (docs/versions.md A2b)
    assert doc["clientConnection"]["kubeconfig"] == "/etc/kubernetes/kube-scheduler.kubeconfig"
    [extender] = doc["extenders"]
    assert extender["urlPrefix"].endswith(":32766/gpushare-scheduler")
    assert extender["filterVerb"] == "filter" and extender["bindVerb"] == "bind"
    assert extender["managedResources"] == [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": False}]


def test_installer_unit_is_untouched_and_the_drop_in_rebuilds_execstart(host):
    unit = host.file(UNIT).content_string
    assert "--config" not in unit  # the installer's file stays as rendered
    dropin = host.file(DROPIN)
    assert dropin.exists and dropin.mode == 0o644
    lines = dropin.content_string.splitlines()
    assert lines.count("ExecStart=") == 1  # reset, then one command
    assert host.file("/etc/kubernetes/kgn-backups").is_directory


def test_running_scheduler_has_every_original_flag_and_the_config_flag_once(host):
    args = _running_args(host)
    assert [a for a in args if a.startswith("--config")] == [f"--config={CONFIG}"]
    for flag in KUBEASZ_FLAGS:
        assert args.count(flag) == 1, flag
    assert len(args) == len(KUBEASZ_FLAGS) + 1


CONFIGZ = (
    "python3 -c \"import ssl,urllib.request;c=ssl._create_unverified_context();"
    "c.load_cert_chain('/etc/kubernetes/pki/kubelets/admin.crt','/etc/kubernetes/pki/kubelets/admin.key');"
    "print(urllib.request.urlopen('https://127.0.0.1:10259/configz',context=c,timeout=5).read().decode())\""
)


def test_the_real_scheduler_runs_the_config_on_disk_healthy_on_the_secure_port(host):
    assert host.service("kube-scheduler.service").is_running
    assert host.check_output(HEALTHZ) == "ok"
    assert host.check_output("/opt/kube/bin/kube-scheduler --version") == "Kubernetes v1.22.3"
    running = json.loads(host.check_output(CONFIGZ))["componentconfig"]
    on_disk = yaml.safe_load(host.file(CONFIG).content_string)
    # 1.22 serves its internal config type, whose fields keep their Go names
    assert [e["URLPrefix"] for e in running["Extenders"]] == [e["urlPrefix"] for e in on_disk["extenders"]]


def test_side_effect_removal_left_copies_of_what_it_removed(host):
    """side_effect.yml took the scheduler back to kubeasz's command (and then converged again): the drop-in and
    the config it removed are in the backup folder."""
    backups = host.run("ls -A /etc/kubernetes/kgn-backups").stdout.split()
    assert any(name.startswith("90-kube-gpu-nodes-scheduler-config.conf.") for name in backups)
    assert any(name.startswith("scheduler-policy-config.yaml.") for name in backups)


def test_side_effect_a_later_drop_in_with_its_own_execstart_was_refused_then_kept_once_renamed(host):
    """side_effect.yml case 5: 95-user-verbosity.conf (ExecStart without --config) made the role refuse in check
    mode and in two runs, naming the file, changing nothing; renamed to 50-, its --v=4 ran with our config."""
    import json

    evidence = json.loads(host.file("/root/kgn-side-effect.json").content_string)
    refusals = evidence["refusals"]
    assert [r["check_mode"] for r in refusals] == [True, False, False]
    assert not any(r["changed"] for r in refusals)
    for refusal in refusals:
        assert refusal["msg"].startswith("/etc/systemd/system/kube-scheduler.service.d/95-user-verbosity.conf sets "
                                         "ExecStart= and sorts after this project's drop-in")
        assert f"without --config={CONFIG}" in refusal["msg"]
    assert evidence["user_dropin_run"][-2:] == ["--v=4", f"--config={CONFIG}"]
    assert not host.file("/etc/systemd/system/kube-scheduler.service.d/95-user-verbosity.conf").exists
