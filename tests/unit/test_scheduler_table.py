"""docs/scheduler-versions.md carries exactly the table scripts/gen-scheduler-table.py generates from the filter."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_scheduler_table", ROOT / "scripts" / "gen-scheduler-table.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def test_committed_table_equals_the_generated_one():
    text = gen.DOC.read_text()
    assert gen.render(text) == text, "docs/scheduler-versions.md is stale: run scripts/gen-scheduler-table.py"


def test_table_has_one_row_per_minor_from_1_16_to_1_37():
    rows = gen.table().splitlines()[2:]
    assert [row.split("|")[1].strip() for row in rows] == [f"1.{m}" for m in range(16, 38)]
    assert "| 1.22 | KubeSchedulerConfiguration | `kubescheduler.config.k8s.io/v1beta2` | `--config` |" in gen.table()
    assert "| 1.18 | Policy | `v1` | `--policy-config-file` |" in gen.table()
