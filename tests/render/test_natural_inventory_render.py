"""A render from the inventory a user writes first (the README's shape, nothing more), decided the way the run
decides: the first play reads each role input with the role's own default, as the roles do.

nvidia_dra on a containerd 2.1 node whose inventory records its engine version and leaves the toolkit pin at the
role's default: the first play must conclude CDI (containerd 2.1 and the default toolkit 1.20.0 both support it),
not "no toolkit version known, so legacy", and the render must write the CDI plan and the stack.
"""

from __future__ import annotations

import json

import pytest
from playbook_runner import run_playbook, says

INVENTORY = """
all:
  children:
    kube_control_plane:
      hosts:
        cp-1: {ansible_host: 192.0.2.10}
    gpu_nodes:
      hosts:
        gpu-1:
          ansible_host: 192.0.2.11
          container_runtime: containerd
          kgn_observed_container_runtime:
            versions: {containerd: "2.1.4"}
  vars:
    kubernetes_version: "1.34.2"
    gpu_sharing_stacks: [nvidia_dra]
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("natural")
    (folder / "hosts.yml").write_text(INVENTORY)
    run = run_playbook("playbooks/render.yml", "-i", str(folder / "hosts.yml"), "-e", f"render_dir={folder / 'out'}")
    return run, folder / "out"


def test_the_first_play_accepts_nvidia_dra_with_the_default_toolkit_pin(rendered):
    run, _ = rendered
    assert not says(run.stdout, "Fix the inventory"), run.stdout[-3000:]
    assert not says(run.stdout, "nvidia_dra needs CDI"), run.stdout[-3000:]


def test_the_runtime_plan_is_cdi_from_the_role_defaults(rendered):
    _, out = rendered
    plan = json.loads((out / "gpu-1/_plan/container_runtime.json").read_text())
    assert plan["runtime_mode"] == "cdi"
    assert plan["runtime_mode_why"] == "containerd 2.1.4 and container toolkit 1.20.0 support CDI (auto)"


def test_the_dra_stack_is_rendered(rendered):
    _, out = rendered
    stack = out / "cp-1/etc/kubernetes/kube-gpu-nodes/stacks/nvidia_dra"
    assert (stack / "kubelet-plugin.yml").is_file() and (stack / "device-classes.yml").is_file()
