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


import pytest  # noqa: E402  (after the collection is on sys.path)


@pytest.fixture(autouse=True)
def _node_caches(tmp_path_factory, monkeypatch):
    """The modules' caches on a node (/var/lib/kgn) go to a folder of the test's own: a test run never writes to
    this machine's /var/lib, and no test sees what another one cached."""
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import pkghealth

    folder = tmp_path_factory.mktemp("var-lib-kgn")
    monkeypatch.setattr(pkghealth, "VERIFY_CACHE", str(folder / "dpkg-verify.json"))
    monkeypatch.setattr(pkghealth, "APT_CHECK_CACHE", str(folder / "apt-check.json"))
