"""kube_scheduler_extender on a real kubeadm control plane (v1.36.3): config, patched static pod, and the real
kube-scheduler that the real kubelet recreated from it, running that config (its own /configz) and healthy."""

import json

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
    # a backup in the folder would be run by the kubelet as one more static pod
    assert sorted(host.run("ls -A /etc/kubernetes/manifests").stdout.split()) == [
        "etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"]
    backups = host.run("ls -A /etc/kubernetes/kgn-backups").stdout.split()
    assert any(name.startswith("kube-scheduler.yaml.") for name in backups)
    assert host.file("/etc/kubernetes/kgn-backups").mode == 0o700


CONFIGZ = (
    "python3 -c \"import ssl,urllib.request;c=ssl._create_unverified_context();"
    "c.load_cert_chain('/etc/kubernetes/pki/kubelets/admin.crt','/etc/kubernetes/pki/kubelets/admin.key');"
    "print(urllib.request.urlopen('https://127.0.0.1:10259/configz',context=c,timeout=5).read().decode())\""
)
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"


def test_the_real_scheduler_runs_the_config_on_disk_healthy(host):
    assert host.check_output(HEALTHZ) == "ok"
    pid = host.check_output("pgrep -xo kube-scheduler")
    cmdline = host.file(f"/proc/{pid}/cmdline").content_string.split("\0")
    assert f"--config={CONFIG}" in cmdline
    running = json.loads(host.check_output(CONFIGZ))["componentconfig"]
    on_disk = yaml.safe_load(host.file(CONFIG).content_string)
    assert [e["urlPrefix"] for e in running["extenders"]] == [e["urlPrefix"] for e in on_disk["extenders"]]


def test_the_mirror_pod_shows_the_patched_static_pod(host):
    """The API server's mirror pod of the static pod: what the kubelet runs, as kubectl shows it."""
    node = host.check_output("hostname")
    # the last run of side_effect recreated the pod moments ago: its startup probe waits 10 s before it is Ready
    host.run_expect([0], f"{KUBECTL} -n kube-system wait --for=condition=Ready pod/kube-scheduler-{node} --timeout=2m")
    pod = json.loads(host.check_output(f"{KUBECTL} -n kube-system get pod kube-scheduler-{node} -o json"))
    assert f"--config={CONFIG}" in pod["spec"]["containers"][0]["command"]
    assert pod["status"]["phase"] == "Running"
    assert all(c["ready"] for c in pod["status"]["containerStatuses"])


def test_side_effect_left_no_restart_annotation_and_a_copy_of_the_removed_config(host):
    """side_effect.yml recreated the pod with kube-gpu-nodes/restarted-at, took the scheduler back to kubeadm's
    command (which drops our annotations) and converged again."""
    pod, _ = _container(host)
    assert list(pod["metadata"]["annotations"]) == ["kube-gpu-nodes/scheduler-config-sha256"]
    backups = host.run("ls -A /etc/kubernetes/kgn-backups").stdout.split()
    assert any(name.startswith("scheduler-policy-config.yaml.") for name in backups)
