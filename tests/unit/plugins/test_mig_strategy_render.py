"""The device plugin's migStrategy in every nvidia_device_plugin template: MIG_STRATEGY (v0.12+ env),
--mig-strategy (v0.9-v0.11 argument) and migStrategy (the v0.12+ config file), per strategy; the refusals."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stacks_plan

TEMPLATES = Path(__file__).resolve().parents[3] / "roles" / "gpu_sharing_stacks" / "templates"


def _render(**inputs):
    plan = stacks_plan({"kubernetes_version": "1.30.4", "stacks": ["nvidia_device_plugin"], **inputs})
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined)
    env.filters["comment"] = lambda text: f"# {text}"
    docs = {}
    for manifest in plan["manifests"]:
        text = env.get_template(manifest["template"]).render(plan=plan, ansible_managed="managed")
        doc = yaml.safe_load(text)
        docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return plan, docs


def _container(docs):
    return docs[("DaemonSet", "nvidia-device-plugin-daemonset")]["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_v012_env(strategy):
    plan, docs = _render(mig_strategy=strategy)
    assert plan["mig_strategy"] == strategy
    env = {e["name"]: e["value"] for e in _container(docs)["env"]}
    assert env["MIG_STRATEGY"] == strategy


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_v09_argument(strategy):
    _, docs = _render(mig_strategy=strategy, device_plugin_release="v0.11.0")
    # NVIDIA_VISIBLE_DEVICES is refused by default: the plugin hands GPUs out by volume mounts (docs/isolation.md)
    assert _container(docs)["args"] == ["--fail-on-init-error=false", f"--mig-strategy={strategy}",
                                        "--device-list-strategy=volume-mounts"]


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_config_file_with_time_slicing(strategy):
    _, docs = _render(mig_strategy=strategy, sharing="time-slicing")
    config = yaml.safe_load(docs[("ConfigMap", "nvidia-device-plugin-config")]["data"]["config.yaml"])
    assert config["flags"]["migStrategy"] == strategy


def test_config_file_with_mps_and_no_mig():
    _, docs = _render(mig_strategy="none", sharing="mps")
    config = yaml.safe_load(docs[("ConfigMap", "nvidia-device-plugin-config")]["data"]["config.yaml"])
    assert config["flags"]["migStrategy"] == "none"


@pytest.mark.parametrize("inputs, words", [
    ({"mig_strategy": "mixd"}, "is .mixd.; accepted: none, single, mixed"),
    ({"mig_strategy": "single", "sharing": "mps"}, "MPS sharing does not run on MIG devices"),
])
def test_refused(inputs, words):
    with pytest.raises(KgnError, match=words):
        _render(**inputs)
