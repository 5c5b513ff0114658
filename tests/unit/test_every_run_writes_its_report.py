"""Every run writes its report, also when Ansible ends the run before the report play.

A one-node fleet whose node fails: Ansible ends a run once every host of a play failed, so the report play of
playbooks/report.yml never runs; the kgn.gpu_nodes.run_failures callback (enabled in ansible.cfg) writes the same
report, with the node's row: why it stopped and what it recorded before. The run's exit code still says it failed.
The node is this machine (connection local); nothing is changed on it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]

PLAYBOOK = """
- name: Install the NVIDIA driver
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Record what the driver play saw (as the driver module does)
      ansible.builtin.set_fact:
        kgn_state_nvidia_driver:
          plan: {version_package: nvidia-driver}
          live: {packages: {nvidia-driver: "535.261.03-1"}, gpu: {gpu_present: false}}
          changed: false
    - name: Fail the way a broken node fails
      ansible.builtin.fail:
        msg: dpkg was interrupted, you must manually run 'dpkg --configure -a'

- name: Judge every host and write the report
  ansible.builtin.import_playbook: {top}/playbooks/report.yml
"""


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "inventory.yml").write_text(
        "all:\n  vars:\n    gpu_node_verify_report_dir: " + str(tmp_path / "reports") + "\n"
        "    kubernetes_version: '1.30.4'\n    gpu_sharing_stacks: []\n"
        "  children:\n    kube_control_plane: {hosts: {}}\n"
        "    gpu_nodes:\n      hosts:\n        gpu1:\n          ansible_connection: local\n"
        # an older run's state, as the fact cache would hold it: not this run's, so not judged
        "          kgn_state_container_runtime: {plan: {engine: docker}, live: {answered: true}}\n")
    (tmp_path / "site.yml").write_text(PLAYBOOK.replace("{top}", str(TOP)))
    return subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "site.yml"),
                           *extra], cwd=TOP, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize(("extra", "link"), [((), "latest"), (("--check",), "latest-check")])
def test_a_one_node_fleet_whose_node_fails_still_gets_its_report(tmp_path, extra, link):
    done = _run(tmp_path, *extra)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    assert "Write the GPU node report" not in done.stdout  # Ansible ended the run before the report play
    assert "The report of this run, every host's row with what it gathered" in out, out[-3000:]
    report = json.loads((tmp_path / "reports" / link / "report.json").read_text())
    assert not (tmp_path / "reports" / ("latest-check" if link == "latest" else "latest")).exists()
    (row,) = report["rows"]
    checks = {check["id"]: check for check in row["checks"]}
    assert row["host"] == "gpu1" and row["verdict"] == "failed"
    assert checks["host_reached"]["status"] == "failed"
    assert "dpkg was interrupted" in checks["host_reached"]["summary"]
    assert checks["host_reached"]["diagnosis"][0]["id"] == "host_failed"
    # what it gathered before it stopped, not "?"; only what this run recorded
    assert row["driver"] == "535.261.03-1 (installed, not loaded)"
    assert row["runtime"] == "not recorded"
    assert report["meta"]["written_by"].startswith("the run_failures callback")
