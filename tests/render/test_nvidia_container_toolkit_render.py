"""The nvidia_container_toolkit render entry point for the rpm family (no RHEL node runs here).

Renders NVIDIA's .repo file for each repository era, through a mirror, and the apt source for deb,
then parses them. The apply path writes the .repo file from the same template (checked below), so what
is rendered here is what dnf/yum read on a node. Sections and settings are those of NVIDIA's own files:
NVIDIA/libnvidia-container gh-pages stable/rpm/nvidia-container-toolkit.repo (>= 1.14) and
centos7/libnvidia-container.repo (1.6-1.13), NVIDIA/nvidia-docker gh-pages centos7/nvidia-docker.repo (< 1.6).
"""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
import yaml
from playbook_runner import render_role

ROLE = Path(__file__).resolve().parents[2] / "roles/nvidia_container_toolkit"
REPO_FILE = "etc/yum.repos.d/nvidia-container-toolkit.repo"
APT_LIST = "etc/apt/sources.list.d/nvidia-container-toolkit.list"
NV = "https://nvidia.github.io"
MIRROR = "http://mirror.local/nvidia"

HOSTS = {
    "el-stable": {"nvidia_container_toolkit_render_family": "rpm", "nvidia_container_toolkit_version": "1.14.6"},
    "el-libnvidia": {
        "nvidia_container_toolkit_render_family": "rpm",
        "nvidia_container_toolkit_version": "1.13.5",
        "nvidia_container_toolkit_repo_distribution": "centos7",
    },
    "el-nvidia-docker-mirror": {
        "nvidia_container_toolkit_render_family": "rpm",
        "nvidia_container_toolkit_version": "1.5.1",
        "nvidia_container_toolkit_repo_distribution": "centos7",
        "nvidia_container_toolkit_repo_base_url": MIRROR + "/",
    },
    "el-stable-mirror": {
        "nvidia_container_toolkit_render_family": "rpm",
        "nvidia_container_toolkit_repo_base_url": MIRROR,
    },
    "el-no-repo": {"nvidia_container_toolkit_render_family": "rpm", "nvidia_container_toolkit_repo_enabled": False},
    "deb-default": {},
}
@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    inventory = {"all": {"vars": {"ansible_connection": "local"}, "hosts": HOSTS}}
    return render_role(tmp_path_factory.mktemp("render"), "nvidia_container_toolkit", inventory)


def repo_sections(path: Path) -> dict[str, dict[str, str]]:
    """The .repo file as yum/dnf read it: INI sections, no interpolation ($basearch stays as written)."""
    parser = configparser.RawConfigParser()
    parser.read_string(path.read_text())
    return {section: dict(parser[section]) for section in parser.sections()}


def nvidia_section(repo_id: str, baseurl: str, gpgkey: str) -> dict[str, str]:
    return {
        "name": repo_id,
        "baseurl": baseurl,
        "repo_gpgcheck": "1",
        "gpgcheck": "0",
        "enabled": "1",
        "gpgkey": gpgkey,
    }


def test_stable_era_is_the_distribution_independent_rpm_repository(rendered):
    assert repo_sections(rendered / "el-stable" / REPO_FILE) == {
        "nvidia-container-toolkit": nvidia_section(
            "nvidia-container-toolkit",
            f"{NV}/libnvidia-container/stable/rpm/$basearch",
            f"{NV}/libnvidia-container/gpgkey",
        )
    }
    assert not (rendered / "el-stable/etc/apt").exists()


def test_libnvidia_container_era_uses_the_distribution_path(rendered):
    assert repo_sections(rendered / "el-libnvidia" / REPO_FILE) == {
        "libnvidia-container": nvidia_section(
            "libnvidia-container", f"{NV}/libnvidia-container/centos7/$basearch", f"{NV}/libnvidia-container/gpgkey"
        )
    }


def test_nvidia_docker_era_has_three_repositories_each_with_its_key_under_the_mirror(rendered):
    text = (rendered / "el-nvidia-docker-mirror" / REPO_FILE).read_text()
    assert "nvidia.github.io" not in text
    assert repo_sections(rendered / "el-nvidia-docker-mirror" / REPO_FILE) == {
        repo: nvidia_section(repo, f"{MIRROR}/{repo}/centos7/$basearch", f"{MIRROR}/{repo}/gpgkey")
        for repo in ("libnvidia-container", "nvidia-container-runtime", "nvidia-docker")
    }


def test_mirror_base_url_replaces_nvidia_github_io(rendered):
    (section,) = repo_sections(rendered / "el-stable-mirror" / REPO_FILE).values()
    assert section["baseurl"] == f"{MIRROR}/libnvidia-container/stable/rpm/$basearch"
    assert section["gpgkey"] == f"{MIRROR}/libnvidia-container/gpgkey"


def test_repo_disabled_renders_no_repository_file(rendered):
    assert not (rendered / "el-no-repo" / REPO_FILE).exists()


def test_deb_stays_the_default_family(rendered):
    lines = [line for line in (rendered / "deb-default" / APT_LIST).read_text().splitlines() if line[:1] != "#"]
    assert lines == [
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        f"{NV}/libnvidia-container/stable/deb/$(ARCH) /"
    ]
    assert not (rendered / "deb-default/etc/yum.repos.d").exists()


def test_apply_and_render_write_the_repo_file_from_one_template():
    def template_tasks(name: str) -> list[dict]:
        tasks = yaml.safe_load((ROLE / "tasks" / name).read_text())
        return [task["ansible.builtin.template"] for task in tasks if "ansible.builtin.template" in task]

    (apply,) = template_tasks("repository_rpm.yml")
    render = [task for task in template_tasks("render.yml") if task["dest"].endswith(".yum_repo_file }}")]
    assert [task["src"] for task in render] == [apply["src"]] == ["nvidia-container-toolkit.repo.j2"]
    assert apply["dest"] == "{{ __nvidia_container_toolkit_layout.yum_repo_file }}"
