"""The execution environment (docs/fleet.md): scripts/ee-build.sh builds the collection's archive at galaxy.yml's
version and `ansible-builder create` writes a build context whose galaxy step installs it and whose final image
gets kubectl, checked against upstream's checksum."""

import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

# the control machine's venv has it (requirements.txt); the ansible-core 2.16 compatibility venv does not
pytest.importorskip("ansible_builder")
TOP = Path(__file__).resolve().parents[2]


def test_ansible_builder_creates_the_context_with_the_collection():
    run = subprocess.run(["bash", "scripts/ee-build.sh"], cwd=TOP, capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Complete! The build context can be found at" in run.stdout
    version = yaml.safe_load((TOP / "galaxy.yml").read_text())["version"]
    archive = TOP / "ee/context/_build/collections" / f"kgn-gpu_nodes-{version}.tar.gz"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "plugins/modules/nvidia_driver.py" in names and not any(n.startswith(("ee/", "tests/")) for n in names)
    galaxy = yaml.safe_load((TOP / "ee/context/_build/requirements.yml").read_text())
    assert galaxy["collections"] == [{"name": f"collections/kgn-gpu_nodes-{version}.tar.gz", "type": "file"}]
    containerfile = (TOP / "ee/context/Dockerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile
    assert "sha256sum --check --strict" in containerfile and "dl.k8s.io/release/${KUBECTL_VERSION}" in containerfile
    pins = dict(line.split("==") for line in (TOP / "requirements.txt").read_text().splitlines() if "==" in line)
    definition = yaml.safe_load((TOP / "execution-environment.yml").read_text())["dependencies"]
    assert definition["ansible_core"]["package_pip"] == f"ansible-core=={pins['ansible-core']}"
    assert definition["ansible_runner"]["package_pip"] == f"ansible-runner=={pins['ansible-runner']}"
