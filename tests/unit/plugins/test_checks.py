"""The registered checks (plugins/module_utils/verify/checks_*.py) and the causes registered with them, run and
diagnosed as verify does (checks.run_checks, checks.diagnose, checks.verdict).

Each fault is an observation a node really shows in that state (what verify.verify_observed builds from the
gpu_node_verify module's reads, the recorded states and the API); the test asserts the check that fails and the
registered cause that explains it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks as c
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify

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
    "stack_pods_not_running": [],
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
    checks = c.diagnose(c.run_checks(observed, expected))
    return {check["id"]: check for check in checks}, c.verdict(checks)


def causes(check):
    return [item["id"] for item in check["diagnosis"]]


def test_healthy_gpu_node_is_ok_with_every_check_ok():
    checks, verdict = judge(node())
    assert verdict == "ok"
    assert {check["status"] for check in checks.values()} == {"ok"}
    assert set(checks) == {
        "gpu_present",
        "driver_package",
        "driver_support",
        "driver_loaded",
        "nvidia_smi",
        "runtime_registered",
        "runtime_default",
        "device_plugin_socket",
        "api_answers",
        "node_registered",
        "node_labels",
        "allocatable",
        "stack_pods_running",
    }


@pytest.mark.parametrize("kind", ["gpu_node", "control_plane"])
def test_an_api_server_that_does_not_answer_fails_the_host_with_its_address_and_words(kind):
    """A stopped API server left every cluster check skipped, and skipped counts for nothing: the host read ok."""
    down = {"reachable": False, "read": True, "server": "https://127.0.0.1:6443", "node_name": "gpu1",
            "error": "`kubectl get --raw /readyz` failed (kubectl on cp1, kubeconfig /etc/kubernetes/admin.conf): The "
                     "connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?"}
    seen, want = (node(), None) if kind == "gpu_node" else (
        {"scheduler": copy.deepcopy(SCHED_OK)}, CP_EXPECTED)
    seen["api"] = down
    checks, verdict = judge(seen, want) if want else judge(seen)
    assert verdict == "failed"
    row = checks["api_answers"]
    assert row["status"] == "failed" and "https://127.0.0.1:6443" in row["summary"]
    [why] = row["diagnosis"]
    assert "API server at https://127.0.0.1:6443 did not answer" in why["cause"] and "was refused" in why["cause"]


def test_no_api_read_is_no_api_row():
    """A render, or an inventory that names no API, reads none: nothing to say about it."""
    seen = node()
    seen["api"] = {"reachable": False, "error": "", "node_name": "gpu1"}
    checks, _ = judge(seen)
    assert "api_answers" not in checks


def test_healthy_control_plane_is_ok():
    checks, verdict = judge({"scheduler": copy.deepcopy(SCHED_OK), "api": copy.deepcopy(API_OK)}, CP_EXPECTED)
    assert verdict == "ok", [check for check in checks.values() if check["status"] != "ok"]


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


def test_what_the_driver_plan_warned_of_degrades_the_node_and_says_it():
    """An OS or driver branch past its end of life works today: a warning with the plan's own words, not a failure."""
    gpu = copy.deepcopy(GPU_OK)
    gpu["support_warnings"] = ["driver branch R470 is past NVIDIA's end of life (2024-09)"]
    checks, verdict = judge(node(gpu=gpu))
    assert verdict == "degraded" and checks["driver_support"]["status"] == "warn"
    assert "R470 is past NVIDIA's end of life" in checks["driver_support"]["summary"]
    assert causes(checks["driver_support"]) == ["support_ending"]
    assert "R470" in checks["driver_support"]["diagnosis"][0]["cause"]


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


def test_every_cause_is_registered_once_with_its_check():
    ids = [entry["id"] for check in c.REGISTRY.values() for entry in check.causes]
    assert len(ids) == len(set(ids)), "cause ids must be unique"
    assert len(ids) >= 64  # the 61 causes of the former catalog, and the three of a run that stopped


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(KgnError, match=r"expected\.kinds"):
        c.run_checks({}, {"kinds": ["worker"]})
    with pytest.raises(KgnError, match="needs id, cause and fix"):
        c.check("x_check", "x", kinds=(c.GPU_NODE,), causes=[{"id": "x", "fix": "y"}])(lambda *_: None)
    with pytest.raises(KgnError, match="registered twice"):
        c.check("gpu_present", "x", kinds=(c.GPU_NODE,))(lambda *_: None)
    with pytest.raises(KgnError, match="status"):
        c.verdict([{"id": "x", "status": "maybe"}])


def test_a_check_that_returns_something_else_than_a_result_is_refused():
    c.check("test_broken", "a broken check", kinds=(c.CONTROL_PLANE,))(lambda *_: {"status": "fine"})
    try:
        with pytest.raises(KgnError, match="test_broken returned"):
            c.run_checks({}, {"kinds": ["control_plane"]})
    finally:
        del c.REGISTRY["test_broken"]


