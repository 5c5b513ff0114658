"""verify_checks / diagnose / verify_verdict against the role's real diagnosis catalog.

Each fault is an observation a node really shows in that state (what gpu_node_probe returns); the
test asserts the check that fails and the catalog entry that explains it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import ansible_collections.kgn.gpu_nodes.plugins.filter.diagnose as d
import pytest
import yaml
from ansible.errors import AnsibleFilterError

ROLE_VARS = Path(__file__).resolve().parents[3] / "roles" / "gpu_node_verify" / "vars" / "main.yml"
CATALOG = yaml.safe_load(ROLE_VARS.read_text())["__gpu_node_verify_catalog"]

GPU_OK = {
    "present": True,
    "pci_devices": [{"address": "0000:03:00.0", "device": "0x1eb8", "class": "0x030200"}],
    "modules": {"nvidia": True, "nouveau": False},
    "kernel_driver_version": "535.309.01",
    "package_name": "nvidia-driver",
    "package_version": "535.309.01-1~deb12u1",
    "secure_boot": False,
    "smi": {
        "found": True,
        "rc": 0,
        "error": "",
        "cuda_version": "12.2",
        "gpus": [{"name": "Tesla T4", "driver_version": "535.309.01", "memory_total_mib": "15360"}],
    },
}
DOCKER_OK = {
    "requested": "auto",
    "engine": "docker",
    "docker": {
        "installed": True,
        "answered": True,
        "version": "20.10.24",
        "default_runtime": "nvidia",
        "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
        "config_path": "/etc/docker/daemon.json",
    },
}
CONTAINERD_OK = {
    "requested": "auto",
    "engine": "containerd",
    "containerd": {
        "installed": True,
        "answered": True,
        "version": "1.7.24",
        "default_runtime": "nvidia",
        "runtimes": ["nvidia", "runc"],
        "config_path": "/etc/containerd/config.toml",
        "config_mentions_nvidia": True,
        "backup_mentions_nvidia": False,
    },
}
API_OK = {
    "reachable": True,
    "node_name": "gpu1",
    "node": {"labels": {"gpushare": "true"}, "allocatable": {"aliyun.com/gpu-mem": "14", "aliyun.com/gpu-count": "1"}},
    "daemonsets": [{"name": "gpushare-device-plugin-ds", "args": ["gpushare-device-plugin-v2", "--memory-unit=GiB"]}],
}
NODE_EXPECTED = {
    "host": "gpu1",
    "kinds": ["gpu_node"],
    "stacks": ["gpushare"],
    "expect_gpu": True,
    "driver_version": "535.309.01",
    "labels": {"gpushare": "true"},
    "resources": ["aliyun.com/gpu-mem", "aliyun.com/gpu-count"],
    "device_plugin_sockets": [r"aliyun.*\.sock"],
}
SCHED_OK = {
    "process": {"running": True, "flags": {"config": "/etc/kubernetes/scheduler-policy-config.yaml"}},
    "persisted": {
        "style": "systemd",
        "path": "/etc/systemd/system/kube-scheduler.service",
        "flags": {"config": "/etc/kubernetes/scheduler-policy-config.yaml"},
    },
    "config": {"exists": True, "extender_urls": ["http://127.0.0.1:32766/gpushare-scheduler"]},
    "health": {"url": "https://127.0.0.1:10259/healthz", "status": 200, "body": "ok"},
    "extenders": [{"url": "http://127.0.0.1:32766/gpushare-scheduler", "reachable": True, "loopback": True}],
    "kube_proxy_mode": "iptables",
    "route_localnet": True,
}
CP_EXPECTED = {
    "host": "cp1",
    "kinds": ["control_plane"],
    "stacks": ["gpushare"],
    "stack_args": [{"stack": "gpushare", "daemonset": "gpushare-device-plugin-ds", "arg": "--memory-unit"}],
    "scheduler": {
        "variant": "v1beta3",
        "flag": "--config",
        "config_path": "/etc/kubernetes/scheduler-policy-config.yaml",
        "health_url": "https://127.0.0.1:10259/healthz",
        "extender_paths": ["/gpushare-scheduler"],
    },
}


def node(gpu=None, runtime=None, api=None, sockets=("aliyungpushare.sock",)):
    return {
        "gpu": copy.deepcopy(gpu or GPU_OK),
        "runtime": copy.deepcopy(runtime or DOCKER_OK),
        "device_plugin": {"dir": "/var/lib/kubelet/device-plugins", "sockets": list(sockets)},
        "api": copy.deepcopy(API_OK if api is None else api),
    }


def judge(observed, expected=NODE_EXPECTED):
    checks = d.diagnose(d.verify_checks(observed, expected), CATALOG)
    return {c["id"]: c for c in checks}, d.verify_verdict(checks)


def causes(check):
    return [item["id"] for item in check["diagnosis"]]


def test_healthy_gpu_node_is_ok_with_every_check_ok():
    checks, verdict = judge(node())
    assert verdict == "ok"
    assert {c["status"] for c in checks.values()} == {"ok"}
    assert set(checks) == {
        "gpu_present",
        "driver_package",
        "driver_loaded",
        "nvidia_smi",
        "runtime_registered",
        "runtime_default",
        "device_plugin_socket",
        "node_registered",
        "node_labels",
        "allocatable",
    }


def test_healthy_control_plane_is_ok():
    checks, verdict = judge({"scheduler": copy.deepcopy(SCHED_OK), "api": copy.deepcopy(API_OK)}, CP_EXPECTED)
    assert verdict == "ok", [c for c in checks.values() if c["status"] != "ok"]


@pytest.mark.parametrize(("expect_gpu", "status", "verdict"), [(False, "warn", "degraded"), (True, "failed", "failed")])
def test_gpu_less_node_says_plainly_no_gpu(expect_gpu, status, verdict):
    gpu = {
        "present": False,
        "pci_devices": [],
        "modules": {"nvidia": False, "nouveau": False},
        "package_version": "535.309.01-1~deb12u1",
        "package_name": "nvidia-driver",
        "smi": {
            "found": True,
            "rc": 9,
            "error": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        },
    }
    checks, got = judge(node(gpu=gpu, sockets=()), dict(NODE_EXPECTED, expect_gpu=expect_gpu))
    assert got == verdict
    assert checks["gpu_present"]["status"] == status
    assert checks["gpu_present"]["summary"] == "no NVIDIA GPU present on this node"
    for skipped in ("driver_loaded", "nvidia_smi", "device_plugin_socket", "allocatable"):
        assert checks[skipped]["status"] == "skipped"
        assert checks[skipped]["summary"] == "no NVIDIA GPU present on this node"
    assert causes(checks["gpu_present"]) == (["no_gpu"] if expect_gpu else ["no_gpu_expected"])
    assert checks["driver_package"]["status"] == "ok"


def test_docker_default_set_back_to_runc_names_the_nvml_symptom_and_the_fix():
    runtime = copy.deepcopy(DOCKER_OK)
    runtime["docker"]["default_runtime"] = "runc"
    checks, verdict = judge(
        node(runtime=runtime, sockets=(), api=dict(API_OK, node={"labels": {"gpushare": "true"}, "allocatable": {}}))
    )
    assert verdict == "failed"
    assert checks["runtime_registered"]["status"] == "ok"
    assert causes(checks["runtime_default"]) == ["docker_default_not_nvidia"]
    cause = checks["runtime_default"]["diagnosis"][0]
    assert '"runc", not nvidia' in cause["cause"]
    assert "Failed to initialize NVML: could not load NVML library" in cause["cause"]
    assert '"default-runtime": "nvidia"' in cause["fix"]
    # the knock-on failures point back at the runtime
    assert causes(checks["device_plugin_socket"]) == ["plugin_nvml_runtime"]
    assert causes(checks["allocatable"]) == ["allocatable_runtime"]


def test_nvidia_runtime_removed_from_containerd_config_after_configuration():
    runtime = copy.deepcopy(CONTAINERD_OK)
    runtime["containerd"].update(
        runtimes=["runc"], default_runtime="runc", config_mentions_nvidia=False, backup_mentions_nvidia=True
    )
    checks, verdict = judge(node(runtime=runtime))
    assert verdict == "failed"
    assert causes(checks["runtime_registered"]) == ["containerd_nvidia_removed"]
    assert "/etc/containerd/config.toml" in checks["runtime_registered"]["diagnosis"][0]["cause"]
    assert causes(checks["runtime_default"]) == ["containerd_default_not_nvidia"]


def test_containerd_config_that_no_longer_imports_our_drop_in():
    runtime = copy.deepcopy(CONTAINERD_OK)
    runtime["containerd"].update(runtimes=["runc"], default_runtime="runc", backup_mentions_nvidia=False,
                                 dropin="/etc/containerd/conf.d/99-nvidia.toml", dropin_orphaned=True)
    runtime["toolkit_installed"] = True
    checks, verdict = judge(node(runtime=runtime))
    assert verdict == "failed"
    assert causes(checks["runtime_registered"]) == ["containerd_dropin_not_imported"]
    cause = checks["runtime_registered"]["diagnosis"][0]["cause"]
    assert "no longer imports /etc/containerd/conf.d/99-nvidia.toml" in cause


@pytest.mark.parametrize(
    ("toolkit", "entry"), [(True, "containerd_config_rewritten"), (False, "containerd_nvidia_missing")]
)
def test_containerd_without_backup_tells_rewritten_from_never_configured(toolkit, entry):
    runtime = copy.deepcopy(CONTAINERD_OK)
    runtime["containerd"].update(runtimes=["runc"], backup_mentions_nvidia=False)
    runtime["toolkit_installed"] = toolkit
    checks, _ = judge(node(runtime=runtime))
    assert causes(checks["runtime_registered"]) == [entry]


@pytest.mark.parametrize(
    ("installed", "pinned", "ok"),
    [
        ("535.309.01-1~deb12u1", "535.309.01", True),
        ("535.309.01-1~deb12u1", "535", True),
        ("550.163.01-2", "535", False),
        ("535.309.01", "535.30", False),
    ],
)
def test_driver_pin_matches_debian_revisions_and_branches(installed, pinned, ok):
    gpu = copy.deepcopy(GPU_OK)
    gpu["package_version"] = installed
    checks, _ = judge(node(gpu=gpu), dict(NODE_EXPECTED, driver_version=pinned))
    assert (checks["driver_package"]["status"] == "ok") is ok


def test_label_removed_by_hand():
    api = copy.deepcopy(API_OK)
    api["node"]["labels"] = {}
    checks, verdict = judge(node(api=api))
    assert verdict == "failed"
    assert checks["node_labels"]["evidence"]["missing"] == ["gpushare"]
    assert causes(checks["node_labels"]) == ["label_missing"]
    assert "kubectl label node gpu1" in checks["node_labels"]["diagnosis"][0]["fix"]


@pytest.mark.parametrize(
    ("style", "entry"), [("systemd", "scheduler_flag_removed_systemd"), ("kubeadm", "scheduler_flag_removed_kubeadm")]
)
def test_scheduler_config_flag_removed(style, entry):
    sched = copy.deepcopy(SCHED_OK)
    sched["persisted"].update(style=style, flags={})
    sched["process"]["flags"] = {}
    checks, verdict = judge({"scheduler": sched, "api": API_OK}, CP_EXPECTED)
    assert verdict == "failed"
    assert causes(checks["scheduler_flag"]) == [entry]
    assert "--config=/etc/kubernetes/scheduler-policy-config.yaml" in checks["scheduler_flag"]["diagnosis"][0]["cause"]


def test_scheduler_flag_in_unit_but_not_restarted():
    sched = copy.deepcopy(SCHED_OK)
    sched["process"]["flags"] = {}
    checks, _ = judge({"scheduler": sched, "api": API_OK}, CP_EXPECTED)
    assert causes(checks["scheduler_flag"]) == ["scheduler_flag_not_applied"]


def test_extender_on_loopback_nodeport_with_ipvs():
    sched = copy.deepcopy(SCHED_OK)
    sched["extenders"] = [
        {
            "url": "http://127.0.0.1:32766/gpushare-scheduler",
            "reachable": False,
            "error": "[Errno 111] Connection refused",
            "loopback": True,
        }
    ]
    sched["kube_proxy_mode"] = "ipvs"
    checks, _ = judge({"scheduler": sched, "api": API_OK}, CP_EXPECTED)
    assert causes(checks["extender_reachable"]) == ["extender_ipvs_loopback"]
    sched["kube_proxy_mode"] = None
    checks, _ = judge({"scheduler": sched, "api": API_OK}, CP_EXPECTED)
    assert causes(checks["extender_reachable"]) == ["extender_unreachable"]
    assert "Connection refused" in checks["extender_reachable"]["diagnosis"][0]["cause"]


def test_gpushare_device_plugin_without_memory_unit():
    api = dict(API_OK, daemonsets=[{"name": "gpushare-device-plugin-ds", "args": ["gpushare-device-plugin-v2"]}])
    checks, _ = judge({"scheduler": copy.deepcopy(SCHED_OK), "api": api}, CP_EXPECTED)
    assert causes(checks["stack_args"]) == ["memory_unit_missing"]


@pytest.mark.parametrize(
    ("gpu_change", "check", "entry"),
    [
        (
            {"modules": {"nvidia": False, "nouveau": True}, "kernel_driver_version": None},
            "driver_loaded",
            "nouveau_loaded",
        ),
        (
            {"modules": {"nvidia": False, "nouveau": False}, "kernel_driver_version": None, "secure_boot": True},
            "driver_loaded",
            "secure_boot_blocks_module",
        ),
        (
            {"modules": {"nvidia": False, "nouveau": False}, "kernel_driver_version": None},
            "driver_loaded",
            "module_not_built",
        ),
        (
            {
                "smi": {"found": True, "rc": 18, "error": "Failed to initialize NVML: Driver/library version mismatch"},
                "package_version": "535.309.01-1~deb12u1",
                "kernel_driver_version": "535.216.01",
            },
            "nvidia_smi",
            "nvml_version_mismatch",
        ),
        ({"package_version": "550.163.01-2"}, "driver_package", "driver_version_drift"),
        ({"package_version": None}, "driver_package", "driver_not_installed"),
    ],
)
def test_driver_faults_map_to_their_known_cause(gpu_change, check, entry):
    gpu = copy.deepcopy(GPU_OK)
    gpu.update(gpu_change)
    checks, verdict = judge(node(gpu=gpu))
    assert verdict == "failed"
    assert checks[check]["status"] == "failed"
    assert causes(checks[check]) == [entry]


def test_version_mismatch_cause_names_both_versions():
    gpu = copy.deepcopy(GPU_OK)
    gpu.update(
        smi={"found": True, "rc": 18, "error": "Failed to initialize NVML: Driver/library version mismatch"},
        kernel_driver_version="535.216.01",
    )
    checks, _ = judge(node(gpu=gpu))
    text = checks["nvidia_smi"]["diagnosis"][0]["cause"]
    assert "535.216.01" in text and "535.309.01-1~deb12u1" in text


def test_no_api_skips_the_api_checks_and_says_so():
    checks, verdict = judge(node(api={"reachable": False, "error": "kubectl: command not found"}))
    assert verdict == "ok"
    for check_id in ("node_registered", "node_labels", "allocatable"):
        assert checks[check_id]["status"] == "skipped"
        assert checks[check_id]["summary"] == "skipped: no API"


def test_docker_daemon_down_is_a_failure_with_its_cause():
    runtime = {
        "requested": "auto",
        "engine": "docker",
        "docker": {"installed": True, "answered": False, "error": "Cannot connect to the Docker daemon"},
    }
    checks, _ = judge(node(runtime=runtime))
    assert causes(checks["runtime_registered"]) == ["docker_down"]
    assert checks["runtime_default"]["status"] == "skipped"


def test_every_catalog_entry_is_reachable_by_some_check_id():
    assert {e["check"] for e in CATALOG} <= set(d.TITLES)
    assert len({e["id"] for e in CATALOG}) == len(CATALOG), "catalog ids must be unique"


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(AnsibleFilterError, match=r"expected\.kinds"):
        d.verify_checks({}, {"kinds": ["worker"]})
    with pytest.raises(AnsibleFilterError, match="lacks cause"):
        d.diagnose([], [{"id": "x", "check": "gpu_present", "fix": "y"}])
    with pytest.raises(AnsibleFilterError, match="status"):
        d.verify_verdict([{"id": "x", "status": "maybe"}])


def test_daemonsets_are_reduced_to_name_and_args():
    items = [
        {
            "metadata": {"name": "ds", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"containers": [{"command": ["plugin"], "args": ["--memory-unit=GiB"]}]}}},
            "status": {"desiredNumberScheduled": 1, "numberReady": 1},
        }
    ]
    assert d.verify_daemonsets(items) == [
        {"name": "ds", "namespace": "kube-system", "args": ["plugin", "--memory-unit=GiB"], "desired": 1, "ready": 1}
    ]


def test_waived_check_degrades_but_keeps_its_diagnosis():
    sched = copy.deepcopy(SCHED_OK)
    sched["extenders"][0].update(reachable=False, error="Connection refused")
    checks, verdict = judge({"scheduler": sched, "api": API_OK}, dict(CP_EXPECTED, waived=["extender_reachable"]))
    assert verdict == "degraded"
    assert checks["extender_reachable"]["status"] == "warn"
    assert checks["extender_reachable"]["summary"].endswith("(waived on this inventory)")
    assert causes(checks["extender_reachable"]) == ["extender_unreachable"]
    with pytest.raises(AnsibleFilterError, match="waived checks"):
        d.verify_checks({"scheduler": sched}, dict(CP_EXPECTED, waived=["extender"]))


def test_gpu_less_node_expects_only_gpu_present_false_when_labels_require_a_gpu():
    gpu = {"present": False, "smi": {"found": False}}
    api = dict(API_OK, node={"labels": {"nvidia.com/gpu.present": "false"}, "allocatable": {}})
    expected = dict(NODE_EXPECTED, expect_gpu=False, labels_without_gpu={"nvidia.com/gpu.present": "false"})
    checks, _ = judge(node(gpu=gpu, api=api, sockets=()), expected)
    assert checks["node_labels"]["status"] == "ok"
    api["node"]["labels"] = {}
    checks, _ = judge(node(gpu=gpu, api=api, sockets=()), expected)
    assert checks["node_labels"]["evidence"]["missing"] == ["nvidia.com/gpu.present"]
    assert causes(checks["node_labels"]) == ["label_missing"]


def test_scheduler_never_configured_is_not_called_removed():
    sched = copy.deepcopy(SCHED_OK)
    sched["persisted"]["flags"] = {}
    sched["process"]["flags"] = {}
    sched["config"] = {"exists": False, "extender_urls": []}
    checks, _ = judge({"scheduler": sched, "api": API_OK}, CP_EXPECTED)
    assert causes(checks["scheduler_flag"]) == ["scheduler_never_configured"]
    assert causes(checks["scheduler_config"]) == ["scheduler_config_missing"]


def test_scheduler_without_extender_stacks_is_left_alone():
    """A device-plugin-only cluster: the role does not touch kube-scheduler, and verify agrees."""
    expected = copy.deepcopy(CP_EXPECTED)
    expected.update(stacks=["nvidia_device_plugin"], stack_args=[])
    expected["scheduler"]["extender_paths"] = []
    sched = copy.deepcopy(SCHED_OK)
    sched["persisted"]["flags"] = {}
    sched["process"]["flags"] = {}
    sched["config"] = {"exists": False, "extender_urls": []}
    checks, verdict = judge({"scheduler": sched, "api": API_OK}, expected)
    assert checks["scheduler_config"]["status"] == "skipped"
    assert checks["scheduler_flag"]["status"] == "skipped"
    assert checks["scheduler_health"]["status"] == "ok"
    assert verdict == "ok"


@pytest.mark.parametrize(("pinned", "status"), [("", "ok"), ("535.104.05", "ok"), ("550.163.01", "failed")])
def test_an_adopted_driver_is_reported_as_adopted_not_as_a_missing_package(pinned, status):
    gpu = copy.deepcopy(GPU_OK)
    library = "/usr/lib64/libnvidia-ml.so.535.104.05"
    gpu.update(package_version=None, adopted={"version": "535.104.05", "library": library})
    checks, _ = judge(node(gpu=gpu), dict(NODE_EXPECTED, driver_version=pinned))
    check = checks["driver_package"]
    assert check["status"] == status
    assert check["summary"].startswith("adopted: driver 535.104.05 (/usr/lib64/libnvidia-ml.so.535.104.05)")
    assert check["evidence"]["adopted"] is True


# --- HAMi: its own scheduler, its webhook and the GPUs its device plugin registers ----------------------------
def _kubectl_own(ready=1, ca_bundle="LS0tLS1CRUdJTi...", webhook=True, deployment=True):
    """The answer of `kubectl get deployments.apps,mutatingwebhookconfigurations... -A -o json` (items)."""
    items = [{"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "coredns", "namespace": "kube-system"},
              "spec": {"replicas": 2}, "status": {"readyReplicas": 2}}]
    if deployment:
        items.append({"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "hami-scheduler", "namespace": "kube-system"},
                      "spec": {"replicas": 1},
                      "status": {"replicas": 1, **({"readyReplicas": ready} if ready else {})}})
    if webhook:
        client = {"service": {"name": "hami-scheduler", "namespace": "kube-system", "path": "/webhook", "port": 443}}
        if ca_bundle:
            client["caBundle"] = ca_bundle
        items.append({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                      "metadata": {"name": "hami-webhook"},
                      "webhooks": [{"name": "vgpu.hami.io", "clientConfig": client}]})
    return items


def _hami_expected(kinds):
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify_expected

    return verify_expected({"host": "h", "kinds": kinds, "stacks": ["hami"], "expect_gpu": True,
                            "stack_sockets": {"hami": [r"(?!kubelet\.sock$).+\.sock"]}}, {})


def test_hami_expects_only_nvidia_gpu_allocatable_its_annotation_and_its_own_scheduler():
    expected = _hami_expected(["gpu_node", "control_plane"])
    assert expected["resources"] == ["nvidia.com/gpu"]
    assert expected["node_annotations"] == ["hami.io/node-nvidia-register"]
    assert expected["labels"] == {"gpu": "on"}
    assert expected["own_schedulers"] == [{"stack": "hami", "deployment": "hami-scheduler", "webhook": "hami-webhook"}]
    assert expected["scheduler"]["extender_paths"] == []  # the cluster's kube-scheduler is left alone
    assert _hami_expected(["gpu_node"])["own_schedulers"] == []


def test_own_schedulers_are_reduced_from_the_kubectl_answer():
    assert d.verify_own_schedulers(_kubectl_own()) == {
        "deployments": [{"name": "coredns", "namespace": "kube-system", "desired": 2, "ready": 2},
                        {"name": "hami-scheduler", "namespace": "kube-system", "desired": 1, "ready": 1}],
        "webhooks": [{"name": "hami-webhook", "webhooks": [
            {"name": "vgpu.hami.io", "service": "kube-system/hami-scheduler:443/webhook", "ca_bundle": True}]}]}
    with pytest.raises(AnsibleFilterError, match="items"):
        d.verify_own_schedulers({"items": []})


def _hami_cp(**answer):
    api = {"reachable": True, **d.verify_own_schedulers(_kubectl_own(**answer))}
    expected = _hami_expected(["control_plane"])
    return judge({"scheduler": SCHED_OK, "api": api}, expected)


def test_healthy_hami_control_plane_is_ok():
    checks, verdict = _hami_cp()
    assert verdict == "ok"
    assert checks["own_scheduler_ready"]["summary"] == "kube-system/hami-scheduler 1/1 ready"
    assert checks["webhook_registered"]["summary"] == "hami-webhook -> kube-system/hami-scheduler:443/webhook"


@pytest.mark.parametrize(("answer", "check", "cause"), [
    ({"ready": 0}, "own_scheduler_ready", "own_scheduler_not_ready"),
    ({"deployment": False}, "own_scheduler_ready", "own_scheduler_missing"),
    ({"webhook": False}, "webhook_registered", "webhook_missing"),
    ({"ca_bundle": ""}, "webhook_registered", "webhook_no_ca"),
])
def test_hami_scheduler_and_webhook_faults_are_diagnosed(answer, check, cause):
    checks, verdict = _hami_cp(**answer)
    assert verdict == "failed" and checks[check]["status"] == "failed"
    assert causes(checks[check]) == [cause]


def test_hami_checks_are_skipped_without_an_api():
    checks, _ = judge({"scheduler": SCHED_OK, "api": {"reachable": False, "error": "connection refused"}},
                      _hami_expected(["control_plane"]))
    assert checks["own_scheduler_ready"]["status"] == checks["webhook_registered"]["status"] == "skipped"


@pytest.mark.parametrize(("annotations", "labels", "status", "cause"), [
    ({"hami.io/node-nvidia-register": '[{"id":"GPU-1","count":10,"devmem":15360,"devcore":100}]'}, {"gpu": "on"},
     "ok", None),
    ({}, {"gpu": "on"}, "failed", "hami_not_registered"),
    ({}, {}, "failed", "hami_not_registered_label"),
])
def test_hami_node_shows_nvidia_gpu_and_the_gpus_it_registered(annotations, labels, status, cause):
    api = dict(API_OK, node={"labels": labels, "annotations": annotations, "allocatable": {"nvidia.com/gpu": "10"}})
    checks, _ = judge(node(api=api, sockets=("nvidia-gpu.sock",)), _hami_expected(["gpu_node"]))
    assert checks["allocatable"]["status"] == "ok" and checks["allocatable"]["summary"] == "nvidia.com/gpu=10"
    assert checks["node_annotations"]["status"] == status
    if cause:
        assert causes(checks["node_annotations"]) == [cause]


def test_a_check_mode_run_that_would_fix_a_check_calls_it_pending_not_failed():
    sched = copy.deepcopy(SCHED_OK)
    sched["extenders"][0].update(reachable=False, error="Connection refused")
    checks, verdict = judge({"scheduler": sched, "api": API_OK}, dict(CP_EXPECTED, pending=["kube_scheduler"]))
    assert verdict == "pending"
    assert checks["extender_reachable"]["status"] == "pending"
    assert checks["extender_reachable"]["summary"].endswith(
        "(pending: this check-mode run would change kube_scheduler)")
    # a concern the run would change does not excuse a check that depends on another one
    checks, verdict = judge({"scheduler": sched, "api": API_OK}, dict(CP_EXPECTED, pending=["nvidia_driver"]))
    assert (verdict, checks["extender_reachable"]["status"]) == ("failed", "failed")
    assert d.verify_verdict([{"id": "a", "status": "pending"}, {"id": "b", "status": "failed"}]) == "failed"
    assert d.verify_verdict([{"id": "a", "status": "pending"}, {"id": "b", "status": "warn"}]) == "pending"


# --- the smoke tests (module_utils/smoke.py) ------------------------------------------------------------------

ENGINE_NO_GPU = {"status": "no_gpu", "cause": "no_gpu_visible", "engine": "docker", "mode": "legacy",
                 "summary": "no GPU visible: the runtime injected nvidia-smi, which lists none (Failed to initialize "
                            "NVML: Unknown Error), as on the host"}
ENGINE_NOTHING = {"status": "failed", "cause": "no_device_injected", "engine": "docker", "mode": "legacy",
                  "summary": "the container ran but got no nvidia-smi and no /dev/nvidia*, while the host has the "
                             "driver's nvidia-smi: the GPU request was ignored"}
POD_UNSCHEDULED = {"status": "failed", "deleted": True, "summary": "",
                   "pods": [{"stack": "gpushare", "status": "failed", "cause": "pod_not_scheduled",
                             "summary": "Pending after 10 s: not scheduled, no condition and no event from "
                                        "default-scheduler (no kube-scheduler holds the lease "
                                        "kube-system/kube-scheduler)"}]}


def with_smoke(engine=None, pod=None, **kwargs):
    observed = node(**kwargs)
    observed["smoke"] = {"engine": engine, "pod": pod}
    return observed


def test_the_engine_smoke_on_a_gpu_less_node_degrades_and_a_runtime_that_injects_nothing_fails():
    checks, verdict = judge(with_smoke(ENGINE_NO_GPU))
    assert checks["engine_smoke"]["status"] == "warn" and verdict == "degraded"
    assert causes(checks["engine_smoke"]) == ["smoke_no_gpu_visible"]
    checks, verdict = judge(with_smoke(ENGINE_NOTHING))
    assert checks["engine_smoke"]["status"] == "failed" and verdict == "failed"
    assert causes(checks["engine_smoke"]) == ["smoke_no_device_injected"]
    assert "default runtime not nvidia" in checks["engine_smoke"]["diagnosis"][0]["cause"]


def test_a_smoke_that_did_not_run_adds_no_check_and_a_waived_pod_smoke_degrades():
    checks, _ = judge(with_smoke(None, None))
    assert "engine_smoke" not in checks and "pod_smoke" not in checks
    checks, verdict = judge(with_smoke(None, POD_UNSCHEDULED), dict(NODE_EXPECTED, waived=["pod_smoke"]))
    assert checks["pod_smoke"]["status"] == "warn" and verdict == "degraded"
    assert checks["pod_smoke"]["summary"].endswith("(waived on this inventory)")
    assert causes(checks["pod_smoke"]) == ["smoke_pod_not_scheduled"]


def test_the_smoke_checks_are_pending_when_a_check_mode_run_would_change_the_runtime():
    checks, verdict = judge(with_smoke(ENGINE_NOTHING), dict(NODE_EXPECTED, pending=["container_runtime"]))
    assert checks["engine_smoke"]["status"] == "pending" and verdict == "pending"
