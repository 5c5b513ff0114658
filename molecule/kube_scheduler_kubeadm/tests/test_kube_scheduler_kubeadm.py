"""kube_scheduler_extender on a kubeadm-style node: config, patched static pod, healthy stand-in scheduler."""

import yaml

CONFIG = "/etc/kubernetes/scheduler-policy-config.yaml"
MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
KUBEADM_FLAGS = [  # kubeadm's own flags (docs/versions.md A5) must all survive the patch
    "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
    "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
    "--bind-address=127.0.0.1",
    "--kubeconfig=/etc/kubernetes/scheduler.conf",
    "--leader-elect=true",
]
HEALTHZ = (
    'python3 -c "import ssl,urllib.request;'
    "print(urllib.request.urlopen('https://127.0.0.1:10259/healthz',"
    'context=ssl._create_unverified_context(),timeout=5).read().decode())"'
)


def _container(host):
    pod = yaml.safe_load(host.file(MANIFEST).content_string)
    return pod, next(c for c in pod["spec"]["containers"] if c["name"] == "kube-scheduler")


def test_config_is_a_v1_document_with_the_gpushare_extender(host):
    config = host.file(CONFIG)
    assert config.exists and config.user == "root" and config.mode == 0o644
    doc = yaml.safe_load(config.content_string)
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    assert doc["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"
    [extender] = doc["extenders"]
    assert extender["urlPrefix"].endswith(":32766/gpushare-scheduler")
    assert not extender["urlPrefix"].startswith("http://127.0.0.1")  # no kube-proxy answers: node IP
    assert extender["managedResources"] == [{"name": "aliyun.com/gpu-mem", "ignoredByScheduler": False}]
    assert extender["enableHTTPS"] is False and "enableHttps" not in extender


def test_manifest_runs_the_config_flag_exactly_once_and_keeps_kubeadm_flags(host):
    _, container = _container(host)
    command = container["command"]
    assert command[0] == "kube-scheduler"
    assert [a for a in command if a.startswith("--config")] == [f"--config={CONFIG}"]
    assert not [a for a in command if a.startswith("--policy-config-file")]
    for flag in KUBEADM_FLAGS:
        assert command.count(flag) == 1, flag


def test_manifest_mounts_the_config_read_only_from_the_host(host):
    pod, container = _container(host)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    config_volumes = [v for v in volumes.values() if v.get("hostPath", {}).get("path") == CONFIG]
    assert len(config_volumes) == 1 and config_volumes[0]["hostPath"]["type"] == "File"
    assert mounts[CONFIG]["name"] == config_volumes[0]["name"] and mounts[CONFIG]["readOnly"] is True
    assert volumes["kubeconfig"]["hostPath"]["path"] == "/etc/kubernetes/scheduler.conf"  # kubeadm's stays


def test_backups_are_outside_the_manifests_folder(host):
    assert host.run("ls -A /etc/kubernetes/manifests").stdout.split() == ["kube-scheduler.yaml"]
    backups = host.run("ls -A /etc/kubernetes/kgn-backups").stdout.split()
    assert any(name.startswith("kube-scheduler.yaml.") for name in backups)
    assert host.file("/etc/kubernetes/kgn-backups").mode == 0o700


def test_standin_scheduler_is_healthy_with_the_new_flags(host):
    assert host.check_output(HEALTHZ) == "ok"
    status = yaml.safe_load(host.file("/var/lib/kubelet-standin/kube-scheduler.json").content_string)
    assert status["state"] == "running"
    cmdline = host.file(f"/proc/{status['pid']}/cmdline").content_string.split("\0")
    assert f"--config={CONFIG}" in cmdline
    log = host.file("/var/lib/kubelet-standin/kube-scheduler.log").content_string
    last_run = log.rsplit("--- stand-in kubelet: start", 1)[1]
    assert f"using config {CONFIG} (kubescheduler.config.k8s.io/v1), 1 extender(s)" in last_run


def test_side_effect_left_no_restart_annotation_and_a_copy_of_the_removed_config(host):
    """side_effect.yml recreated the pod with kube-gpu-nodes/restarted-at, took the scheduler back to kubeadm's
    command (which drops our annotations) and converged again."""
    pod, _ = _container(host)
    assert list(pod["metadata"]["annotations"]) == ["kube-gpu-nodes/scheduler-config-sha256"]
    backups = host.run("ls -A /etc/kubernetes/kgn-backups").stdout.split()
    assert any(name.startswith("scheduler-policy-config.yaml.") for name in backups)
