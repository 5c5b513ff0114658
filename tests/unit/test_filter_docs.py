"""Every filter of the collection has a sidecar plugins/filter/<name>.yml that parses and documents it.

This is the pytest twin of the `ansible-doc -t filter -l` gate (no UNDOCUMENTED filter), and it also checks
what ansible-doc does not: EXAMPLES parse as YAML and use the filter, RETURN has _value, the name matches.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FILTER_FILES = sorted(ROOT.glob("plugins/filter/*.py"))


def registered_filters() -> list[tuple[Path, str]]:
    """(file, filter name) for every filter every FilterModule registers."""
    found = []
    for path in FILTER_FILES:
        module = importlib.import_module(f"ansible_collections.kgn.gpu_nodes.plugins.filter.{path.stem}")
        found.extend((path, name) for name in module.FilterModule().filters())
    return found


FILTERS = registered_filters()


def test_filters_are_found():
    names = [name for _, name in FILTERS]
    assert "scheduler_config" in names and "version" in names
    assert len(names) == len(set(names)), "two files register the same filter name"


@pytest.mark.parametrize(("source", "name"), FILTERS, ids=[name for _, name in FILTERS])
def test_every_filter_has_parsing_sidecar_docs(source, name):
    source = source.relative_to(ROOT)
    sidecar = source.parent / f"{name}.yml"
    assert sidecar.is_file(), f"{source}: filter {name} has no sidecar {sidecar.name}"
    docs = yaml.safe_load(sidecar.read_text())
    assert set(docs) >= {"DOCUMENTATION", "EXAMPLES", "RETURN"}, f"{sidecar.name}: missing sections"
    documentation = docs["DOCUMENTATION"]
    assert documentation["name"] == name
    assert documentation.get("short_description")
    assert documentation.get("description")
    assert "_input" in documentation.get("options", {}), f"{sidecar.name}: no _input option"
    assert isinstance(docs["EXAMPLES"], str), f"{sidecar.name}: EXAMPLES must be a YAML text block (EXAMPLES: |)"
    assert yaml.safe_load(docs["EXAMPLES"]), f"{sidecar.name}: EXAMPLES do not parse as YAML"
    assert f"kgn.gpu_nodes.{name}" in docs["EXAMPLES"], f"{sidecar.name}: EXAMPLES never use the filter by FQCN"
    assert "_value" in docs["RETURN"], f"{sidecar.name}: RETURN has no _value"
    assert docs["RETURN"]["_value"].get("type")
