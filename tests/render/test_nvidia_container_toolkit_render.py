"""The nvidia_container_toolkit render (the role with nvidia_container_toolkit_render_dir set): each host's
package family comes from its observation (kgn_observed_nvidia_container_toolkit: pkg_mgr or os_family), so deb
hosts get the apt source and rpm hosts NVIDIA's .repo file, and a host without one fails clearly.

Renders NVIDIA's .repo file for each repository era, through a mirror, and the apt source for deb, then parses
them. The module writes on a node the text the same planner (kgn.gpu_nodes toolkit_plan) gives here, so what is
rendered is what dnf/yum or apt read. Sections and settings are those of NVIDIA's own files:
NVIDIA/libnvidia-container gh-pages stable/rpm/nvidia-container-toolkit.repo (>= 1.14) and
centos7/libnvidia-container.repo (1.6-1.13), NVIDIA/nvidia-docker gh-pages centos7/nvidia-docker.repo (< 1.6).
"""

from __future__ import annotations

import configparser
import json
from pathlib import Path

import pytest
from playbook_runner import RENDER_PLAY, render_role, run_playbook, says

REPO_FILE = "etc/yum.repos.d/nvidia-container-toolkit.repo"
APT_LIST = "etc/apt/sources.list.d/nvidia-container-toolkit.list"
NV = "https://nvidia.github.io"
MIRROR = "http://mirror.local/nvidia"
OBSERVED = "kgn_observed_nvidia_container_toolkit"

HOSTS = {
    "el-stable": {OBSERVED: {"pkg_mgr": "dnf"}, "nvidia_container_toolkit_version": "1.14.6"},
    "el-libnvidia": {
        OBSERVED: {"pkg_mgr": "yum", "docker_version": "20.10.24"},
        "nvidia_container_toolkit_version": "1.13.5",
        "nvidia_container_toolkit_repo_distribution": "centos7",
    },
    "el-nvidia-docker-mirror": {
        OBSERVED: {"os_family": "RedHat"},
        "nvidia_container_toolkit_version": "1.5.1",
        "nvidia_container_toolkit_repo_distribution": "centos7",
        "nvidia_container_toolkit_repo_base_url": MIRROR + "/",
    },
    "el-stable-mirror": {
        OBSERVED: {"pkg_mgr": "yum"},
        "nvidia_container_toolkit_repo_base_url": MIRROR,
    },
    "el-docker18": {OBSERVED: {"pkg_mgr": "yum", "docker_version": "18.09.7"}},
    "el-no-repo": {OBSERVED: {"pkg_mgr": "dnf"}, "nvidia_container_toolkit_repo_enabled": False},
    "deb-default": {OBSERVED: {"pkg_mgr": "apt", "docker_version": "20.10.24"}},
    "deb-docker18": {OBSERVED: {"pkg_mgr": "apt", "docker_version": "18.09.7"}},
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


def test_deb_host_gets_the_apt_source_and_no_repo_file(rendered):
    lines = [line for line in (rendered / "deb-default" / APT_LIST).read_text().splitlines() if line[:1] != "#"]
    assert lines == [
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        f"{NV}/libnvidia-container/stable/deb/$(ARCH) /"
    ]
    assert not (rendered / "deb-default/etc/yum.repos.d").exists()
    for host in ("el-stable", "el-libnvidia", "el-docker18"):
        assert not (rendered / host / "etc/apt").exists()


def plan(rendered: Path, host: str) -> dict:
    return json.loads((rendered / host / "_plan/nvidia_container_toolkit.json").read_text())


@pytest.mark.parametrize(("host", "package", "specs"), [
    ("deb-default", "nvidia-container-toolkit",
     ["nvidia-container-toolkit=1.20.0*", "nvidia-container-toolkit-base=1.20.0*"]),
    ("deb-docker18", "nvidia-docker2",
     ["nvidia-container-toolkit=1.20.0*", "nvidia-container-toolkit-base=1.20.0*", "nvidia-docker2=2.14.0*"]),
    ("el-docker18", "nvidia-docker2",
     ["nvidia-container-toolkit-1.20.0", "nvidia-container-toolkit-base-1.20.0", "nvidia-docker2-2.14.0"]),
    ("el-libnvidia", "nvidia-container-toolkit",
     ["nvidia-container-toolkit-1.13.5", "nvidia-container-toolkit-base-1.13.5"]),
])
def test_the_plan_shows_the_package_choice_and_its_pinned_specs(rendered, host, package, specs):
    assert plan(rendered, host)["package"] == package
    assert plan(rendered, host)["specs"] == specs


def test_a_host_without_a_recorded_docker_says_what_it_assumed(rendered):
    assert plan(rendered, "el-stable")["package"] == "nvidia-container-toolkit"
    assert any("no Docker version recorded" in a for a in plan(rendered, "el-stable")["assumed"])
    assert plan(rendered, "deb-default")["assumed"] == []


def test_the_rendered_file_is_the_planned_text(rendered):
    for host, path in (("deb-default", APT_LIST), ("el-stable", REPO_FILE)):
        (planned,) = plan(rendered, host)["files"]
        assert planned["path"] == "/" + path
        assert (rendered / host / path).read_text() == planned["content"]


def test_a_host_without_a_package_family_fails_clearly(tmp_path):
    inventory = {"all": {"vars": {"ansible_connection": "local"}, "hosts": {
        "no-family": {OBSERVED: {"docker_version": "20.10.24"}}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(RENDER_PLAY.format(role="nvidia_container_toolkit"))
    result = run_playbook("-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
                          "-e", f"render_dir={tmp_path / 'out'}")
    assert result.returncode != 0
    assert "no-family" in result.stdout
    assert says(result.stdout, "no package family is known for this host")
    assert says(result.stdout, "kgn_observed_nvidia_container_toolkit: {pkg_mgr: apt}")
    assert not (tmp_path / "out/no-family/etc").exists()
