"""Every test imports the project as the collection kgn.gpu_nodes (scripts/setup.sh links the checkout
into collections/ansible_collections/kgn/gpu_nodes; for ansible-core 2.16, into the folder that
ANSIBLE_COLLECTIONS_PATH names: .venv-2.16/collections)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECTIONS = Path(os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep)[0] or ROOT / "collections")
if not (COLLECTIONS / "ansible_collections" / "kgn" / "gpu_nodes" / "galaxy.yml").is_file():
    raise SystemExit(f"{COLLECTIONS}/ansible_collections/kgn/gpu_nodes is missing: run scripts/setup.sh first")
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
