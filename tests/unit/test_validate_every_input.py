"""Every role input, given a value that cannot work, is refused by the first play with the variable's name.

One real ansible-playbook run of playbooks/validate.yml over an inventory written here: one GPU host per role input,
each with one wrong value (a wrong type for every input, then the values of the right type that cannot work). The
hosts do not exist: the play never contacts them, which the recap proves (only localhost ran).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

TOP = Path(__file__).resolve().parents[2]
GOOD = {"kubernetes_version": "1.30.4", "gpu_sharing_stacks": ["nvidia_device_plugin"]}
# a value of the wrong type for each argument spec type: Ansible's validator would convert most of them quietly
WRONG_TYPE = {"bool": "maybe", "int": "ten", "list": "a,b", "dict": "key=value", "str": ["a", "list"],
              "path": ["a", "list"]}
# values of the right type that cannot work, for inputs whose type alone lets anything through
WRONG_VALUE = {
    "gpu_node_verify_pod_smoke_namespace": "Kube_System",
    "gpu_sharing_stacks_namespace": "-stacks",
    "nvidia_mig_device_plugin_namespace": "a" * 64,
    "gpu_node_verify_timeout": 0,
    "gpu_node_verify_pod_smoke_timeout": -5,
    "nvidia_driver_reboot_timeout": 900000,
    "kube_scheduler_extender_health_timeout": 0,
    "gpu_sharing_stacks_dra_resource_api": "v2",
    "gpu_node_labels_extra": {"nvidia.com/gpu.product": "H100"},
    "gpu_node_verify_extra_labels": {"accelerator": "a100"},
    "gpu_node_verify_waived_checks": ["pod_smok"],
    "gpu_sharing_stacks_registry_mirror": "https://mirror.example.com",
    "nvidia_driver_debian_mirror": "deb.debian.org/debian",
    "nvidia_driver_cuda_repo_base_url": "ftp//developer.download.nvidia.com",
    "nvidia_container_toolkit_repo_base_url": "nvidia.github.io",
    "nvidia_container_toolkit_gpg_key_fingerprint": "C95B321B",
    "gpu_sharing_stacks_device_plugin_replicas": 0,
    "nvidia_driver_package_throttle": -1,
    "nvidia_driver_branch": "latest",
    "kube_scheduler_extender_node_ip": "10.0.0",
    "kube_scheduler_extender_systemd_unit": "kube-scheduler",
    "kube_scheduler_extender_kubeadm_manifest": "etc/kubernetes/manifests/kube-scheduler.yaml",
    "nvidia_container_runtime_containerd_config": "config.toml",
    "gpu_node_verify_smoke_image": "ubuntu 24.04",
    "gpu_sharing_stacks_secondary_scheduler_name": "GPU_Scheduler",
    "gpu_node_labels_kubectl": "kubectl --context prod",
    "gpu_node_verify_kubeconfig": "admin.conf",
    "nvidia_driver_version": "latest",
    "cuda_toolkit_version": "twelve",
    "gpu_sharing_stacks_kubernetes_version": "1.12.0",
    "gpu_node_verify_mig_layout": "all-huge",
    "gpu_sharing_stacks_dra_feature_gates": {"DRAPartitionableDevices": "yes"},
    "kube_node_name": "GPU_Node_1",
    "kgn_task_timeout": 0,
    # a role's own wait that the task timeout (kgn_task_timeout, 1800 s by default) would cut short
    "nvidia_mig_drain_timeout": 3600,
}


def _options():
    options = {}
    for spec in sorted((TOP / "roles").glob("*/meta/argument_specs.yml")):
        options.update(yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"])
    return options


def _cases():
    cases = []
    for name, option in _options().items():
        kind = option.get("type", "str")
        if kind in WRONG_TYPE:
            cases.append((name, WRONG_TYPE[kind]))
        elif option.get("choices"):
            cases.append((name, "not-a-choice"))
    cases += list(WRONG_VALUE.items())
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def validate_output(tmp_path_factory):
    folder = tmp_path_factory.mktemp("every-input")
    hosts = {f"bad-{i:03d}": {**GOOD, name: value} for i, (name, value) in enumerate(CASES)}
    inventory = {"all": {"children": {"kube_control_plane": {"hosts": {}}, "gpu_nodes": {"hosts": hosts}}}}
    (folder / "hosts.yml").write_text(yaml.safe_dump(inventory))
    run = subprocess.run(["ansible-playbook", "-i", str(folder / "hosts.yml"), "playbooks/validate.yml"],
                         cwd=TOP, capture_output=True, text=True, timeout=600, check=False)
    return run


def test_the_first_play_refuses_and_touches_no_host(validate_output):
    assert validate_output.returncode != 0
    assert "Fix the inventory, nothing was changed" in validate_output.stdout
    recap = validate_output.stdout.split("PLAY RECAP", 1)[1].splitlines()[1:]
    assert [line.split()[0] for line in recap if line.strip()] == ["localhost"], recap


@pytest.mark.parametrize(("index", "name", "value"), [(i, n, v) for i, (n, v) in enumerate(CASES)],
                         ids=[f"{n}={v!r}"[:80] for n, v in CASES])
def test_each_wrong_value_is_named_by_its_variable(validate_output, index, name, value):
    host = f"bad-{index:03d}"
    said = [line for line in validate_output.stdout.replace("\\n", "\n").splitlines()
            if line.lstrip().startswith(f"{host}: ")]
    assert any(name in line for line in said), (host, name, value, said)
