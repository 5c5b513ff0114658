"""gpu_smoke module, run through `ansible localhost -m` against fake engines (engine_fake.py): the container runs
with the node's runtime, what it saw is judged against the host, and it is removed afterwards, also on failure."""

from __future__ import annotations

import os

from engine_fake import calls, install, state
from kubectl_fake import run_module

H100_L = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.\n")
H100_HOST = {"rc": 0, "out": H100_L}
NO_GPU_HOST = {"rc": 9, "out": NO_DRIVER}
NVIDIA_CRI = {"containerd": {"defaultRuntimeName": "nvidia", "runtimes": {"nvidia": {
    "runtimeType": "io.containerd.runc.v2", "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"}}}}}


def printed(smi, rc=0, dev=("null",)):
    return "\n".join(["kgn-smoke: nvidia-smi -L", smi.rstrip("\n"), f"kgn-smoke: rc {rc}", "kgn-smoke: dev", *dev,
                      "kgn-smoke: proc", "kgn-smoke: env", "NVIDIA_VISIBLE_DEVICES=all", "kgn-smoke: end"]) + "\n"


def smoke(tmp_path, monkeypatch, node, check=False, **args):
    """The module's result; its own ``status`` (ok, no_gpu, failed, skipped) replaces run_module's."""
    folder = install(tmp_path / "bin", node)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return run_module("gpu_smoke", {"engine": "docker", "image": "ubuntu:24.04", **args}, check=check), folder


def test_docker_container_that_sees_the_hosts_gpu_is_ok_and_removed(tmp_path, monkeypatch):
    node = {"smi": H100_HOST, "images": ["ubuntu:24.04"], "containers": ["kgn-gpu-smoke"],  # a leftover
            "run": {"out": printed(H100_L, dev=("nvidia0", "nvidiactl"))}}
    result, folder = smoke(tmp_path, monkeypatch, node)
    assert (result["status"], result["changed"]) == ("ok", False)  # the module's status (ok/no_gpu/failed/skipped)
    assert result["cause"] == "" and result["summary"].startswith("1 GPU(s), as on the host: GPU 0: NVIDIA H100")
    assert result["cleanup"] == {"leftover": True, "removed": True, "gone": True, "error": ""}
    assert result["runtime"] == {"name": "nvidia"}
    assert state(folder)["containers"] == []
    runs = [c for c in calls(folder) if c[:2] == ["docker", "run"]]
    assert len(runs) == 1 and "NVIDIA_VISIBLE_DEVICES=all" in runs[0]
    # the leftover is removed before the run, the new one after it
    order = [c[1] for c in calls(folder) if c[0] == "docker" and c[1] in ("run", "rm")]
    assert order == ["rm", "run", "rm"]


def test_a_refused_container_is_still_removed_and_the_cause_named(tmp_path, monkeypatch):
    err = ("docker: Error response from daemon: failed to create shim task: OCI runtime create failed: exec: "
           "\"nvidia-container-runtime\": executable file not found in $PATH: unknown.\n")
    node = {"smi": H100_HOST, "images": ["ubuntu:24.04"], "run": {"rc": 127, "err": err}}
    result, folder = smoke(tmp_path, monkeypatch, node)
    assert result["status"] == "failed" and "msg" not in result  # a finding, not a module failure
    assert result["cause"] == "runtime_not_found" and "could not start the container" in result["summary"]
    assert state(folder)["containers"] == [] and result["cleanup"]["gone"] is True


def test_the_lab_fault_nothing_injected_on_a_gpu_less_node_fails(tmp_path, monkeypatch):
    node = {"smi": NO_GPU_HOST, "images": ["ubuntu:24.04"], "runtime": "nvidia",
            "run": {"out": printed("sh: 1: nvidia-smi: not found", rc=127)}}
    result, _ = smoke(tmp_path, monkeypatch, node)
    assert result["cause"] == "no_device_injected"
    assert result["host"]["smi_found"] is True and result["host"]["present"] is False


