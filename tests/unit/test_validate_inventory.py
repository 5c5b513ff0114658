"""site.yml refuses bad inventory values before it touches any host.

Runs the real ansible-playbook against the lab inventory with one bad value at a time. The lab
containers need not exist: a correct run never contacts them, which is what the recap proves.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "scripts"))
recap = __import__("check-recap").recap


def run_site(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "site.yml", *extra],
        cwd=TOP,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("extra_vars", "must_say"),
    [
        ("kubernetes_version=latest", ["kubernetes_version", "'latest'", "1.23.1"]),
        ("kubernetes_version=1.x", ["kubernetes_version", "'1.x'"]),
        ("kubernetes_version=1.99.0", ["kubernetes_version", "1.99"]),
        ("container_runtime=podman", ["container_runtime is 'podman'", "auto, docker, containerd, crio"]),
        ("kube_scheduler_style=static", ["kube_scheduler_style is 'static'", "auto, kubeadm, systemd"]),
        ('{"gpu_sharing_stacks": ["gpushare", "hamy"]}', ["unknown stack(s) 'hamy'", "gpushare"]),
        ('{"gpu_sharing_stacks": null}', ["gpu_sharing_stacks is empty", "write []"]),
        # one node, two device plugins that each claim every GPU: the message names both and the choices
        ('{"gpu_sharing_stacks": ["hami", "gpushare"]}',
         ["stacks hami and gpushare both claim every GPU of the node", "keep one stack per node",
          "gpu_sharing_stacks per host in host_vars", "nvidia_device_plugin's time-slicing/MPS sharing"]),
        # nvidia_dra: Kubernetes 1.31 and older, a device plugin on the same node, a node whose runtime has no CDI
        ('{"gpu_sharing_stacks": ["nvidia_dra"], "kubernetes_version": "1.31.4"}',
         ["nvidia_dra needs Kubernetes 1.32 or newer, but kubernetes_version is 1.31.4", "alpha before 1.32"]),
        ('{"gpu_sharing_stacks": ["nvidia_dra", "nvidia_device_plugin"], "kubernetes_version": "1.34.1"}',
         ["nvidia_dra and nvidia_device_plugin would both hand out this node's GPUs", "nvidia_dra_switch.yml"]),
        ('{"gpu_sharing_stacks": ["nvidia_dra"], "kubernetes_version": "1.34.1", "container_runtime": "containerd", '
         '"kgn_observed_container_runtime": {"versions": {"containerd": "1.6.20"}}}',
         ["nvidia_dra needs CDI", "runtime mode is legacy", "nvidia_container_runtime_mode to cdi"]),
        # NVIDIA_VISIBLE_DEVICES refused where a stack hands GPUs out by nothing else (docs/isolation.md)
        ("kgn_gpu_envvar_unprivileged=refuse",
         ["kgn-gpu-docker: kgn_gpu_envvar_unprivileged is refuse, but gpushare's device plugin hands each pod its GPU "
          "by NVIDIA_VISIBLE_DEVICES only", "Set kgn_gpu_envvar_unprivileged to auto"]),
        ("kgn_gpu_envvar_unprivileged=closed", ["kgn_gpu_envvar_unprivileged is 'closed'", "auto, refuse, accept"]),
        # the device plugin deployed from the API host hands GPUs out by the variable, which the node refuses
        ("gpu_sharing_stacks_envvar_unprivileged=accept",
         ["kgn-gpu-containerd: refuses NVIDIA_VISIBLE_DEVICES from unprivileged containers, but the device plugin",
          "deployed from kgn-cp-kubeadm"]),
        ("kubernetes_verison=1.23.1", ["kubernetes_verison is not a variable", "did you mean kubernetes_version"]),
        ("nvidia_container_runtime_enigne=docker", ["did you mean nvidia_container_runtime_engine"]),
        ("device_plugin_sharing=timeslicing", ["accepted values: none, time-slicing, mps"]),
        # label values are checked in the first play, not after the driver, toolkit and scheduler plays ran
        ('{"gpu_node_labels_extra": {"team": "$(touch /tmp/pwned)"}}',
         ["gpu_node_labels_extra: value '$(touch /tmp/pwned)' of 'team' is not a valid label value"]),
        ('{"gpu_node_labels_extra": {"kubernetes.io/team": "ml"}}',
         ["'kubernetes.io/team' uses the prefix kubernetes.io/", "reserved for Kubernetes core components"]),
        ("gpu_node_labels_node_name=GPU_Node_1", ["gpu_node_labels_node_name is 'GPU_Node_1'", "RFC 1123"]),
        ("gpu_sharing_stacks_namespace=Kube_System", ["gpu_sharing_stacks_namespace is 'Kube_System'"]),
        ("kube_scheduler_extender_node_ip=10.0.0.300", ["kube_scheduler_extender_node_ip is '10.0.0.300'"]),
    ],
)
def test_bad_value_stops_site_before_any_host(extra_vars, must_say):
    result = run_site("-e", extra_vars)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for text in must_say:
        assert text in output, f"{text!r} missing from:\n{output}"
    assert "nothing was changed" in output
    assert set(recap(result.stdout)) == {"localhost"}, "a host other than the control machine was contacted"


def test_float_version_is_refused_with_a_quoting_hint():
    result = run_site("-e", '{"kubernetes_version": 1.2}')
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "quote it" in output
