"""Every test imports the project as the collection kgn.gpu_nodes (scripts/setup.sh links the checkout
into collections/ansible_collections/kgn/gpu_nodes)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECTIONS = ROOT / "collections"
if not (COLLECTIONS / "ansible_collections" / "kgn" / "gpu_nodes" / "galaxy.yml").is_file():
    raise SystemExit("collections/ansible_collections/kgn/gpu_nodes is missing: run scripts/setup.sh first")
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