def test_a_new_check_registers_with_its_causes_and_runs_in_order():
    """The extension point (docs/architecture.md, "Verification"): one function, its causes, nothing else."""
    @c.check("test_dra_slices", "DRA ResourceSlices published", kinds=(c.GPU_NODE,), concerns=("stacks",),
             causes=[c.cause("no_slices", when={"count": 0}, cause="no ResourceSlice for {node}",
                             fix="check the DRA kubelet plugin on {node}")])
    def dra(seen, want, done):
        assert done.status("node_registered") == "ok"  # the checks registered before it ran first
        return c.failed("0 slices", count=0, node="gpu1")

    try:
        checks, verdict = judge(node())
        assert verdict == "failed" and list(checks)[-1] == "test_dra_slices"
        assert checks["test_dra_slices"]["diagnosis"][0]["cause"] == "no ResourceSlice for gpu1"
        checks, verdict = judge(node(), dict(NODE_EXPECTED, pending=["stacks"]))
        assert (verdict, checks["test_dra_slices"]["status"]) == ("pending", "pending")
    finally:
        del c.REGISTRY["test_dra_slices"]


def test_what_a_check_reads_and_when_it_applies_are_said_once_in_its_registration():
    """``applies`` and ``reads`` (checks.py): the check's own function runs only when both hold."""
    ran = []

    @c.check("test_reads_node", "reads the node", kinds=(c.GPU_NODE,), applies="stacks", reads=("node",))
    def reads_node(seen, want, done):
        ran.append(c.api_view(seen)["node"])
        return c.ok("read")

    entry = c.REGISTRY["test_reads_node"]
    api = {"reachable": True, "node_name": "gpu1", "node": {"labels": {}}}
    try:
        assert entry.run({"api": api}, {}, c.Done()) is None  # no stack: no line
        unreachable = {"api": {"reachable": False, "error": "connection refused"}}
        assert entry.run(unreachable, {"stacks": ["x"]}, c.Done()) == c.skipped(c.NO_API, reason="connection refused")
        no_node = {"api": dict(api, node=None)}
        assert entry.run(no_node, {"stacks": ["x"]}, c.Done()) == c.skipped("skipped: node not registered")
        assert ran == []
        assert entry.run({"api": api}, {"stacks": ["x"]}, c.Done())["status"] == "ok" and ran == [{"labels": {}}]
    finally:
        del c.REGISTRY["test_reads_node"]
    with pytest.raises(KgnError, match="reads must name api and/or node"):
        c.check("test_reads_else", "x", kinds=(c.GPU_NODE,), reads=("gpu",))(lambda *_: None)


def test_daemonsets_are_reduced_to_name_args_and_whether_the_project_deployed_them():
    items = [
        {
            "metadata": {"name": "ds", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"containers": [{"command": ["plugin"], "args": ["--memory-unit=GiB"]}]}}},
            "status": {"desiredNumberScheduled": 1, "numberReady": 1},
        },
        {"metadata": {"name": "ours", "namespace": "kube-system",
                      "labels": {"app.kubernetes.io/managed-by": "kube-gpu-nodes"}}},
    ]
    assert verify.api_view(_answer(daemonsets=items), "gpu1")["daemonsets"] == [
        {"name": "ds", "namespace": "kube-system", "args": ["plugin", "--memory-unit=GiB"], "desired": 1, "ready": 1,
         "managed": False},
        {"name": "ours", "namespace": "kube-system", "args": [], "desired": 0, "ready": 0, "managed": True},
    ]


def test_a_waived_check_is_shown_with_its_diagnosis_and_does_not_degrade_the_verdict():
    sched = copy.deepcopy(SCHED_OK)
    sched["extenders"][0].update(reachable=False, error="Connection refused")
    checks, verdict = judge({"scheduler": sched, "api": API_OK}, dict(CP_EXPECTED, waived=["extender_reachable"]))
    assert verdict == "ok"
    assert checks["extender_reachable"]["status"] == "waived"
    assert checks["extender_reachable"]["summary"].endswith("(waived on this inventory)")
    assert causes(checks["extender_reachable"]) == ["extender_unreachable"]
    with pytest.raises(KgnError, match="waived checks"):
        c.run_checks({"scheduler": sched}, dict(CP_EXPECTED, waived=["extender"]))


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
    return verify.verify_expected({"host": "h", "kinds": kinds, "stacks": ["hami"], "expect_gpu": True}, {})


def _answer(daemonsets=(), deployments=(), webhooks=(), nodes=()):
    """A k8s_read answer of one API server."""
    return {"reachable": True, "error": "", "resources": {
        "nodes": {"served": True, "items": list(nodes)},
        "daemonsets.apps": {"served": True, "items": list(daemonsets)},
        "deployments.apps": {"served": True, "items": list(deployments)},
        "mutatingwebhookconfigurations.admissionregistration.k8s.io": {"served": True, "items": list(webhooks)}}}


