"""The commented example inventory names only variables that exist: a user uncommenting a line must
get the setting it describes, not a typo-guard failure or a silently ignored name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLE_INPUTS = {
    name
    for defaults in ROOT.glob("roles/*/defaults/main.yml")
    for name in (yaml.safe_load(defaults.read_text(encoding="utf-8")) or {})
}
# The inventory contract (README) and groups; everything else must be a role input.
CONTRACT = {"kubernetes_version", "kube_scheduler_style", "container_runtime", "gpu_sharing_stacks"}
NAME = re.compile(r"^#?\s*([a-z][a-z0-9]*_[a-z0-9_]+):")
FILES = sorted((ROOT / "inventories" / "example" / "group_vars").rglob("*.yml"))


def test_the_example_has_group_vars():
    assert len(FILES) >= 2


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_variable_is_a_role_input_or_the_contract(path):
    names = [m[1] for line in path.read_text(encoding="utf-8").splitlines() if (m := NAME.match(line))]
    unknown = [n for n in names if n not in ROLE_INPUTS | CONTRACT and not n.startswith("ansible_")]
    assert not unknown, f"{path.relative_to(ROOT)} names variables no role has: {unknown}"
