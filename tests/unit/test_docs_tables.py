"""The README's contract table and the role READMEs' variable tables equal what the code accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_tables_are_committed():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-docs-tables.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def _role_inputs():
    import yaml

    for role in sorted((ROOT / "roles").iterdir()):
        defaults = role / "defaults" / "main.yml"
        if not defaults.exists():
            continue
        values = yaml.safe_load(defaults.read_text()) or {}
        spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
        yield role.name, values, spec


def test_every_role_default_is_a_typed_input_with_the_same_default():
    """One source per default: defaults/main.yml, with argument_specs.yml saying the same (a templated default is
    the spec's empty value or omitted there: it is computed at run time)."""
    problems = []
    for role, values, spec in _role_inputs():
        for name in sorted(set(values) ^ set(spec)):
            problems.append(f"{role}: {name} is in {'defaults' if name in values else 'argument_specs'} only")
        for name in sorted(set(values) & set(spec)):
            value, declared = values[name], spec[name].get("default")
            if isinstance(value, str) and "{{" in value:
                continue
            if "default" in spec[name] and declared != value:
                problems.append(f"{role}: {name} defaults to {value!r}, its argument spec says {declared!r}")
    assert problems == []
