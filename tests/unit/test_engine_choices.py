"""The engines are listed once in code (runtime.RUNTIMES); every place that must spell them out for Ansible
(the role's argument spec, the module's and the filter's documentation) is checked against it."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import contract
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime
from ansible_collections.kgn.gpu_nodes.plugins.modules import nvidia_container_runtime as container_runtime

ROOT = Path(__file__).resolve().parents[2]
CHOICES = ["auto", *runtime.RUNTIMES]


def test_the_contract_takes_the_engines_from_code():
    assert contract.CONTRACT["container_runtime"]["choices"] == CHOICES


def test_the_role_spec_and_the_docs_spell_the_same_engines():
    spec = yaml.safe_load((ROOT / "roles/nvidia_container_runtime/meta/argument_specs.yml").read_text())
    assert spec["argument_specs"]["main"]["options"]["nvidia_container_runtime_engine"]["choices"] == CHOICES
    assert yaml.safe_load(container_runtime.DOCUMENTATION)["options"]["engine"]["choices"] == CHOICES
    doc = yaml.safe_load((ROOT / "plugins/filter/container_runtime_choice.yml").read_text())
    assert doc["DOCUMENTATION"]["options"]["requested"]["choices"] == CHOICES