def test_containerd_runs_ctr_with_the_cri_handlers_binary_and_no_gpu_is_said(tmp_path, monkeypatch):
    node = {"smi": NO_GPU_HOST, "images": ["docker.io/kgn-lab/gpu-smoke:local"], "crictl": NVIDIA_CRI,
            "run": {"out": printed(NO_DRIVER, rc=9)}}
    result, folder = smoke(tmp_path, monkeypatch, node, engine="containerd", image="kgn-lab/gpu-smoke:local")
    assert result["cause"] == "no_gpu_visible" and result["summary"].startswith("no GPU visible: the runtime injected")
    assert result["cleanup"] == {"leftover": False, "removed": True, "gone": True, "error": ""}
    run = next(c for c in calls(folder) if c[0] == "ctr" and "run" in c)
    assert run[run.index("--runc-binary") + 1] == "/usr/bin/nvidia-container-runtime"
    assert run[:3] == ["ctr", "--namespace", "k8s.io"]
    assert result["runtime"]["name"] == "nvidia" and result["engine_version"] == "1.7.24~ds1"
    assert state(folder)["containers"] == []


def test_check_mode_starts_no_container(tmp_path, monkeypatch):
    node = {"smi": H100_HOST, "images": ["ubuntu:24.04"], "run": {"out": printed(H100_L)}}
    result, folder = smoke(tmp_path, monkeypatch, node, check=True)
    assert result["status"] == "skipped" and result["summary"] == "skipped: a check-mode run starts no container"
    assert not [c for c in calls(folder) if c[:2] in (["docker", "run"], ["docker", "pull"])]


def test_a_missing_image_that_cannot_be_pulled_is_named_and_nothing_runs(tmp_path, monkeypatch):
    node = {"smi": H100_HOST, "images": [], "pull": {"rc": 1, "err": "Error response from daemon: pull access denied"}}
    result, folder = smoke(tmp_path, monkeypatch, node)
    assert result["cause"] == "image_missing" and "pull access denied" in result["summary"]
    assert not [c for c in calls(folder) if c[:2] == ["docker", "run"]]


def test_a_pulled_image_is_a_change(tmp_path, monkeypatch):
    node = {"smi": H100_HOST, "images": [], "pull": {"rc": 0}, "run": {"out": printed(H100_L)}}
    result, _ = smoke(tmp_path, monkeypatch, node)
    assert result["changed"] is True and result["status"] == "ok" and result["summary"].startswith("1 GPU(s)")


def test_crio_is_skipped_for_the_pod_smoke(tmp_path, monkeypatch):
    result, folder = smoke(tmp_path, monkeypatch, {"smi": H100_HOST}, engine="crio")
    assert "CRI-O runs containers only through the CRI" in result["summary"]
    assert not [c for c in calls(folder) if c[0] in ("docker", "ctr") and "run" in c]


def test_the_verify_module_runs_the_engine_smoke_on_the_gpu_node_it_reads(tmp_path, monkeypatch):
    """How verify runs it: the gpu_node_verify module, in its one call per host, with the engine the action plugin
    took from the recorded container_runtime plan (verify.engine_smoke_args)."""
    node = {"smi": NO_GPU_HOST, "images": ["kgn-lab/gpu-smoke:local"], "runtime": "nvidia",
            "run": {"out": printed("sh: 1: nvidia-smi: not found", rc=127)}}
    folder = install(tmp_path / "bin", node)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    args = {"gpu_node": True, "device_plugin_dir": str(tmp_path),
            "engine_smoke": {"engine": "docker", "mode": "legacy"}, "smoke_image": "kgn-lab/gpu-smoke:local",
            "smoke_pull": False}
    result = run_module("gpu_node_verify", args)
    ran = result["observed"]["engine_smoke"]
    assert (ran["status"], ran["cause"], result["changed"]) == ("failed", "no_device_injected", False), ran
    assert ran["image"] == "kgn-lab/gpu-smoke:local" and state(folder)["containers"] == []
    # without engine_smoke (off, check mode, a control plane) the module starts no container
    quiet = run_module("gpu_node_verify", dict(args, engine_smoke={}))
    assert "engine_smoke" not in quiet["observed"] and "isolation_probe" not in quiet["observed"]
    # the smoke and the isolation probe (a container that asks for no GPU but sets NVIDIA_VISIBLE_DEVICES=all)
    runs = [c for c in calls(folder) if c[:2] == ["docker", "run"]]
    assert len(runs) == 2
    smoke_run, probe_run = runs
    assert "/dev/null:/var/run/nvidia-container-devices/all:ro" in smoke_run
    assert "NVIDIA_VISIBLE_DEVICES=all" in probe_run and not any("nvidia-container-devices" in a for a in probe_run)
    assert result["observed"]["isolation_probe"]["status"] == "closed", result["observed"]["isolation_probe"]
