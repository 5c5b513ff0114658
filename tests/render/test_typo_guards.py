"""One typo guard for every role: the first play (playbooks/validate.yml, also first in the render) reads each
role's argument spec and refuses a misspelt input before any host is touched, whichever host carries it.

The typo sits on the second host here; the inventory's hosts do not exist, so a run that got past the first
play would fail to connect: the recap proves nothing else ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from playbook_runner import TOP, run_playbook

sys.path.insert(0, str(TOP / "scripts"))
recap = __import__("check-recap").recap

ROLES = sorted(p.parent.parent.name for p in (TOP / "roles").glob("*/meta/argument_specs.yml"))


def test_every_role_is_covered():
    assert len(ROLES) == 9, ROLES


@pytest.mark.parametrize("playbook", ["site.yml", "playbooks/render.yml"])
@pytest.mark.parametrize("role", ROLES)
def test_a_misspelt_input_on_any_host_stops_the_run_in_the_first_play(tmp_path: Path, role: str, playbook: str):
    typo = f"{role}_no_such_input"
    host = {"ansible_host": "192.0.2.1", "kubernetes_version": "1.30.4"}  # TEST-NET-1: never answers
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"children": {
        "kube_control_plane": {"hosts": {"cp": host}},
        "gpu_nodes": {"hosts": {"first": host, "second": {**host, typo: True}}},
    }}}))
    result = run_playbook("-i", str(tmp_path / "hosts.yml"), playbook, "-e", f"render_dir={tmp_path / 'out'}",
                          timeout=300)
    assert result.returncode != 0, result.stdout[-3000:]
    assert f"second: {typo} is not an input of the {role} role" in result.stdout, result.stdout[-3000:]
    assert set(recap(result.stdout)) == {"localhost"}, "a host other than the control machine was reached"
