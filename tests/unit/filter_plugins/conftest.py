"""Make filter_plugins/ and module_utils/ importable for the filter unit tests (plain project, no collection)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
for folder in ("filter_plugins", "module_utils"):
    path = str(ROOT / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
