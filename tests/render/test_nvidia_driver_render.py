"""The nvidia_driver render for every platform path, including the ones that cannot run here.

Ubuntu and RHEL cannot be run in this lab (no mirror reachable): their repository files and package
names are checked here, rendered from inventory data only, as `playbooks/render.yml` does. The OS of
each host comes from its observation (kgn_observed_nvidia_driver: written in the inventory, or the
fact a run recorded); a host without one is refused, never rendered as a guessed Debian.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playbook_runner import RENDER_PLAY, render_role, run_playbook, says

ROOT = Path(__file__).resolve().parents[2]


def _os(os_id: str, version: str, **extra) -> dict:
    return {"kgn_observed_nvidia_driver": {"os": {"id": os_id, "version_id": version}, **extra}}


HOSTS = {
    "deb12": {**_os("debian", "12"), "nvidia_driver_branch": "535"},
    "deb12_recorded": {
        # what a run records: the apt sources, the installed driver and the lists' offer
        "kgn_observed_nvidia_driver": {
            "os": {"id": "debian", "version_id": "12"}, "architecture": "x86_64", "kernel": "6.1.0-18-amd64",
            "apt_sources": {
                "/etc/apt/sources.list": "deb http://deb.debian.org/debian bookworm main contrib non-free\n"},
            "packages": {"installed": "535.261.03-1", "held": ["nvidia-driver"], "stack": ["nvidia-driver"],
                         "offered": ["535.309.01-0+deb12u1", "535.261.03-1"],
                         "present": ["nvidia-driver=535.261.03-1"]},
            "gpu": {"gpus": [{"product_name": "Tesla T4"}]},
        },
        "nvidia_driver_branch": "535",
    },
    "deb13_open": {
        **_os("debian", "13"),
        "nvidia_driver_branch": "550",
        "nvidia_driver_kernel_module": "open",
        "nvidia_driver_version": "550.163.01",
    },
    "deb12_cuda": {
        **_os("debian", "12"),
        "nvidia_driver_source": "cuda_repo",
        "nvidia_driver_branch": "570",
        "nvidia_driver_cuda_repo_base_url": "http://mirror.local/cuda/repos/",
    },
    "ubu24": {**_os("ubuntu", "24.04"), "nvidia_driver_branch": "550"},
    "ubu24_open": {
        **_os("ubuntu", "24.04"),
        "nvidia_driver_branch": "570",
        "nvidia_driver_kernel_module": "open",
    },
    "ubu22_cuda": {
        **_os("ubuntu", "22.04"),
        "nvidia_driver_source": "cuda_repo",
        "nvidia_driver_branch": "535",
    },
    "rhel9": {
        **_os("rhel", "9.4"),
        "nvidia_driver_source": "cuda_repo",
        "nvidia_driver_branch": "550",
    },
    "rhel8_arm_open": {
        **_os("rocky", "8.10", architecture="aarch64"),
        "nvidia_driver_source": "cuda_repo",
        "nvidia_driver_branch": "570",
        "nvidia_driver_kernel_module": "open",
    },
    # The newest releases, branch and flavour left to auto, from the GPUs a run recorded.
    "ubu26_b200": {**_os("ubuntu", "26.04", gpu={"gpus": [{"product_name": "NVIDIA B200"}]})},
    "ubu26_cuda_h100": {**_os("ubuntu", "26.04", gpu={"gpus": [{"product_name": "NVIDIA H100 80GB HBM3"}]}),
                        "nvidia_driver_source": "cuda_repo"},
    "rocky10_t4": {**_os("rocky", "10.0", gpu={"gpus": [{"product_name": "Tesla T4"}]}),
                   "nvidia_driver_source": "cuda_repo"},
    "rocky10_v100": {**_os("rocky", "10.0", gpu={"gpus": [{"product_name": "Tesla V100-SXM2-16GB"}]}),
                     "nvidia_driver_source": "cuda_repo"},
    # A first run's inventory: nothing but the OS and the GPU the node shows; nvidia_driver_source left to its
    # default (auto), which takes NVIDIA's CUDA repository on EL (the distribution ships no driver).
    "rocky10_default": {**_os("rocky", "10.0", gpu={"gpus": [{"product_name": "NVIDIA H100 80GB HBM3"}]})},
    "alma9_default": {**_os("almalinux", "9.5")},
    "runfile": {
        **_os("debian", "12"),
        "nvidia_driver_source": "runfile",
        "nvidia_driver_runfile_url": "http://mirror.local/cuda_10.2.89_440.33.01_linux.run",
    },
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    inventory = {"all": {"vars": {"ansible_connection": "local"}, "hosts": HOSTS}}
    return render_role(tmp_path_factory.mktemp("render"), "nvidia_driver", inventory)


def _read(rendered: Path, host: str, path: str) -> str:
    return (rendered / host / path.lstrip("/")).read_text()


def _plan(rendered: Path, host: str) -> dict:
    return json.loads(_read(rendered, host, "/_plan/nvidia_driver.json"))


def _stanzas(text: str) -> list[dict]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith("#"))
        if fields:
            out.append(fields)
    return out


def test_debian12_distro_adds_non_free_for_every_suite(rendered):
    stanzas = _stanzas(_read(rendered, "deb12", "/etc/apt/sources.list.d/kgn-nvidia-driver.sources"))
    assert [s["Suites"] for s in stanzas] == ["bookworm", "bookworm-updates", "bookworm-security"]
    assert {s["Components"] for s in stanzas} == {"contrib non-free non-free-firmware"}
    assert stanzas[2]["URIs"] == "http://deb.debian.org/debian-security"
    assert {s["Signed-By"] for s in stanzas} == {"/usr/share/keyrings/debian-archive-keyring.gpg"}
    assert _plan(rendered, "deb12")["packages"] == [
        "nvidia-driver",
        "nvidia-kernel-dkms",
        "nvidia-smi",
        "libcuda1",
        "libnvidia-ptxjitcompiler1",
        "nvidia-persistenced",
    ]
    assert "Pin: version 535.*" in _read(rendered, "deb12", "/etc/apt/preferences.d/kgn-nvidia-driver.pref")
    assumed = " | ".join(_plan(rendered, "deb12")["assumed"])
    assert "pinned as 535.*" in assumed and "apt sources were not recorded" in assumed


def test_recorded_observation_renders_what_a_run_would_write(rendered):
    # the recorded node lacks only non-free-firmware; its installed version of the branch stays pinned
    stanzas = _stanzas(_read(rendered, "deb12_recorded", "/etc/apt/sources.list.d/kgn-nvidia-driver.sources"))
    assert [(s["Suites"], s["Components"]) for s in stanzas] == [
        ("bookworm", "non-free-firmware"),
        ("bookworm-updates", "contrib non-free non-free-firmware"),
        ("bookworm-security", "contrib non-free non-free-firmware"),
    ]
    pin = _read(rendered, "deb12_recorded", "/etc/apt/preferences.d/kgn-nvidia-driver.pref")
    assert "Pin: version 535.261.03-1\n" in pin
    plan = _plan(rendered, "deb12_recorded")
    assert plan["headers_packages"] == ["linux-headers-6.1.0-18-amd64"]
    assert plan["target"] == "535.261.03-1" and plan["target_exact"] is True
    assert not any("pinned as" in a or "GPU facts" in a for a in plan["assumed"])


def test_debian13_open_modules_and_exact_version_pin(rendered):
    assert "nvidia-open-kernel-dkms" in _plan(rendered, "deb13_open")["packages"]
    assert "Pin: version 550.163.01*" in _read(rendered, "deb13_open", "/etc/apt/preferences.d/kgn-nvidia-driver.pref")


def test_debian_cuda_repo_uses_the_mirror_and_signed_by(rendered):
    (stanza,) = _stanzas(_read(rendered, "deb12_cuda", "/etc/apt/sources.list.d/kgn-cuda.sources"))
    assert stanza["URIs"] == "http://mirror.local/cuda/repos/debian12/x86_64/"
    assert stanza["Signed-By"] == "/usr/share/keyrings/kgn-cuda-archive-keyring.asc"
    plan = _plan(rendered, "deb12_cuda")
    # kernel_module auto, no GPU facts recorded: R570 is past R560, where the open modules became the default
    assert plan["packages"] == ["nvidia-open-570"]
    assert plan["kernel_module_choice"]["how"].endswith("(no GPU facts recorded)")
    assert plan["cuda_repo_key_url"] == "http://mirror.local/cuda/repos/debian12/x86_64/3bf863cc.pub"
    assert not (rendered / "deb12_cuda/etc/apt/sources.list.d/kgn-nvidia-driver.sources").exists()


def test_ubuntu_distro_uses_restricted_and_server_packages(rendered):
    stanzas = _stanzas(_read(rendered, "ubu24", "/etc/apt/sources.list.d/kgn-nvidia-driver.sources"))
    assert [(s["Suites"], s["URIs"]) for s in stanzas] == [
        ("noble", "http://archive.ubuntu.com/ubuntu"),
        ("noble-updates", "http://archive.ubuntu.com/ubuntu"),
        ("noble-security", "http://security.ubuntu.com/ubuntu"),
    ]
    assert {s["Components"] for s in stanzas} == {"restricted"}
    assert {s["Signed-By"] for s in stanzas} == {"/usr/share/keyrings/ubuntu-archive-keyring.gpg"}
    assert _plan(rendered, "ubu24")["packages"] == [
        "nvidia-headless-550-server",
        "nvidia-utils-550-server",
        "nvidia-compute-utils-550-server",
    ]
    assert _plan(rendered, "ubu24")["version_package"] == "nvidia-utils-550-server"
    assert _plan(rendered, "ubu24_open")["packages"][0] == "nvidia-headless-570-server-open"


def test_ubuntu_cuda_repo(rendered):
    (stanza,) = _stanzas(_read(rendered, "ubu22_cuda", "/etc/apt/sources.list.d/kgn-cuda.sources"))
    assert stanza["URIs"] == "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
    assert _plan(rendered, "ubu22_cuda")["packages"] == ["cuda-drivers-535"]


def test_rhel9_repo_file_module_stream_and_versionlock(rendered):
    repo = _read(rendered, "rhel9", "/etc/yum.repos.d/kgn-cuda.repo")
    assert "baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64\n" in repo
    assert "gpgkey=https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub" in repo
    assert "gpgcheck=1" in repo
    plan = _plan(rendered, "rhel9")
    assert plan["dnf_module"] == "@nvidia-driver:550-dkms/default"
    assert "kmod-nvidia-*" in plan["versionlock_patterns"]
    assert not (rendered / "rhel9/etc/apt").exists()


def test_rhel8_aarch64_open_uses_sbsa_and_the_open_stream(rendered):
    assert "/rhel8/sbsa" in _read(rendered, "rhel8_arm_open", "/etc/yum.repos.d/kgn-cuda.repo")
    plan = _plan(rendered, "rhel8_arm_open")
    assert plan["dnf_module"] == "@nvidia-driver:570-open/default"
    assert plan["packages"][0] == "nvidia-open"


def test_ubuntu_2604_distro_takes_the_newest_supported_server_branch_with_the_open_modules(rendered):
    # resolute carries nvidia-graphics-drivers-580-server and -595-server in restricted (packages.ubuntu.com);
    # NVIDIA supports R595 until March 2027, and a B200 runs only with the open modules
    plan = _plan(rendered, "ubu26_b200")
    assert (plan["platform"], plan["branch"], plan["kernel_module"]) == ("Ubuntu-26", "595", "open")
    assert plan["packages"] == ["nvidia-headless-595-server-open", "nvidia-utils-595-server",
                                "nvidia-compute-utils-595-server"]
    assert plan["branch_choice"]["how"] == "auto" and plan["branch_choice"]["lifecycle"]["status"] == "supported"
    assert plan["kernel_module_choice"]["how"] == "auto: NVIDIA B200 (Blackwell) run only with the open modules"
    stanzas = _stanzas(_read(rendered, "ubu26_b200", "/etc/apt/sources.list.d/kgn-nvidia-driver.sources"))
    assert [(s["Suites"], s["Components"]) for s in stanzas] == [
        ("resolute", "restricted"), ("resolute-updates", "restricted"), ("resolute-security", "restricted")]
    assert plan["os_lifecycle"]["status"] == "supported" and plan["warnings"] == []


def test_ubuntu_2604_cuda_repo_uses_the_unsuffixed_package_names(rendered):
    # from branch 590 NVIDIA's Ubuntu packages carry no branch in their names; the apt pin holds the branch
    (stanza,) = _stanzas(_read(rendered, "ubu26_cuda_h100", "/etc/apt/sources.list.d/kgn-cuda.sources"))
    assert stanza["URIs"] == "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2604/x86_64/"
    plan = _plan(rendered, "ubu26_cuda_h100")
    assert (plan["branch"], plan["kernel_module"], plan["packages"]) == ("595", "open", ["nvidia-open"])
    assert "Pin: version 595.*" in _read(rendered, "ubu26_cuda_h100", "/etc/apt/preferences.d/kgn-nvidia-driver.pref")


def test_rocky10_locks_the_branch_instead_of_a_module_stream(rendered):
    repo = _read(rendered, "rocky10_t4", "/etc/yum.repos.d/kgn-cuda.repo")
    assert "baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64\n" in repo
    assert "gpgkey=https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64/CDF6BA43.pub\n" in repo
    plan = _plan(rendered, "rocky10_t4")
    assert (plan["platform"], plan["branch"], plan["kernel_module"]) == ("RedHat-10", "595", "open")
    assert plan["packages"] == ["nvidia-open", "nvidia-driver-cuda", "nvidia-persistenced"]
    assert plan["dnf_module"] == "" and plan["branch_lock"] == "*nvidia*595*"
    # a V100 (Volta) needs the proprietary modules, which R580 is the last branch to support Volta with
    v100 = _plan(rendered, "rocky10_v100")
    assert (v100["branch"], v100["kernel_module"], v100["packages"][0]) == ("580", "proprietary", "nvidia-driver")
    assert v100["branch_lock"] == "*nvidia*580*"


GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/introduction.html"


def test_el_without_a_source_takes_nvidias_repository_and_the_plan_says_why(rendered):
    plan = _plan(rendered, "rocky10_default")
    assert (plan["source"], plan["branch"], plan["kernel_module"]) == ("cuda_repo", "595", "open")
    assert plan["source_choice"]["how"] == "auto"
    assert plan["source_choice"]["words"] == (
        "source: cuda_repo (the default for Rocky Linux 10: the distribution ships no NVIDIA driver; NVIDIA's CUDA "
        f"repository rhel10, as documented in NVIDIA's driver installation guide, {GUIDE})")
    repo = _read(rendered, "rocky10_default", "/etc/yum.repos.d/kgn-cuda.repo")
    assert "baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64\n" in repo
    assert plan["packages"] == ["nvidia-open", "nvidia-driver-cuda", "nvidia-persistenced"]
    assert plan["branch_lock"] == "*nvidia*595*"
    alma = _plan(rendered, "alma9_default")
    assert (alma["source"], alma["dnf_module"]) == ("cuda_repo", "@nvidia-driver:595-open/default")
    assert alma["source_choice"]["why"].startswith("the default for AlmaLinux 9: the distribution ships no NVIDIA "
                                                   "driver; NVIDIA's CUDA repository rhel9")


def test_debian_and_ubuntu_without_a_source_keep_their_own_packages(rendered):
    # ubu26_b200 sets no source either: the distribution's -server packages, as before
    plan = _plan(rendered, "ubu26_b200")
    assert (plan["source"], plan["source_choice"]["how"]) == ("distro", "auto")
    assert plan["source_choice"]["why"].startswith("the default for Ubuntu 26.04: the distribution packages the "
                                                   "NVIDIA driver itself (branches 580, 595)")
    assert _plan(rendered, "deb12_cuda")["source_choice"] == {
        "source": "cuda_repo", "how": "asked", "why": "asked: nvidia_driver_source=cuda_repo",
        "words": "source: cuda_repo (asked: nvidia_driver_source=cuda_repo)"}


ROCKY10_INVENTORY = """
# What a first inventory for a Rocky Linux 10 GPU node looks like: the contract, and what the node shows (a run
# records it; written here for a render). No nvidia_driver_source: its default decides.
all:
  vars:
    kubernetes_version: "1.33.2"
    kube_scheduler_style: kubeadm
    container_runtime: containerd
    gpu_sharing_stacks: [nvidia_device_plugin]
  children:
    kube_control_plane:
      hosts:
        cp1: {ansible_host: 10.30.0.10}
    gpu_nodes:
      hosts:
        rocky10-gpu1:
          ansible_host: 10.30.0.21
          kgn_observed_nvidia_driver:
            os: {id: rocky, version_id: "10.0", id_like: rhel centos fedora}
            architecture: x86_64
            gpu: {gpus: [{product_name: NVIDIA H100 80GB HBM3}]}
          kgn_observed_nvidia_container_toolkit: {pkg_mgr: dnf}
