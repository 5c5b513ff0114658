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
