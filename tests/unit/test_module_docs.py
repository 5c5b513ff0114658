"""Every module in plugins/modules/ documents itself: ansible-doc parses DOCUMENTATION, EXAMPLES, RETURN."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py"))


def test_collection_has_modules():
    assert MODULES, "plugins/modules/ has no modules"


@pytest.mark.parametrize("module", MODULES)
def test_module_documentation_parses(module):
    argv = ["ansible-doc", "-t", "module", "--json", f"kgn.gpu_nodes.{module}"]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)[f"kgn.gpu_nodes.{module}"]
    assert doc["doc"]["short_description"]
    assert doc["doc"]["options"] is not None
    assert doc["examples"].strip(), f"{module} has no EXAMPLES"
    assert doc["return"], f"{module} has no RETURN"
