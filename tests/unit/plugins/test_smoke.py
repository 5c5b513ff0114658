"""The GPU smoke tests' decisions: command lines per engine and mode, what the workload printed, the comparison with
the host, the cause when it fails, the pod smoke's objects and verdicts (fixtures/smoke/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke, smoke_pod, smoke_pod_live
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stack_catalog
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify

FIXTURES = Path(__file__).parent / "fixtures" / "smoke"
H100_L = (FIXTURES / "h100-nvidia-smi-L.txt").read_text()
H100_UUID = "GPU-00000000-0000-0000-0000-000000000000"
# What nvidia-smi prints without a loaded driver (the lab containers, and a chroot with NVIDIA's 550 binary).
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.")
# The format of the NVIDIA MIG user guide's `nvidia-smi -L` (R470 and later), UUIDs made up.
MIG_L = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
         "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
         "  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n")


def workload(smi_text, rc=0, dev=("null", "zero"), proc="", env=None):
    """What SCRIPT prints, for the given nvidia-smi -L output and exit code."""
    env = env or {"PATH": "/usr/bin", "NVIDIA_VISIBLE_DEVICES": "all"}
    lines = ["kgn-smoke: nvidia-smi -L", smi_text.rstrip("\n"), f"kgn-smoke: rc {rc}", "kgn-smoke: dev", *dev,
             "kgn-smoke: proc", proc.rstrip("\n"), "kgn-smoke: env", *(f"{k}={v}" for k, v in env.items()),
             "kgn-smoke: end"]
    return "\n".join(line for line in lines if line != "") + "\n"


def h100_host():
    return smoke.host_view(0, H100_L)


def no_gpu_host(smi_found=True):
    return smoke.host_view(9 if smi_found else 127, NO_DRIVER if smi_found else "nvidia-smi: not found",
                           pci_gpus=0, smi_found=smi_found)


def docker_plan(mode="legacy"):
    return smoke.engine_plan("docker", mode, "ubuntu:24.04", "26.1.5")


def run(stdout="", stderr="", rc=0):
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "timed_out": False}


PRESENT = {"present": True}


# --- the H100 capture ----------------------------------------------------------------------------------


def test_the_h100_fixture_line_carries_the_captured_name_and_uuid():
    captured = gpu.parse_nvidia_smi_xml((FIXTURES / "h100-nvidia-smi-q-x.xml").read_text())["gpus"][0]
    listed = smoke.parse_smi_list(H100_L)["gpus"]
    assert listed == [{"index": 0, "name": captured["product_name"], "uuid": captured["uuid"], "mig": []}]
    # the table and the CSV query of the same machine name the same GPU
    assert "NVIDIA H100 80GB HBM3" in (FIXTURES / "h100-nvidia-smi.txt").read_text()
    assert (FIXTURES / "h100-query.csv").read_text().splitlines()[1].startswith("NVIDIA H100 80GB HBM3, 580.159.04")


def test_an_h100_container_that_lists_the_hosts_gpu_is_ok():
    result = smoke.judge_engine(docker_plan(), h100_host(), run(workload(H100_L, dev=("nvidia0", "nvidiactl"))),
                                PRESENT)
    assert result["status"] == "ok", result
    assert result["summary"] == f"1 GPU(s), as on the host: GPU 0: NVIDIA H100 80GB HBM3 ({H100_UUID})"


def test_an_h100_container_that_lists_another_uuid_is_a_mismatch():
    other = H100_L.replace(H100_UUID, "GPU-11111111-0000-0000-0000-000000000000")
    result = smoke.judge_engine(docker_plan(), h100_host(), run(workload(other)), PRESENT)
    assert (result["status"], result["cause"]) == ("failed", "gpu_mismatch")
    assert f"missing {H100_UUID}" in result["summary"] and "not on the host GPU-1111" in result["summary"]


def test_a_container_that_sees_fewer_gpus_than_the_host_fails_naming_the_missing_one():
    host = smoke.host_view(0, H100_L + H100_L.replace("GPU 0", "GPU 1").replace("-000000000000", "-000000000001"))
    result = smoke.judge_engine(docker_plan(), host, run(workload(H100_L)), PRESENT)
    assert result["cause"] == "gpu_mismatch"
    assert "sees 1 GPU(s), the host 2: missing GPU-00000000-0000-0000-0000-000000000001" in result["summary"]


# --- command lines ---------------------------------------------------------------------------------------


def test_docker_legacy_asks_for_every_gpu_through_the_default_runtime():
    plan = docker_plan()
    assert plan["run"][:8] == ["docker", "run", "--name", "kgn-gpu-smoke", "--label", "kube-gpu-nodes.io/smoke=engine",
                               "--network", "none"]
    # the variable, and the volume mount the toolkit reads where it refuses the variable (docs/isolation.md)
    assert plan["run"][8:15] == ["--env", "NVIDIA_DRIVER_CAPABILITIES=utility", "--env", "NVIDIA_VISIBLE_DEVICES=all",
                                 "--volume", "/dev/null:/var/run/nvidia-container-devices/all:ro", "ubuntu:24.04"]
    assert "--runtime" not in plan["run"]  # the default runtime, as kubelet's containers get it
    assert plan["run"][-3:] == ["sh", "-c", smoke.SCRIPT]
    assert plan["cleanup"] == [["docker", "rm", "--force", "kgn-gpu-smoke"]]


def test_the_isolation_probe_asks_for_no_gpu_but_sets_the_variable():
    for engine, version, cri in (("docker", "20.10.24", None),
                                 ("containerd", "1.7.24", {"name": "nvidia", "runtime_type": "io.containerd.runc.v2"})):
        for mode in smoke.MODES:
            plan = smoke.engine_plan(engine, mode, "ubuntu:24.04", version, cri, probe=True)
            assert plan["skip"] == "" and plan["name"] == smoke.PROBE_NAME
            assert "NVIDIA_VISIBLE_DEVICES=all" in plan["run"] and "kube-gpu-nodes.io/smoke=isolation" in plan["run"]
            assert not any("nvidia-container-devices" in a or a == "--device" for a in plan["run"])


def test_the_isolation_probe_says_what_was_injected():
    plan = smoke.engine_plan("docker", "legacy", "ubuntu:24.04", "28.5.2", probe=True)
    present = {"present": True}

    def out(smi, rc, dev=""):
        return {"rc": 0, "stdout": f"kgn-smoke: nvidia-smi -L\n{smi}\nkgn-smoke: rc {rc}\nkgn-smoke: dev\n{dev}\n"
                                   "kgn-smoke: proc\nkgn-smoke: env\nkgn-smoke: end\n", "stderr": ""}
    closed = smoke.judge_isolation(plan, out("sh: nvidia-smi: not found", 127, "null\nzero"), present)
    assert (closed["status"], closed["injected"]) == ("closed", [])
    # a node without a GPU: the runtime injected nvidia-smi, which then finds no driver
    lab = smoke.judge_isolation(plan, out("NVIDIA-SMI has failed because it couldn't communicate", 9), present)
    assert (lab["status"], lab["injected"]) == ("open", ["nvidia-smi"])
    gpu = smoke.judge_isolation(plan, out("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)", 0, "nvidia0\nnvidiactl"),
                                present)
    assert (gpu["status"], gpu["injected"]) == ("open", ["/dev/nvidia0", "nvidia-smi"])
    assert smoke.judge_isolation(plan, {"rc": 125, "stdout": "", "stderr": "no such image"}, present)["status"] == \
        "not_run"
    assert smoke.judge_isolation(plan, None, {"present": False, "error": "pull denied"})["status"] == "not_run"


def test_docker_cdi_asks_for_the_cdi_device_and_older_docker_is_skipped():
    assert smoke.engine_plan("docker", "cdi", "ubuntu:24.04", "28.5.2")["run"][8:11] == [
        "--device", "nvidia.com/gpu=all", "ubuntu:24.04"]
    old = smoke.engine_plan("docker", "cdi", "ubuntu:24.04", "20.10.24")
    assert old["run"] == [] and "Docker 20.10.24 has no CDI" in old["skip"]


def test_containerd_runs_with_the_cri_default_handler_and_its_binary():
    cri = {"name": "nvidia", "runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime"}
    plan = smoke.engine_plan("containerd", "legacy", "kgn-lab/gpu-smoke:local", "1.7.24", cri)
    assert plan["image"] == "docker.io/kgn-lab/gpu-smoke:local"
    assert plan["run"][:10] == ["ctr", "--namespace", "k8s.io", "run", "--label", "kube-gpu-nodes.io/smoke=engine",
                                "--runtime", "io.containerd.runc.v2", "--runc-binary",
                                "/usr/bin/nvidia-container-runtime"]
    assert plan["cleanup"] == [["ctr", "--namespace", "k8s.io", "task", "delete", "--force", "kgn-gpu-smoke"],
                               ["ctr", "--namespace", "k8s.io", "containers", "delete", "kgn-gpu-smoke"]]
    assert plan["image_present"] == ["ctr", "--namespace", "k8s.io", "images", "list", "--quiet",
                                     "name==docker.io/kgn-lab/gpu-smoke:local"]
    # a CRI whose default is plain runc: the smoke runs what the pods get, without a runtime binary
    plain = smoke.engine_plan("containerd", "legacy", "ubuntu:24.04", "1.7.24",
                              {"name": "runc", "runtime_type": "io.containerd.runc.v2", "binary": ""})
    assert "--runc-binary" not in plain["run"] and plain["image"] == "docker.io/library/ubuntu:24.04"


def test_containerd_cdi_needs_containerd_2_and_crio_is_left_to_the_pod_smoke():
    cri = {"name": "runc", "runtime_type": "io.containerd.runc.v2", "binary": ""}
    two = smoke.engine_plan("containerd", "cdi", "ubuntu:24.04", "2.1.9", cri)
    assert two["run"][8:10] == ["--device", "nvidia.com/gpu=all"]
    assert "containerd 1.7.24 cannot ask for CDI" in smoke.engine_plan("containerd", "cdi", "x", "1.7.24", cri)["skip"]
    assert "CRI-O runs containers only through the CRI" in smoke.engine_plan("crio", "legacy", "x")["skip"]
    kata = {"name": "kata", "runtime_type": "io.containerd.kata.v2"}
    odd = smoke.engine_plan("containerd", "legacy", "x", "1.7.24", kata)
    assert "of type io.containerd.kata.v2" in odd["skip"]


@pytest.mark.parametrize("config, plugin, want", [
    ({"plugins": {"io.containerd.grpc.v1.cri": {"containerd": {
        "default_runtime_name": "nvidia",
        "runtimes": {"nvidia": {"runtime_type": "io.containerd.runc.v2",
                                "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"}}}}}}},
     "", {"name": "nvidia", "runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime",
          "plugin": "io.containerd.grpc.v1.cri"}),
    ({"plugins": {"io.containerd.cri.v1.runtime": {"containerd": {
        "default_runtime_name": "runc", "runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2"}}}}}},
     "io.containerd.cri.v1.runtime", {"name": "runc", "runtime_type": "io.containerd.runc.v2", "binary": "",
                                      "plugin": "io.containerd.cri.v1.runtime"}),
    ({"containerd": {"defaultRuntimeName": "nvidia", "runtimes": {"nvidia": {
        "runtimeType": "io.containerd.runc.v2", "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"}}}}},
     "", {"name": "nvidia", "runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime",
          "plugin": "crictl info"}),
])
def test_the_cri_default_handler_from_config_dump_v2_v3_and_crictl(config, plugin, want):
    assert smoke.cri_runtime(config, plugin) == want


def test_bad_input_is_refused_with_what_to_write():
    with pytest.raises(KgnError, match="the runtime mode must be one of legacy, cdi"):
        smoke.engine_plan("docker", "jit", "ubuntu:24.04")
    with pytest.raises(KgnError, match="is not an image reference"):
        smoke.engine_plan("docker", "legacy", "ubuntu 24.04")


# --- the engine refused the container ------------------------------------------------------------------

# Docker 20.10's words when the runtime binary it is told to run does not exist (the lab's deleted-binary fault).
BINARY_GONE = ("docker: Error response from daemon: failed to create shim task: OCI runtime create failed: unable to "
               "retrieve OCI runtime error (open /run/containerd/io.containerd.runtime.v2.task/moby/abc/log.json: no "
               "such file or directory): exec: \"nvidia-container-runtime\": executable file not found in $PATH: "
               "unknown.")
# nvidia-container-runtime-hook's failure as Docker reports it, for a node whose driver is not loaded.
HOOK_NOT_LOADED = ("docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
                   "runc create failed: unable to start container process: error during container init: error running "
                   "hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n"
                   "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.")
HOOK_MISMATCH = HOOK_NOT_LOADED.replace("nvml error: driver not loaded", "nvml error: driver/library version mismatch")


@pytest.mark.parametrize("stderr, host, status, cause", [
    (BINARY_GONE, "h100", "failed", "runtime_not_found"),
    (HOOK_NOT_LOADED, "h100", "failed", "runtime_hook_failed"),
    (HOOK_NOT_LOADED, "none", "no_gpu", "no_gpu_visible"),
    (HOOK_MISMATCH, "h100", "failed", "driver_library_mismatch"),
    ("docker: Error response from daemon: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=all.",
     "h100", "failed", "cdi_unresolved"),
    ("docker: Error response from daemon: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=all.",
     "none", "no_gpu", "no_gpu_visible"),
    ("docker: Error response from daemon: unknown or invalid runtime name: nvidia.", "h100", "failed",
     "runtime_not_registered"),
    ("ctr: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container "
     "process: exec: \"sh\": executable file not found in $PATH: unknown", "h100", "failed", "image_no_shell"),
    ("ctr: something else entirely", "h100", "failed", "container_failed"),
])
def test_a_refused_container_is_classified_from_the_engines_words(stderr, host, status, cause):
    view = h100_host() if host == "h100" else no_gpu_host()
    result = smoke.judge_engine(docker_plan(), view, run(stderr=stderr, rc=125), PRESENT)
    assert (result["status"], result["cause"]) == (status, cause), result
    assert result["summary"]


def test_no_gpu_node_where_the_real_runtime_refuses_says_no_gpu_visible_with_its_words():
    result = smoke.judge_engine(docker_plan(), no_gpu_host(), run(stderr=HOOK_NOT_LOADED, rc=125), PRESENT)
    assert result["summary"].startswith("no GPU visible: the nvidia runtime found no GPU to give the container")
    assert "nvml error: driver not loaded" in result["summary"]


# --- the container ran ---------------------------------------------------------------------------------


def test_nothing_injected_while_the_host_has_the_driver_is_a_failure_even_without_a_gpu():
    # the lab's fault: the runtime binary swapped for one that runs runc and injects nothing
    out = workload("sh: 1: nvidia-smi: not found", rc=127)
    result = smoke.judge_engine(docker_plan(), no_gpu_host(), run(out), PRESENT)
    assert (result["status"], result["cause"]) == ("failed", "no_device_injected")
    assert "while the host has the driver's nvidia-smi: the GPU request was ignored" in result["summary"]
    with_gpu = smoke.judge_engine(docker_plan(), h100_host(), run(out), PRESENT)
    assert "while the host has 1 GPU(s)" in with_gpu["summary"]


def test_injected_nvidia_smi_that_finds_no_driver_on_a_gpu_less_host_is_no_gpu_visible():
    result = smoke.judge_engine(docker_plan(), no_gpu_host(), run(workload(NO_DRIVER, rc=9)), PRESENT)
    assert (result["status"], result["cause"]) == ("no_gpu", "no_gpu_visible")
    assert result["summary"].startswith("no GPU visible: the runtime injected nvidia-smi, which lists none (NVIDIA-SMI")
    # the same words on a host with GPUs: the devices were not handed in
    assert smoke.judge_engine(docker_plan(), h100_host(), run(workload(NO_DRIVER, rc=9)), PRESENT)["cause"] == \
        "driver_unreachable"


def test_nvml_failing_in_the_container_of_a_gpu_less_host_is_no_gpu_visible():
    # what NVIDIA's 550 nvidia-smi, injected by the lab's stand-in runtime, printed in the lab's containers
    out = workload("Failed to initialize NVML: Unknown Error", rc=255)
    result = smoke.judge_engine(docker_plan(), no_gpu_host(), run(out), PRESENT)
    assert (result["status"], result["cause"]) == ("no_gpu", "no_gpu_visible")
    assert result["summary"] == ("no GPU visible: the runtime injected nvidia-smi, which lists none (Failed to "
                                 "initialize NVML: Unknown Error), as on the host")
    assert smoke.judge_engine(docker_plan(), h100_host(), run(out), PRESENT)["cause"] == "nvml_unknown_error"


def test_a_host_without_driver_and_gpu_and_a_container_without_either_is_no_gpu_visible():
    out = workload("sh: nvidia-smi: not found", rc=127)
    result = smoke.judge_engine(docker_plan(), no_gpu_host(smi_found=False), run(out), PRESENT)
    assert (result["status"], result["cause"]) == ("no_gpu", "no_gpu_visible")


@pytest.mark.parametrize("smi, rc, dev, cause", [
    ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.159", 18, (),
     "driver_library_mismatch"),
    ("Failed to initialize NVML: Unknown Error", 255, ("nvidia0", "nvidiactl"), "nvml_unknown_error"),
    ("nvidia-smi: error while loading shared libraries: libdl.so.2: cannot open shared object file: No such file or "
     "directory", 127, ("nvidia0",), "image_lacks_glibc"),
    ("sh: nvidia-smi: not found", 127, ("nvidia0", "nvidiactl", "nvidia-uvm"), "utilities_not_injected"),
    ("No devices were found", 6, (), "no_device_injected"),
    ("Unable to determine the device handle for GPU0000:00:06.0: Unknown Error", 15, ("nvidia0",), "smi_failed"),
])
def test_what_nvidia_smi_said_in_the_container_names_the_cause(smi, rc, dev, cause):
    result = smoke.judge_engine(docker_plan(), h100_host(), run(workload(smi, rc=rc, dev=dev)), PRESENT)
    assert (result["status"], result["cause"]) == ("failed", cause), result


def test_mig_devices_are_listed_and_must_be_the_hosts():
    host = smoke.host_view(0, MIG_L)
    assert [m["profile"] for m in host["gpus"][0]["mig"]] == ["1g.5gb", "1g.5gb"]
    ok = smoke.judge_engine(docker_plan(), host, run(workload(MIG_L)), PRESENT)
    assert ok["status"] == "ok" and "2 of the host's 2 MIG devices listed" in ok["summary"]
    fewer = smoke.judge_engine(docker_plan(), host, run(workload(MIG_L.rsplit("  MIG", 1)[0])), PRESENT)
    assert fewer["status"] == "ok" and "1 of the host's 2 MIG devices" in fewer["summary"]
    foreign = smoke.judge_engine(docker_plan(), host, run(workload(MIG_L.replace("MIG-cba6", "MIG-0000"))), PRESENT)
    assert foreign["cause"] == "gpu_mismatch" and "MIG devices not on the host MIG-0000" in foreign["summary"]


def test_a_host_whose_nvidia_smi_does_not_answer_is_not_compared():
    # e.g. the GPU Operator's driver container: the host has no nvidia-smi of its own
    host = smoke.host_view(127, "nvidia-smi: not found", pci_gpus=1, smi_found=False)
    result = smoke.judge_engine(docker_plan(), host, run(workload(H100_L)), PRESENT)
    assert result["status"] == "ok" and "so not compared" in result["summary"]


def test_the_workload_output_is_parsed_into_sections():
    proc = ("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000000\n"
            "Bus Location: \t 0000:00:06.0\nDevice Minor: \t 0\n")
    seen = smoke.parse_output(workload(H100_L, dev=("nvidia0", "nvidia-uvm", "nvidiactl", "null"), proc=proc,
                                       env={"PATH": "/bin", "NVIDIA_VISIBLE_DEVICES": "all", "HOME": "/root"}))
    assert seen["started"] and seen["complete"] and seen["smi"]["rc"] == 0
    assert seen["gpu_devices"] == ["nvidia0"] and seen["devices"] == ["nvidia-uvm", "nvidia0", "nvidiactl"]
    assert seen["proc"] == [{"model": "NVIDIA H100 80GB HBM3", "uuid": H100_UUID, "bus": "0000:00:06.0", "minor": 0}]
    assert seen["env"] == {"NVIDIA_VISIBLE_DEVICES": "all"}  # only what the checks read
    assert not smoke.parse_output("docker: Error response from daemon: ...")["started"]


def test_image_missing_timeout_and_check_mode():
    host = h100_host()
    missing = smoke.judge_engine(docker_plan(), host, None, {"present": False, "error": "pull access denied"})
    assert missing["cause"] == "image_missing" and "pull access denied" in missing["summary"]
    check = smoke.judge_engine(docker_plan(), host, None, {"present": False, "check_mode": True})
    assert check["status"] == "skipped" and "a check-mode run pulls nothing" in check["summary"]
    slow = smoke.judge_engine(docker_plan(), host, {"timed_out": True, "timeout": 60}, PRESENT)
    assert slow["cause"] == "timeout"
    down = smoke.judge_engine(docker_plan(), host, None, PRESENT, {"answered": False, "error": "Cannot connect"})
    assert down["cause"] == "engine_unavailable"
    assert smoke.image_present(0, "docker.io/library/ubuntu:24.04\n") and not smoke.image_present(0, "")


# --- the pod smoke ---------------------------------------------------------------------------------------


def test_every_stack_in_the_catalog_has_a_pod_spec_and_a_new_stack_needs_no_code():
    for name, entry in stack_catalog().items():
        spec = smoke_pod.pod_spec(name, entry, resource_api="resource.k8s.io/v1")
        assert spec["limits"] or spec["claim"], name
    new = smoke_pod.pod_spec("future", {"resources": ["example.com/vgpu", "example.com/vgpu-mem"]})
    assert new["limits"] == {"example.com/vgpu": 1, "example.com/vgpu-mem": 1} and new["gpus"] == "required"
    assert smoke_pod.pod_spec("nvidia_device_plugin", stack_catalog()["nvidia_device_plugin"],
                          {"nvidia.com/mig-1g.10gb": 1})["limits"] == {"nvidia.com/mig-1g.10gb": 1}
    with pytest.raises(KgnError, match="no resource for a pod to request"):
        smoke_pod.pod_spec("empty", {})


def test_the_pod_is_pinned_through_the_scheduler_and_asks_for_the_stacks_resource():
    spec = smoke_pod.pod_spec("gpushare", stack_catalog()["gpushare"])
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (pod,) = smoke_pod.pod_objects("kgn-gpu-docker", spec, "ubuntu:24.04", "default", "", tolerations, 120)
    assert pod["metadata"]["name"] == "kgn-gpu-smoke-gpushare-kgn-gpu-docker"
    assert pod["metadata"]["labels"] == {"kube-gpu-nodes.io/smoke": "pod",
                                         "kube-gpu-nodes.io/smoke-node": "kgn-gpu-docker"}
    term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"] == [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                           "values": ["kgn-gpu-docker"]}]}]
    assert "nodeName" not in pod["spec"]  # the scheduler (and gpushare's extender) must place it
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"aliyun.com/gpu-mem": "1"}}
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["activeDeadlineSeconds"] == 120
    assert pod["spec"]["tolerations"] == tolerations and "schedulerName" not in pod["spec"]
    assert smoke_pod.pod_selector("gpu-2", "gpu-1", "gpu-2") == \
        "kube-gpu-nodes.io/smoke=pod,kube-gpu-nodes.io/smoke-node in (gpu-1,gpu-2)"
    assert smoke_pod.pod_selector("kgn-gpu-docker") == \
        "kube-gpu-nodes.io/smoke=pod,kube-gpu-nodes.io/smoke-node=kgn-gpu-docker"


def test_long_node_names_make_valid_names_and_label_values():
    node = "gpu-" + "x" * 80 + ".example.internal"
    name = smoke_pod.pod_name(node, "nvidia_device_plugin")
    assert len(name) <= 63 and name == name.lower()
    assert len(smoke_pod.label_value(node)) <= 63
    assert smoke_pod.pod_name(node, "hami") != smoke_pod.pod_name(node + "2", "hami")


def test_a_dra_stack_gets_a_claim_template_and_a_pod_that_uses_it():
    entry = stack_catalog()["nvidia_dra"]
    spec = smoke_pod.pod_spec("nvidia_dra", entry, resource_api="resource.k8s.io/v1")
    assert spec["limits"] == {} and spec["gpus"] == "required"
    template, pod = smoke_pod.pod_objects("gpu1", spec, "ubuntu:24.04")
    assert template["kind"] == "ResourceClaimTemplate" and template["apiVersion"] == "resource.k8s.io/v1"
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
    assert template["metadata"]["labels"] == pod["metadata"]["labels"]  # deleted with the pod, by its selector
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": template["metadata"]["name"]}]
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {}, "claims": [{"name": "gpu"}]}
    # Kubernetes 1.32 serves only v1beta1, where the request names its class itself
    beta = smoke_pod.pod_spec("nvidia_dra", entry, resource_api="resource.k8s.io/v1beta1")
    (template, _) = smoke_pod.pod_objects("gpu1", beta, "ubuntu:24.04")
    assert template["apiVersion"] == "resource.k8s.io/v1beta1"
    assert template["spec"]["spec"]["devices"]["requests"] == [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]


def test_the_scheduler_name_follows_the_stacks_plan():
    plan = {"hami": {"enabled": True, "name": "hami-scheduler"},
            "secondary": {"enabled": True, "name": "kgn-gpu-scheduler"}}
    assert smoke_pod.scheduler_name("hami", plan) == "hami-scheduler"
    assert smoke_pod.scheduler_name("gpushare", plan) == "kgn-gpu-scheduler"
    assert smoke_pod.scheduler_name("nvidia_device_plugin", plan) == ""
    assert smoke_pod.scheduler_name("gpushare", {}) == ""


def pod(phase="Pending", conditions=(), waiting=None, terminated=None, node_name="", reason="", message=""):
    status = {"phase": phase, "conditions": list(conditions)}
    if waiting or terminated:
        state = {"waiting": waiting} if waiting else {"terminated": terminated}
        status["containerStatuses"] = [{"name": "smoke", "state": state}]
    if reason:
        status.update(reason=reason, message=message)
    spec = {"nodeName": node_name} if node_name else {}
    return {"metadata": {"name": "p"}, "spec": spec, "status": status}


def unschedulable(message):
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}


DP = smoke_pod.pod_spec("nvidia_device_plugin", stack_catalog()["nvidia_device_plugin"])
GS = smoke_pod.pod_spec("gpushare", stack_catalog()["gpushare"])
HAMI = smoke_pod.pod_spec("hami", stack_catalog()["hami"])


def test_a_succeeded_pod_whose_log_shows_the_hosts_gpu_is_ok():
    result = smoke_pod.judge_pod(pod("Succeeded"), DP, log=workload(H100_L), host=h100_host())
    assert result == {"status": "ok", "cause": "", "phase": "Succeeded",
                      "summary": f"Succeeded; saw GPU 0: NVIDIA H100 80GB HBM3 ({H100_UUID})"}


def test_the_memory_sharing_stacks_must_show_the_limit_they_were_given():
    env = {"NVIDIA_VISIBLE_DEVICES": H100_UUID, "ALIYUN_COM_GPU_MEM_CONTAINER": "1", "ALIYUN_COM_GPU_MEM_DEV": "80"}
    ok = smoke_pod.judge_pod(pod("Succeeded"), GS, log=workload(H100_L, env=env), host=h100_host())
    assert ok["status"] == "ok" and ok["summary"].endswith("ALIYUN_COM_GPU_MEM_CONTAINER=1")
    del env["ALIYUN_COM_GPU_MEM_CONTAINER"]
    missing = smoke_pod.judge_pod(pod("Succeeded"), GS, log=workload(H100_L, env=env), host=h100_host())
    assert (missing["status"], missing["cause"]) == ("failed", "pod_limit_missing")
    assert "ALIYUN_COM_GPU_MEM_CONTAINER=(unset) (want 1)" in missing["summary"]
    limited = workload(H100_L, env={"CUDA_DEVICE_MEMORY_LIMIT_0": "1024m"})
    hami = smoke_pod.judge_pod(pod("Succeeded"), HAMI, log=limited, host=h100_host())
    assert hami["status"] == "ok" and "CUDA_DEVICE_MEMORY_LIMIT_0=1024m" in hami["summary"]


def test_a_succeeded_pod_that_saw_no_gpu_names_what_its_log_says():
    log = workload("Failed to initialize NVML: Driver/library version mismatch", rc=18)
    result = smoke_pod.judge_pod(pod("Succeeded"), DP, log=log, host=h100_host())
    assert (result["status"], result["cause"]) == ("failed", "driver_library_mismatch")
    two = smoke_pod.judge_pod(pod("Succeeded"), DP, log=workload(MIG_L), host=smoke.host_view(0, MIG_L))
    assert two["cause"] == "pod_no_gpu" and "2 device(s) seen for nvidia.com/gpu: 1" in two["summary"]


@pytest.mark.parametrize("p, events, host, status, cause, words", [
    (pod(conditions=[unschedulable("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match "
                                   "Pod's node affinity/selector.")]), [], "h100", "failed", "pod_insufficient",
     "Pending: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu"),
    (pod(conditions=[unschedulable("0/2 nodes are available: 1 Insufficient nvidia.com/gpu.")]), [], "none",
     "no_gpu", "no_gpu_visible", "no GPU visible: Pending"),
    (pod(conditions=[unschedulable('Post "http://127.0.0.1:32766/gpushare-scheduler/filter": dial tcp '
                                   '127.0.0.1:32766: connect: connection refused')]), [], "h100", "failed",
     "pod_extender_error", "gpushare-scheduler/filter"),
    (pod(conditions=[unschedulable("0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}.")]),
     [], "h100", "failed", "pod_unschedulable", "untolerated taint"),
    (pod(node_name="n", waiting={"reason": "ImagePullBackOff", "message": 'Back-off pulling image "ubuntu:24.04"'},
         conditions=[{"type": "PodScheduled", "status": "True"}]), [], "h100", "failed", "pod_image_pull",
     "ImagePullBackOff"),
    (pod(node_name="n", conditions=[{"type": "PodScheduled", "status": "True"}]),
     [{"reason": "FailedCreatePodSandBox", "message": 'Failed to create pod sandbox: rpc error: code = Unknown desc = '
                                                      'failed to get sandbox runtime: no runtime for "nvidia" is '
                                                      'configured'}], "h100", "failed", "pod_sandbox_failed",
     'no runtime for "nvidia" is configured'),
    (pod("Failed", reason="UnexpectedAdmissionError",
         message="Allocate failed due to rpc error: code = Unknown desc = device plugin error"), [], "h100", "failed",
     "pod_admission_failed", "UnexpectedAdmissionError"),
    (pod("Running", node_name="n", conditions=[{"type": "PodScheduled", "status": "True"}]),
     [{"reason": "Started", "message": "Started container smoke"}], "h100", "failed", "pod_timeout",
     "Running after 30 s (limit 30 s): Started"),
])
def test_a_pod_that_does_not_get_there_says_why_from_its_status_and_events(p, events, host, status, cause, words):
    view = h100_host() if host == "h100" else no_gpu_host()
    result = smoke_pod.judge_pod(p, DP, events=events, host=view, waited=30, timeout=30)
    assert (result["status"], result["cause"]) == (status, cause), result
    assert words in result["summary"], result["summary"]


def test_a_pod_no_scheduler_acted_on_names_the_lease():
    stored = {"metadata": {"name": "p"}, "spec": {}, "status": {}}  # an API server that stores only: no phase
    assert smoke_pod.pod_phase(stored) == "Pending"
    none = smoke_pod.judge_pod(stored, DP, host=no_gpu_host(), waited=10, timeout=10, lease={})
    assert none["cause"] == "pod_not_scheduled"
    assert none["summary"] == ("Pending after 10 s: not scheduled, no condition and no event from default-scheduler "
                               "(no kube-scheduler holds the lease kube-system/kube-scheduler)")
    held = smoke_pod.judge_pod(stored, DP, host=h100_host(), waited=10, lease={"holder": "cp1_abc", "renewed_ago": 2})
    assert "last renewed 2 s ago by cp1_abc" in held["summary"]
    own = dict(stored, spec={"schedulerName": "hami-scheduler"})
    assert "is hami-scheduler running?" in smoke_pod.judge_pod(own, HAMI, waited=10)["summary"]
    assert smoke_pod.judge_pod(None, DP, create_error='namespaces "gpu" not found')["cause"] == "pod_create_failed"


def test_waiting_ends_early_only_when_nothing_can_change():
    assert smoke_pod.pod_done(pod("Succeeded"))
    assert smoke_pod.pod_done(pod(waiting={"reason": "ErrImagePull"}))
    insufficient = pod(conditions=[unschedulable("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")])
    assert not smoke_pod.pod_done(insufficient, host_has_gpu=True, stack_resources=["nvidia.com/gpu"])
    assert smoke_pod.pod_done(insufficient, host_has_gpu=False, stack_resources=["nvidia.com/gpu"])
    assert not smoke_pod.pod_done(pod())


# --- into verify ---------------------------------------------------------------------------------------


def _row(probe=None, pod=None, **settings):
    base = {"host": "gpu1", "node_name": "gpu1", "kinds": ["gpu_node"], "stacks": ["gpushare"], "expect_gpu": False,
            "engine_smoke": True, "pod_smoke": True}
    return verify.verify_host(dict(base, **settings), {}, {"gpu_node": True, **(probe or {})}, None, None, pod)


def _checks(row):
    return {c["id"]: c for c in row["checks"]}


NO_GPU_ENGINE = {"status": "no_gpu", "cause": "no_gpu_visible", "summary": "no GPU visible: ...", "engine": "docker"}
NOT_SCHEDULED = {"status": "failed", "summary": "", "deleted": True, "api_host": "cp1",
                 "pods": [{"stack": "gpushare", "status": "failed", "cause": "pod_not_scheduled",
                           "summary": "Pending after 10 s: not scheduled"}]}


def test_the_smoke_checks_are_registered_with_their_causes_and_fill_the_report_column():
    row = _row({"engine_smoke": NO_GPU_ENGINE}, NOT_SCHEDULED)
    found = _checks(row)
    assert (found["engine_smoke"]["status"], found["pod_smoke"]["status"]) == ("warn", "failed")
    assert [d["id"] for d in found["engine_smoke"]["diagnosis"]] == ["smoke_no_gpu_visible"]
    assert [d["id"] for d in found["pod_smoke"]["diagnosis"]] == ["smoke_pod_not_scheduled"]
    assert found["pod_smoke"]["summary"] == "gpushare: Pending after 10 s: not scheduled"
    assert row["smoke"] == "engine: no GPU visible; pod: FAILED (pod not scheduled)"
    assert row["verdict"] == "failed"
    # a pod that fails for a cause the engine smoke names too is explained by the same words
    mismatch = dict(NOT_SCHEDULED, pods=[dict(NOT_SCHEDULED["pods"][0], cause="gpu_mismatch")])
    pod = _checks(_row({"engine_smoke": NO_GPU_ENGINE}, mismatch))["pod_smoke"]
    assert [d["id"] for d in pod["diagnosis"]] == ["pod_smoke_gpu_mismatch"]
    assert pod["diagnosis"][0]["cause"] == smoke.CAUSES["gpu_mismatch"][0]
    ok = _row({"engine_smoke": {"status": "ok", "cause": "", "summary": "1 GPU(s), as on the host"}}, None,
              pod_smoke=False)
    assert ok["smoke"] == "engine: ok; pod: -" and _checks(ok)["engine_smoke"]["diagnosis"] == []


def test_a_waived_or_switched_off_smoke_shows_a_dash_and_does_not_count():
    waived = _row({"engine_smoke": {"status": "ok", "cause": "", "summary": "1 GPU(s)"}}, NOT_SCHEDULED,
                  waived=["pod_smoke"])
    assert _checks(waived)["pod_smoke"]["status"] == "waived"
    unwaived = _row({"engine_smoke": {"status": "ok", "cause": "", "summary": "1 GPU(s)"}}, NOT_SCHEDULED)
    assert unwaived["verdict"] == "failed" and waived["verdict"] == "degraded"  # degraded: no GPU on this host
    assert waived["smoke"] == "engine: ok; pod: - (waived: pod not scheduled)"
    off = _row({"engine_smoke": NO_GPU_ENGINE}, NOT_SCHEDULED, engine_smoke=False, pod_smoke=False)
    assert {_checks(off)[k]["status"] for k in ("engine_smoke", "pod_smoke")} == {"skipped"}
    assert off["smoke"] == "-"
    assert _checks(off)["engine_smoke"]["summary"] == "skipped: off (gpu_node_verify_engine_smoke: false)"
    # the same host with the smokes off is judged on everything else alone
    assert off["verdict"] == _row({}, None, engine_smoke=False, pod_smoke=False)["verdict"]
    check = _row({}, None, check_mode=True)
    assert _checks(check)["engine_smoke"]["summary"].startswith("skipped: a check-mode run") and check["smoke"] == "-"
    # on but not run (the API host was not reached): said, not failed
    unrun = _checks(_row({}, None))
    assert unrun["pod_smoke"]["status"] == "skipped" and "not run" in unrun["pod_smoke"]["summary"]
    # no stack, no pod smoke line; a control plane has no smoke checks and "-" in the column
    assert "pod_smoke" not in _checks(_row({}, None, stacks=[]))
    plane = verify.verify_host({"host": "cp1", "kinds": ["control_plane"], "engine_smoke": True}, {}, {}, None)
    assert "engine_smoke" not in _checks(plane) and plane["smoke"] == "-"


def test_the_engine_smoke_runs_with_the_recorded_engine_and_mode_except_in_check_mode():
    plan = {"engine": "containerd", "runtime_mode": "cdi", "cri_plugin": "io.containerd.cri.v1.runtime"}
    settings = {"kinds": ["gpu_node"], "engine_smoke": True}
    assert verify.engine_smoke_args(settings, plan) == {"engine": "containerd", "mode": "cdi",
                                                        "cri_plugin": "io.containerd.cri.v1.runtime"}
    assert verify.engine_smoke_args(dict(settings, check_mode=True), plan) == {}
    assert verify.engine_smoke_args(dict(settings, engine_smoke=False), plan) == {}
    assert verify.engine_smoke_args({"kinds": ["control_plane"], "engine_smoke": True}, plan) == {}
    assert verify.engine_smoke_args(settings, {"engine": "none"}) == {}
    assert verify.engine_smoke_args(settings, {"engine": "docker"})["mode"] == "legacy"


def test_the_pod_smoke_compares_with_the_gpus_the_driver_module_recorded():
    state = {"live": {"nvidia_smi": {"answered": True},
                      "gpu": {"gpu_present": True, "gpus": [{"index": 0, "product_name": "NVIDIA H100 80GB HBM3",
                                                              "uuid": "GPU-0"}]}}}
    view = smoke.host_from_state(state)
    assert view["present"] and view["listed"] and view["gpus"] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0", "mig": []}]
    silent = smoke.host_from_state({"live": {"nvidia_smi": {"answered": False}, "gpu": {"gpu_present": True}}})
    assert silent["present"] and not silent["listed"] and silent["gpus"] == []
    assert smoke.host_from_state({}) == {} and smoke.host_from_state(None) == {}


def test_the_pod_smokes_of_a_play_are_grouped_per_api_server_and_namespace():
    cp1 = {"host": "cp1", "delegate_to": "cp1", "kubeconfig": "/etc/kubernetes/admin.conf", "where": "cp1"}
    cp2 = dict(cp1, host="cp2", delegate_to="cp2", where="cp2")
    common = {"namespace": "default", "kubectl": "kubectl", "request_timeout": 5}
    requests = [dict(common, target=cp1, node={"node_name": "gpu1"}),
                dict(common, target=cp2, node={"node_name": "gpu2"}),
                dict(common, target=cp1, node={"node_name": "gpu3", "stacks": ["hami"]}),
                dict(common, target=cp1, namespace="gpu", node={"node_name": "gpu4"})]
    batches = smoke.pod_smoke_batches(requests)
    assert [(b["host"], b["namespace"], [n["node_name"] for n in b["nodes"]]) for b in batches] == [
        ("cp1", "default", ["gpu1", "gpu3"]), ("cp2", "default", ["gpu2"]), ("cp1", "gpu", ["gpu4"])]
    assert batches[0]["delegate_to"] == "cp1" and batches[0]["nodes"][1]["stacks"] == ["hami"]
    assert smoke.pod_smoke_batches([]) == []
    with pytest.raises(KgnError, match="each request needs a target and a node with its node_name"):
        smoke.pod_smoke_batches([dict(common, target=cp1, node={})])
    with pytest.raises(KgnError, match="must be a list"):
        smoke.pod_smoke_batches("gpu1")


class PodsGoing:
    """kubectl as the pod smoke's delete sees it: the objects named in ``left`` answer each read, one list per read."""

    def __init__(self, *left):
        self.left, self.calls = list(left), []

    def __call__(self, args, data=None):
        self.calls.append(args)
        if args[0] == "delete":
            return 0, "", ""
        return 0, "".join(f"{name}\n" for name in (self.left.pop(0) if self.left else [])), ""


SPECS = [{"claim": None}]
P = {"namespace": "default", "delete_timeout": 60}


def test_the_smoke_objects_are_deleted_at_once_and_read_until_none_is_left(monkeypatch):
    monkeypatch.setattr(smoke_pod_live, "DELETE_POLL", 0)
    api = PodsGoing(["pod/a", "pod/b"], ["pod/b"], [])
    assert smoke_pod_live.delete(api, P, "sel", SPECS) == (True, "", [])
    assert [c[0] for c in api.calls] == ["delete", "get", "get", "get"]
    assert api.calls[0] == ["delete", "pods", "-n", "default", "-l", "sel", "--ignore-not-found", "--wait=false"]


def test_smoke_objects_that_stay_are_named_after_the_timeout(monkeypatch):
    monkeypatch.setattr(smoke_pod_live, "DELETE_POLL", 0.05)
    api = PodsGoing(*[["pod/stuck"]] * 100)
    ok, error, left = smoke_pod_live.delete(api, dict(P, delete_timeout=0.2), "sel", SPECS)
    assert (ok, left) == (False, ["pod/stuck"]) and error == "still there 0.2 s after the delete: pod/stuck"
