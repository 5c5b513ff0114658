"""Every role rejects a misspelt input before its first change, whichever host of the play carries it.

The guards run once per play (issue 9: one task per play instead of one per host), so they must look
at every play host's variables, not only the first host's. The typo sits on the second host here.
Each role's main entry point runs on localhost with a local connection, in check mode so that even a
broken guard changes nothing on the test machine; the guard is the first task after the argument
spec check and fails in check mode too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playbook_runner import run_playbook

ROLES = [
    "cuda_toolkit",
    "gpu_node_labels",
    "gpu_node_verify",
    "gpu_sharing_stacks",
    "kube_scheduler_extender",
    "nvidia_container_runtime",
    "nvidia_container_toolkit",
    "nvidia_driver",
]

PLAY = """
- name: Apply {role}
  hosts: all
  gather_facts: false
  tasks:
    - name: Run the role
      ansible.builtin.include_role:
        name: {role}
"""


@pytest.mark.parametrize("role", ROLES)
def test_a_misspelt_input_on_any_play_host_stops_the_role(tmp_path: Path, role: str):
    typo = f"{role}_no_such_input"
    # kubernetes_version: what the inventory contract requires of every host (validate.yml)
    local = {"ansible_connection": "local", "kubernetes_version": "1.30.4"}
    (tmp_path / "hosts.yml").write_text(json.dumps(
        {"all": {"hosts": {"first": local, "second": {**local, typo: True}}}}
    ))
    (tmp_path / "play.yml").write_text(PLAY.format(role=role))
    result = run_playbook("-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "--check",
                          timeout=300)
    assert result.returncode != 0, result.stdout[-3000:]
    assert typo in result.stdout, result.stdout[-3000:]
    assert "changed=0" in result.stdout and "changed=1" not in result.stdout, result.stdout[-3000:]
