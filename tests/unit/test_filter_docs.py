"""Every registered kgn_* filter has a sidecar <name>.yml next to its file that parses and documents it.

Covers every filter_plugins/*.py.

This is the pytest twin of the `ansible-doc -t filter -l` gate (no UNDOCUMENTED filter), and it also checks
what ansible-doc does not: EXAMPLES parse as YAML and use the filter, RETURN has _value, the name matches.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FILTER_FILES = sorted(ROOT.glob("filter_plugins/*.py"))


def registered_filters() -> list[tuple[Path, str]]:
    """(file, filter name) for every filter every FilterModule registers."""
    found = []
    for path in FILTER_FILES:
        spec = importlib.util.spec_from_file_location(f"kgn_doccheck_{path.parent.parent.name}_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.extend((path, name) for name in module.FilterModule().filters())
    return found


FILTERS = registered_filters()


def test_filters_are_found():
    names = [name for _, name in FILTERS]
    assert "kgn_scheduler_config" in names and "kgn_version" in names
    assert len(names) == len(set(names)), "two files register the same filter name"


@pytest.mark.parametrize(("source", "name"), FILTERS, ids=[name for _, name in FILTERS])
def test_every_filter_has_parsing_sidecar_docs(source, name):
    source = source.relative_to(ROOT)
    assert name.startswith("kgn_"), f"{source}: filter {name} lacks the project prefix kgn_"
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
    assert name in docs["EXAMPLES"], f"{sidecar.name}: EXAMPLES never use the filter"
    assert "_value" in docs["RETURN"], f"{sidecar.name}: RETURN has no _value"
    assert docs["RETURN"]["_value"].get("type")