"""


def test_the_render_playbook_plans_a_rocky_10_first_run_from_nvidias_repository(tmp_path):
    """playbooks/render.yml (the validate play included) on a natural inventory: the default source passes the
    inventory checks and the driver plan says cuda_repo and why, where it used to refuse ("no branch the source
    offers (none)")."""
    (tmp_path / "hosts.yml").write_text(ROCKY10_INVENTORY)
    out = tmp_path / "out"
    result = run_playbook("playbooks/render.yml", "-i", str(tmp_path / "hosts.yml"), "-e", f"render_dir={out}")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    plan = json.loads((out / "rocky10-gpu1/_plan/nvidia_driver.json").read_text())
    assert plan["source_choice"]["words"].startswith(
        "source: cuda_repo (the default for Rocky Linux 10: the distribution ships no NVIDIA driver; NVIDIA's CUDA "
        "repository rhel10")
    assert (plan["platform"], plan["branch"], plan["kernel_module"]) == ("RedHat-10", "595", "open")
    assert "gpgkey=https://developer.download.nvidia.com/compute/cuda/repos/rhel10/x86_64/CDF6BA43.pub" in (
        out / "rocky10-gpu1/etc/yum.repos.d/kgn-cuda.repo").read_text()
    assert not says(result.stdout, "no branch the source offers")


def test_runfile_writes_no_repository(rendered):
    assert _plan(rendered, "runfile")["packages"] == []
    assert _plan(rendered, "runfile")["runfile"]["args"] == ["--silent", "--driver"]
    assert "blacklist nouveau" in _read(rendered, "runfile", "/etc/modprobe.d/kgn-blacklist-nouveau.conf")
    assert not (rendered / "runfile/etc/apt/sources.list.d/kgn-nvidia-driver.sources").exists()


def test_the_role_never_uses_apt_key():
    role = ROOT / "roles" / "nvidia_driver"
    offenders = [p for p in role.rglob("*.y*ml") if "apt_key" in p.read_text() or "apt-key add" in p.read_text()]
    assert offenders == []


def test_every_host_renders_its_own_platform(rendered):
    platforms = {host: _plan(rendered, host)["platform"] for host in HOSTS}
    assert platforms == {
        "deb12": "Debian-12", "deb12_recorded": "Debian-12", "deb13_open": "Debian-13", "deb12_cuda": "Debian-12",
        "ubu24": "Ubuntu-24", "ubu24_open": "Ubuntu-24", "ubu22_cuda": "Ubuntu-22", "rhel9": "RedHat-9",
        "rhel8_arm_open": "RedHat-8", "runfile": "Debian-12", "ubu26_b200": "Ubuntu-26",
        "ubu26_cuda_h100": "Ubuntu-26", "rocky10_t4": "RedHat-10", "rocky10_v100": "RedHat-10",
        "rocky10_default": "RedHat-10", "alma9_default": "RedHat-9",
    }


def test_a_host_without_an_os_fails_clearly(tmp_path):
    inventory = {"all": {"vars": {"ansible_connection": "local"}, "hosts": {
        "known": _os("debian", "12"), "unknown-os": {"nvidia_driver_branch": "535"}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(RENDER_PLAY.format(role="nvidia_driver"))
    result = run_playbook("-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), "-e",
                          f"render_dir={tmp_path / 'out'}")
    assert result.returncode != 0
    assert says(result.stdout, "nvidia_driver: the node's OS is not known"), result.stdout[-3000:]
    assert says(result.stdout, "set kgn_observed_nvidia_driver.os.id/version_id")
    assert (tmp_path / "out/known/etc/modprobe.d/kgn-blacklist-nouveau.conf").is_file()
    assert not (tmp_path / "out/unknown-os").exists()
