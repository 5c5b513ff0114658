"""playbooks/render.yml on the OKE example inventory (managed control plane: kube_control_plane is empty).

The cluster-level manifests are rendered under render_dir/localhost/ (no control-plane host to render
under), with the second kube-scheduler that carries the elastic-gpu extender; turning it off is refused
by the validate play before anything is written.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from playbook_runner import run_playbook

TOP = Path(__file__).resolve().parents[2]
OKE = "inventories/examples/oke-elastic-gpu"
STACKS = "localhost/var/tmp/kube-gpu-nodes/stacks"  # gpu_sharing_stacks_manifest_dir of the OKE inventory


def _render(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_playbook("playbooks/render.yml", "-i", OKE, "-e", f"render_dir={out}", *extra)


def test_oke_renders_the_second_scheduler_with_the_elastic_gpu_extender(tmp_path):
    result = _render(tmp_path)
    assert result.returncode == 0, result.stdout[-4000:]
    stacks = tmp_path / STACKS
    assert sorted(p.name for p in (stacks / "elastic_gpu").iterdir())[0] == "agent.yml"
    [config_map] = yaml.safe_load_all((stacks / "secondary_scheduler/config.yml").read_text())
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"  # kubernetes_version 1.25.4
    assert [e["urlPrefix"] for e in config["extenders"]] == [
        "http://elastic-gpu-scheduler.kube-system.svc:39999/scheduler"]
    assert config["profiles"] == [{"schedulerName": "kgn-gpu-scheduler"}]
    [deployment] = yaml.safe_load_all((stacks / "secondary_scheduler/deployment.yml").read_text())
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/kube-scheduler:v1.25.4"
    # labelled as the project's, so that it is removed once no extender stack needs it
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kube-gpu-nodes"
    assert deployment["metadata"]["labels"]["kube-gpu-nodes.io/stack"] == "secondary_scheduler"
    plan = json.loads((tmp_path / "localhost/_plan/stacks.json").read_text())
    assert plan["stacks"] == ["elastic_gpu"] and plan["secondary"]["enabled"] is True


def test_oke_without_the_second_scheduler_is_refused_before_anything_is_written(tmp_path):
    result = _render(tmp_path, "-e", '{"gpu_sharing_stacks_secondary_scheduler": false}')
    assert result.returncode != 0
    assert "stack elastic_gpu needs a kube-scheduler extender" in result.stdout
    assert "set gpu_sharing_stacks_secondary_scheduler to auto or true" in result.stdout
    assert not any(tmp_path.rglob("*.yml"))


def test_a_boolean_given_as_text_is_refused_with_how_to_write_it(tmp_path):
    """`-e name=false` gives the text "false", which the setting's choices (auto, true, false) do not hold."""
    result = _render(tmp_path, "-e", "gpu_sharing_stacks_secondary_scheduler=false")
    assert result.returncode != 0
    assert "gpu_sharing_stacks_secondary_scheduler is the text 'false'" in result.stdout
    assert not any(tmp_path.rglob("*.yml"))