def test_hami_expects_only_nvidia_gpu_allocatable_its_annotation_and_its_own_scheduler():
    expected = _hami_expected(["gpu_node", "control_plane"])
    assert expected["resources"] == ["nvidia.com/gpu"]
    assert expected["node_annotations"] == ["hami.io/node-nvidia-register"]
    assert expected["labels"] == {"gpu": "on"}
    assert expected["own_schedulers"] == [{"stack": "hami", "deployment": "hami-scheduler", "webhook": "hami-webhook"}]
    assert expected["scheduler"]["extender_paths"] == []  # the cluster's kube-scheduler is left alone
    assert _hami_expected(["gpu_node"])["own_schedulers"] == []
    assert _hami_expected(["gpu_node"])["device_plugin_sockets"] == [r"(?!kubelet\.sock$).+\.sock"]


def _own(items):
    return _answer(deployments=[i for i in items if i["kind"] == "Deployment"],
                   webhooks=[i for i in items if i["kind"] == "MutatingWebhookConfiguration"])


def test_own_schedulers_are_reduced_from_the_api_answer():
    view = verify.api_view(_own(_kubectl_own()), "cp1")
    assert view["deployments"] == [{"name": "coredns", "namespace": "kube-system", "desired": 2, "ready": 2},
                                   {"name": "hami-scheduler", "namespace": "kube-system", "desired": 1, "ready": 1}]
    assert view["webhooks"] == [{"name": "hami-webhook", "webhooks": [
        {"name": "vgpu.hami.io", "service": "kube-system/hami-scheduler:443/webhook", "ca_bundle": True}]}]
    with pytest.raises(KgnError, match="k8s_read"):
        verify.api_view(["not", "an", "answer"], "cp1")


def _hami_cp(**answer):
    api = verify.api_view(_own(_kubectl_own(**answer)), "cp1")
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
    assert c.verdict([{"id": "a", "status": "pending"}, {"id": "b", "status": "failed"}]) == "failed"
    assert c.verdict([{"id": "a", "status": "pending"}, {"id": "b", "status": "warn"}]) == "pending"
    assert c.verdict([{"id": "a", "status": "waived"}, {"id": "b", "status": "skipped"}]) == "ok"


# --- CDI mode: the rows the container_runtime module recorded, on the real H100 node's spec -------------------

H100 = Path(__file__).resolve().parents[1] / "fixtures" / "h100-cdi"


def cdi_rows(**over):
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import cdi

    text = (H100 / "nvidia-ctk-cdi-generate-default.json").read_text()
    spec = cdi.parse_spec(text)
    state = {"spec_path": "/var/run/cdi/nvidia.json", "spec_text": text, "spec_mtime": 2000.0,
             "driver": {"version": "580.159.04", "installed_at": 1000.0, "answers": True},
             "gpus": [{"index": 0, "uuid": "GPU-00000000-0000-0000-0000-000000000000"}],
             "paths": dict.fromkeys(cdi.host_paths(spec), True), "spec_dir": "/var/run/cdi",
             "engine": {"name": "containerd", "enabled": True, "spec_dirs": ["/etc/cdi", "/var/run/cdi"]}}
    return cdi.cdi_checks({**state, **over})


def cdi_node(**over):
    runtime = copy.deepcopy(CONTAINERD_OK)
    runtime["containerd"].update(runtime_mode="cdi", cdi_rows=cdi_rows(**over))
    return node(runtime=runtime)


def test_cdi_rows_on_the_h100_spec_are_ok():
    checks, verdict = judge(cdi_node())
    assert verdict == "ok"
    assert {i: checks[i]["status"] for i in ("cdi_spec", "cdi_devices", "cdi_fresh", "cdi_paths", "cdi_engine")} == \
        dict.fromkeys(("cdi_spec", "cdi_devices", "cdi_fresh", "cdi_paths", "cdi_engine"), "ok")
    assert "nvidia.com/gpu=GPU-00000000-0000-0000-0000-000000000000" in checks["cdi_devices"]["summary"]


@pytest.mark.parametrize(("over", "check", "entry"), [
    ({"spec_text": None}, "cdi_spec", "cdi_no_spec"),
    ({"driver": {"version": "580.95.05", "installed_at": 1000.0, "answers": True}}, "cdi_fresh", "cdi_stale_spec"),
    ({"paths": {"/usr/local/nvidia/lib64/libcuda.so.580.159.04": False}}, "cdi_paths", "cdi_missing_file"),
    ({"engine": {"name": "containerd", "enabled": False}}, "cdi_engine", "cdi_engine_off"),
])
def test_cdi_faults_are_diagnosed_with_their_fix(over, check, entry):
    checks, verdict = judge(cdi_node(**over))
    assert verdict == "failed"
    assert checks[check]["status"] == "failed" and causes(checks[check]) == [entry]
    assert "nvidia_container_runtime.yml" in checks[check]["diagnosis"][0]["fix"]
