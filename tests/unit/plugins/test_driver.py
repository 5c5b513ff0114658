"""The nvidia_driver planner (module_utils/driver/driver.py) over the platform table, and the module's command
sequences (apt, dnf, runfile) with a fake AnsibleModule."""

from __future__ import annotations

import os
import time

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import gpu as smi
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import driver as kd
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.driver import driver_state as state
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan
from ansible_collections.kgn.gpu_nodes.plugins.modules import nvidia_driver as mod
from os_releases import OS

INPUTS = {
    "source": "distro", "branch": "535", "version": "", "kernel_module": "proprietary", "hold": True,
    "allow_upgrade": False, "install_recommends": False,
    "debian_mirror": "http://deb.debian.org/debian", "debian_security_mirror": "http://deb.debian.org/debian-security",
    "ubuntu_mirror": "http://archive.ubuntu.com/ubuntu", "ubuntu_security_mirror": "http://security.ubuntu.com/ubuntu",
    "cuda_repo_base_url": "https://developer.download.nvidia.com/compute/cuda/repos", "cuda_repo_key": "",
    "cuda_repo_key_rpm": "", "runfile_url": "", "runfile_path": "", "runfile_extra_args": [],
    "kernel_headers": True, "blacklist_nouveau": True, "initramfs_rebuild": True, "persistenced_start": True,
    "secure_boot_policy": "fail",
}
BOOKWORM = ["535.309.01-0+deb12u1", "535.261.03-1"]
STOCK_BOOKWORM = {"/etc/apt/sources.list": (
    "deb http://deb.debian.org/debian bookworm main non-free-firmware\n"
    "deb http://deb.debian.org/debian-security bookworm-security main non-free-firmware\n"
    "deb http://deb.debian.org/debian bookworm-updates main non-free-firmware\n")}
KEPLER = {"gpu_present": True, "driver_loaded": False, "gpus": [{"product_name": "Tesla K80"}]}


def plan(observed=None, **inputs):
    return kd.driver_plan({**INPUTS, **inputs}, {"os": OS["Debian-12"], **(observed or {})})


def node(platform="Debian-12", packages=None, **extra):
    """A fully observed node (nothing assumed)."""
    observed = {"os": OS[platform], "architecture": "x86_64", "kernel": "6.1.0-18-amd64", "secure_boot": False,
                "initramfs_tools": ["update-initramfs"], "files": {}, "apt_sources": STOCK_BOOKWORM,
                "cuda_keyring": False, "driver": {"present": False, "owned": True},
                "gpu": {"gpus": [{"product_name": "Tesla T4"}]},
                "packages": {"installed": "", "held": [], "present": [], "offered": BOOKWORM, "stack": []}}
    observed["packages"].update(packages or {})
    observed.update(extra)
    return observed


def files(result):
    return {f["path"]: f["content"] for f in result["files"]}


# --- platform ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("os_release", "key"), [
    ({"id": "debian", "version_id": "12"}, "Debian-12"),
    ({"id": "ubuntu", "version_id": "24.04"}, "Ubuntu-24"),
    ({"id": "rocky", "version_id": "9.3", "id_like": "rhel centos fedora"}, "RedHat-9"),
    ({"id": "almalinux", "version_id": "8.9"}, "RedHat-8"),
    ({"id": "centos", "version_id": "7"}, "RedHat-7"),
    ({"id": "someclone", "version_id": "9.2", "id_like": "rhel"}, "RedHat-9"),
])
def test_platform_key_from_os_release(os_release, key):
    assert kd.platform_key(os_release) == key


@pytest.mark.parametrize("os_release", [None, {}, {"id": "debian"}, {"id": "debian", "version_id": ""}])
def test_no_os_is_refused_never_guessed(os_release):
    with pytest.raises(KgnError, match=r"set kgn_observed_nvidia_driver\.os\.id/version_id"):
        kd.driver_plan(INPUTS, {"os": os_release} if os_release is not None else {})


def test_unknown_platform_is_refused_with_the_list():
    with pytest.raises(KgnError, match=r"supports Debian-12, Debian-13, Ubuntu-20, Ubuntu-22, Ubuntu-24, Ubuntu-26, "
                                       r"RedHat-7, RedHat-8, RedHat-9, RedHat-10; this host is centos 6 \(RedHat-6\)"):
        kd.driver_plan({**INPUTS, "source": "cuda_repo"}, {"os": {"id": "centos", "version_id": "6"}})


DISTRO = {
    ("Debian-12", "proprietary"): ["nvidia-driver", "nvidia-kernel-dkms", "nvidia-smi", "libcuda1",
                                   "libnvidia-ptxjitcompiler1", "nvidia-persistenced"],
    ("Debian-13", "open"): ["nvidia-driver", "nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1",
                            "libnvidia-ptxjitcompiler1", "nvidia-persistenced"],
    ("Ubuntu-22", "proprietary"): ["nvidia-headless-550-server", "nvidia-utils-550-server",
                                   "nvidia-compute-utils-550-server"],
    ("Ubuntu-24", "open"): ["nvidia-headless-550-server-open", "nvidia-utils-550-server",
                            "nvidia-compute-utils-550-server"],
}


@pytest.mark.parametrize(("platform", "flavour"), list(DISTRO))
def test_distro_packages_of_every_debian_platform(platform, flavour):
    branch = {"Debian-12": "535", "Debian-13": "550"}.get(platform, "550")
    result = kd.driver_plan({**INPUTS, "branch": branch, "kernel_module": flavour}, {"os": OS[platform]})
    assert result["platform"] == platform and result["family"] == "debian"
    assert result["packages"] == [p.replace("550", branch) for p in DISTRO[(platform, flavour)]]
    expected_version = "nvidia-driver" if platform.startswith("Debian") else f"nvidia-utils-{branch}-server"
    assert result["version_package"] == expected_version
    text = files(result)[kd.FILES["distro_sources"]]
    assert "Signed-By: /usr/share/keyrings/" + ("debian" if platform.startswith("Debian") else "ubuntu") in text
    assert files(result)[kd.FILES["cuda_sources"]] is None
    assert result["headers_packages"] == ["linux-headers-<running kernel>"]
    assert result["initramfs"]["command"] == ["update-initramfs", "-u"]


@pytest.mark.parametrize("platform", list(kd.PLATFORMS))
@pytest.mark.parametrize("flavour", ["proprietary", "open"])
def test_cuda_repo_on_every_platform(platform, flavour):
    if platform == "RedHat-7" and flavour == "open":
        with pytest.raises(KgnError, match="nvidia_driver_kernel_module=open is not packaged for RedHat-7"):
            kd.driver_plan({**INPUTS, "source": "cuda_repo", "branch": "570", "kernel_module": flavour},
                           {"os": OS[platform], "architecture": "x86_64"})
        return
    result = kd.driver_plan({**INPUTS, "source": "cuda_repo", "branch": "570", "kernel_module": flavour},
                            {"os": OS[platform], "architecture": "x86_64"})
    distro = kd.PLATFORMS[platform]["cuda_repo_distro"]
    url = f"https://developer.download.nvidia.com/compute/cuda/repos/{distro}/x86_64"
    assert result["cuda_repo_url"] == url
    if platform == "RedHat-7":
        # yum: no module stream; the branch is chosen by NVIDIA's nvidia-driver-branch-<branch> packages
        assert result["packages"] == ["nvidia-driver-branch-570", "nvidia-driver-branch-570-cuda", "yum-plugin-nvidia"]
        assert result["dnf_module"] == "" and result["version_package"] == "nvidia-driver-branch-570"
        assert "baseurl=https://developer.download.nvidia.com/compute/cuda/repos/rhel7/x86_64\n" in files(
            result)[kd.FILES["cuda_yum_repo"]]
    elif platform.startswith("RedHat"):
        assert result["packages"][0] == ("nvidia-driver" if flavour == "proprietary" else "nvidia-open")
        if platform == "RedHat-10":
            # no module streams on EL 10: the branch is locked before the install, the key is NVIDIA's rhel10 one
            assert result["dnf_module"] == "" and result["branch_lock"] == "*nvidia*570*"
            key = "CDF6BA43.pub"
        else:
            stream = "dkms" if flavour == "proprietary" else "open"
            assert result["dnf_module"] == f"@nvidia-driver:570-{stream}/default" and result["branch_lock"] == ""
            key = "D42D0685.pub"
        assert result["version_package"] == "nvidia-driver"
        repo = files(result)[kd.FILES["cuda_yum_repo"]]
        assert f"baseurl={url}\n" in repo and f"gpgkey={url}/{key}\n" in repo and "gpgcheck=1" in repo
        assert "kmod-nvidia-*" in result["versionlock_patterns"]
        assert result["headers_packages"][0].startswith("kernel-devel-")
        assert result["initramfs"]["command"] == ["dracut", "-f"]
        assert kd.FILES["apt_pin"] not in files(result)
    else:
        assert result["packages"] == ["cuda-drivers-570" if flavour == "proprietary" else "nvidia-open-570"]
        assert result["version_package"] == result["packages"][0]
        assert f"URIs: {url}/\n" in files(result)[kd.FILES["cuda_sources"]]
        assert f"Signed-By: {kd.FILES['cuda_keyring']}" in files(result)[kd.FILES["cuda_sources"]]
        assert result["cuda_keyring"]["wanted"] is True
        assert result["cuda_repo_key_url"] == f"{url}/3bf863cc.pub"
        assert files(result)[kd.FILES["distro_sources"]] is None


@pytest.mark.parametrize("platform", list(kd.PLATFORMS))
def test_runfile_on_every_platform_writes_no_repository(platform):
    result = kd.driver_plan({**INPUTS, "source": "runfile",
                             "runfile_url": "http://mirror/NVIDIA-Linux-x86_64-535.216.01.run"}, {"os": OS[platform]})
    assert result["packages"] == [] and result["runfile"]["target"] == "535.216.01"
    assert [path for path, text in files(result).items() if text is not None] == [kd.FILES["blacklist"]]


def test_aarch64_uses_sbsa():
    result = kd.driver_plan({**INPUTS, "source": "cuda_repo"}, {"os": OS["RedHat-8"], "architecture": "aarch64"})
    assert result["cuda_repo_url"].endswith("/rhel8/sbsa")


def test_mirror_base_url_trailing_slash():
    result = plan(source="cuda_repo", cuda_repo_base_url="http://mirror.local/cuda/repos/")
    assert result["cuda_repo_url"] == "http://mirror.local/cuda/repos/debian12/x86_64"


# --- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("platform", "branch", "message"), [
    ("Debian-12", "550", "its distribution packages carry branch 535"),
    ("Debian-13", "535", "its distribution packages carry branch 550"),
    ("RedHat-9", "550", "it has no distribution driver packages"),
    ("Ubuntu-24", "470", "carry branch 535, 550, 570, 580"),
])
def test_distro_source_not_on_the_platform(platform, branch, message):
    with pytest.raises(KgnError, match=message):
        kd.driver_plan({**INPUTS, "branch": branch}, {"os": OS[platform]})


def test_kepler_gpu_is_refused():
    with pytest.raises(KgnError, match=r"nvidia_driver_branch 535 cannot drive this node's GPUs: Tesla K80 \(Kepler\) "
                                       r"are supported up to R470, the last branch for them"):
        plan(node(gpu=KEPLER))


def test_open_modules_on_volta_and_proprietary_on_grace_hopper_are_refused():
    with pytest.raises(KgnError, match=r"kernel_module=open cannot drive Tesla V100-SXM2-16GB \(Volta\): the open "
                                       "kernel modules need Turing or newer"):
        kd.driver_plan({**INPUTS, "branch": "550", "kernel_module": "open"},
                       node("Debian-13", gpu={"gpus": [{"product_name": "Tesla V100-SXM2-16GB"}]}))
    with pytest.raises(KgnError, match=r"kernel_module=proprietary cannot drive NVIDIA GH200 480GB \(Hopper\): they "
                                       "run only with the open kernel modules"):
        plan(node(gpu={"gpus": [{"product_name": "NVIDIA GH200 480GB"}]}))


def test_unknown_gpu_is_not_checked():
    assert plan(node(gpu={"gpus": [{"product_name": "NVIDIA Quadro Something"}]}))["platform"] == "Debian-12"


def test_secure_boot_refused_unless_policy_continue():
    with pytest.raises(KgnError, match=r"Secure Boot is enabled.*nvidia_driver_secure_boot_policy=continue"):
        plan(node(secure_boot=True))
    assert plan(node(secure_boot=True), secure_boot_policy="continue")["platform"] == "Debian-12"


FOREIGN = {"present": True, "owned": False, "version": "535.104.05", "kernel_module_version": "535.104.05",
           "nvidia_smi": "/usr/bin/nvidia-smi", "library": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05"}


def test_a_driver_no_package_owns_is_adopted_by_default():
    result = plan(node(driver=FOREIGN))
    assert result["adopted"]["version"] == "535.104.05"
    assert result["missing"] == [] and result["specs"] == [] and result["hold_changes"] == {"hold": [], "unhold": []}
    assert result["target"] == "535.104.05" and result["module_changes"] is False and not result["kernel_headers"]
    written = files(result)
    # our package sources go; the pin blocks every driver package, the toolkit's spared
    assert written[kd.FILES["distro_sources"]] is None and written[kd.FILES["cuda_sources"]] is None
    pin = written[kd.FILES["apt_pin"]]
    assert "Pin: version *\nPin-Priority: -1\n" in pin and "(535.104.05)" in pin
    assert written[kd.FILES["blacklist"]] == kd.BLACKLIST
    assert result["cuda_keyring"]["wanted"] is False


def test_install_refuses_a_driver_no_package_owns_except_for_runfile():
    with pytest.raises(KgnError, match=r"an NVIDIA driver \(535.104.05\) is installed that no package owns.*"
                                       r"nvidia_driver_existing=install"):
        plan(node(driver=FOREIGN), existing="install")
    result = plan(node(driver=FOREIGN), existing="install", source="runfile",
                  runfile_path="/srv/NVIDIA-Linux-x86_64-535.216.01.run")
    assert result["runfile"]["due"] is True and result["adopted"] is None


def test_adopt_needs_a_driver_and_keeps_a_packaged_one_managed():
    with pytest.raises(KgnError, match="nvidia_driver_existing=adopt, but the node has no NVIDIA driver"):
        plan(node(), existing="adopt")
    owned = {"present": True, "owned": True, "owner": "nvidia-kernel-dkms", "version": "535.261.03"}
    result = plan(node(driver=owned, packages={"installed": "535.261.03-1"}), existing="adopt")
    assert result["adopted"] is None and result["target"] == "535.261.03-1"


def test_an_adopted_driver_too_old_for_the_gpu_is_refused():
    old = {**FOREIGN, "version": "470.256.02", "kernel_module_version": ""}
    with pytest.raises(KgnError, match=r"the driver found on the node \(470.256.02, adopted\) cannot drive this "
                                       r"node's GPUs: NVIDIA H100 80GB HBM3 \(Hopper\) need R520 or newer"):
        plan(node(driver=old, gpu={"gpus": [{"product_name": "NVIDIA H100 80GB HBM3"}]}))


def test_an_adopted_driver_on_el_is_excluded_in_the_dnf_config_keeping_its_own_excludes():
    dnf_conf = "[main]\ngpgcheck=1\nexclude=kernel-rt*\n\n[other]\nx=1\n"
    result = plan(node("RedHat-9", driver=FOREIGN, files={kd.FILES["dnf_conf"]: dnf_conf}))
    text = files(result)[kd.FILES["dnf_conf"]]
    assert text.startswith("[main]\ngpgcheck=1\nexclude=kernel-rt* nvidia-[!cd]* ")
    assert text.endswith("\n\n[other]\nx=1\n") and files(result)[kd.FILES["cuda_yum_repo"]] is None
    assert kd.yum_exclude(text, kd.BLOCK_GLOBS) == text


def test_yum_exclude_adds_a_line_or_a_section():
    assert kd.yum_exclude("[main]\ngpgcheck=1\n", ["a*"]) == "[main]\ngpgcheck=1\nexclude=a*\n"
    assert kd.yum_exclude("", ["a*", "b"]) == "[main]\nexclude=a* b\n"


# Real package names (Debian bookworm/trixie, Ubuntu -server, NVIDIA's CUDA repositories for apt and dnf).
DRIVER_PACKAGES = [
    "nvidia-driver", "nvidia-driver-bin", "nvidia-driver-libs", "nvidia-kernel-dkms", "nvidia-open-kernel-dkms",
    "nvidia-kernel-support", "nvidia-kernel-common", "nvidia-smi", "nvidia-persistenced", "nvidia-alternative",
    "nvidia-egl-icd", "nvidia-vulkan-icd", "nvidia-modprobe", "nvidia-installer-cleanup", "libcuda1",
    "libnvidia-ml1", "libnvidia-ptxjitcompiler1", "libnvidia-cfg1", "libnvidia-eglcore", "libnvidia-glcore",
    "libnvidia-rtcore", "libnvcuvid1", "libgl1-nvidia-glvnd-glx", "libglx-nvidia0", "libegl-nvidia0",
    "firmware-nvidia-gsp", "nvidia-headless-535-server", "nvidia-utils-535-server",
    "nvidia-compute-utils-535-server", "libnvidia-compute-535-server", "libnvidia-common-535-server",
    "nvidia-dkms-535-server", "nvidia-kernel-source-535-server", "linux-modules-nvidia-535-server-generic",
    "xserver-xorg-video-nvidia-535-server", "cuda-drivers-535", "nvidia-open-535", "kmod-nvidia-latest-dkms",
    "nvidia-driver-cuda", "nvidia-driver-cuda-libs", "nvidia-libXNVCtrl", "dkms-nvidia",
]
TOOLKIT_PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container1",
                    "libnvidia-container-tools", "nvidia-container-runtime", "nvidia-docker2", "nvidia-cuda-toolkit"]


@pytest.mark.parametrize("name", DRIVER_PACKAGES)
def test_the_block_covers_every_driver_package(name):
    import fnmatch
    assert any(fnmatch.fnmatchcase(name, glob) for glob in kd.BLOCK_GLOBS)


@pytest.mark.parametrize("name", TOOLKIT_PACKAGES)
def test_the_block_spares_the_container_toolkit_and_cuda(name):
    import fnmatch
    assert not any(fnmatch.fnmatchcase(name, glob) for glob in kd.BLOCK_GLOBS)


@pytest.mark.parametrize(("inputs", "message"), [
    ({"branch": "r535"}, "give auto or the branch as a quoted number"),
    ({"version": "latest"}, "give an upstream version"),
    ({"version": "550.163.01"}, "is not in nvidia_driver_branch 535"),
    ({"source": "ppa"}, "must be one of auto, distro, cuda_repo, runfile"),
    ({"kernel_module": "nouveau"}, "must be one of proprietary, open"),
    ({"existing": "keep"}, "must be one of auto, adopt, install"),
])
def test_bad_inputs(inputs, message):
    with pytest.raises(KgnError, match=message):
        plan(**inputs)


# --- version choice -------------------------------------------------------------------------------


def test_fresh_node_takes_the_newest_of_the_branch_and_pins_it():
    result = plan(node())
    assert result["target"] == "535.309.01-0+deb12u1" and result["target_exact"]
    assert result["specs"] == [f"{p}=535.309.01-0+deb12u1" for p in DISTRO[("Debian-12", "proprietary")][:5]] + [
        "nvidia-persistenced"]
    assert result["missing"] == result["specs"]
    assert result["module_changes"] is True and result["upgrade"] is False
    assert "Pin: version 535.309.01-0+deb12u1\nPin-Priority: 1001\n" in files(result)[kd.FILES["apt_pin"]]
    assert result["assumed"] == []


def test_exact_version_is_chosen_from_the_offer():
    assert plan(node(), version="535.261.03")["target"] == "535.261.03-1"
    assert plan(node(), version="535.261.03-1")["target"] == "535.261.03-1"


def test_installed_version_of_the_branch_is_kept_and_nothing_moves():
    installed = {"installed": "535.261.03-1", "held": ["nvidia-driver", "nvidia-smi"],
                 "present": [f"{p}=535.261.03-1" for p in DISTRO[("Debian-12", "proprietary")][:5]]
                 + ["nvidia-persistenced=535.171.04-1~deb12u1", "linux-headers-6.1.0-18-amd64=6.1.76-1"],
                 "stack": ["nvidia-driver", "nvidia-smi", "libcuda1"]}
    result = plan(node(packages=installed))
    assert result["target"] == "535.261.03-1" and result["missing"] == []
    assert result["module_changes"] is False and result["headers_missing"] is False
    assert result["hold_changes"] == {"hold": ["libcuda1"], "unhold": []}


def test_installed_exact_version_needs_no_offer():
    result = plan(node(packages={"installed": "535.261.03-1", "offered": []}), version="535.261.03")
    assert result["target"] == "535.261.03-1" and result["target_exact"]


def test_version_not_offered_after_a_refresh_is_refused():
    with pytest.raises(KgnError, match=r"nvidia-driver 535.999.01 is not offered by nvidia_driver_source=distro on "
                                       r"Debian-12 \(offered: 535.309.01-0\+deb12u1, 535.261.03-1\)"):
        plan(node(packages={"refreshed": True}), version="535.999.01")


def test_version_not_in_stale_lists_is_assumed_until_the_refresh():
    result = plan(node(), version="535.999.01")
    assert result["target"] == "535.999.01*" and not result["target_exact"]
    assert any("pinned as 535.999.01*" in a for a in result["assumed"])


def test_held_driver_does_not_move_outside_a_planned_upgrade():
    held = {"installed": "535.261.03-1", "held": ["nvidia-driver"], "stack": ["nvidia-driver"]}
    with pytest.raises(KgnError, match=r"nvidia-driver is held at 535\.261\.03-1; moving it to 535\.309\.01 is a "
                                       r"planned upgrade: run playbooks/nvidia_driver_upgrade\.yml"):
        plan(node(packages=held), version="535.309.01")


def test_planned_upgrade_releases_the_stack_and_holds_it_again():
    stack = ["firmware-nvidia-gsp", "libcuda1", "nvidia-driver", "nvidia-smi"]
    held = {"installed": "535.261.03-1", "held": stack, "stack": stack,
            "present": ["nvidia-driver=535.261.03-1", "nvidia-smi=535.261.03-1", "libcuda1=535.261.03-1"]}
    result = plan(node(packages=held), version="535.309.01", allow_upgrade=True)
    assert result["target"] == "535.309.01-0+deb12u1" and result["upgrade"] is True
    assert result["release"] == stack
    assert set(result["hold_changes"]["hold"]) >= set(stack) | {"nvidia-kernel-dkms"}
    assert result["module_changes"] is True


def test_hold_false_unholds_and_removes_the_pin():
    result = plan(node(packages={"installed": "535.261.03-1", "held": ["nvidia-driver", "bash"],
                                 "stack": ["nvidia-driver"]}), hold=False)
    assert result["hold_changes"] == {"hold": [], "unhold": ["nvidia-driver"]}
    assert files(result)[kd.FILES["apt_pin"]] is None


def test_blacklist_false_removes_the_file():
    assert files(plan(node()))[kd.FILES["blacklist"]].endswith("blacklist nouveau\noptions nouveau modeset=0\n")
    assert files(plan(node(), blacklist_nouveau=False))[kd.FILES["blacklist"]] is None


@pytest.mark.parametrize(("left", "right", "sign"), [
    ("535.309.01-0+deb12u1", "535.261.03-1", 1),
    ("535.261.03-1", "535.261.03-1~deb12u1", 1),
    ("1:535.1-1", "999.1-1", 1),
    ("550.54.14-1", "550.54.14-1", 0),
    ("550.9-1", "550.10-1", -1),
    ("1.0~rc1", "1.0", -1),
])
def test_debian_version_order(left, right, sign):
    result = kd.deb_version_compare(left, right)
    assert (result > 0) - (result < 0) == sign


def test_offered_versions_are_sorted_newest_first():
    result = plan(node(packages={"offered": ["535.261.03-1", "535.309.01-0+deb12u1", "535.261.03-1"]}))
    assert result["offered"] == BOOKWORM and result["target"] == BOOKWORM[0]


# --- files ----------------------------------------------------------------------------------------


def test_distro_source_adds_only_the_missing_components():
    result = plan(node())
    text = files(result)[kd.FILES["distro_sources"]]
    assert [e["components"] for e in result["missing_components"]] == [["contrib", "non-free"]] * 3
    assert "Suites: bookworm-security\nComponents: contrib non-free\n" in text
    assert "URIs: http://deb.debian.org/debian-security\nSuites: bookworm-security" in text


def test_distro_source_removed_when_the_node_has_every_component():
    complete = {"/etc/apt/sources.list.d/debian.sources": (
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates bookworm-security\n"
        "Components: main contrib non-free non-free-firmware\n")}
    result = plan(node(apt_sources=complete))
    assert result["missing_components"] == [] and files(result)[kd.FILES["distro_sources"]] is None


def test_the_roles_own_source_file_does_not_count():
    own = {**STOCK_BOOKWORM, kd.FILES["distro_sources"]: (
        "Types: deb\nURIs: http://x\nSuites: bookworm bookworm-updates bookworm-security\n"
        "Components: contrib non-free non-free-firmware\n")}
    assert len(plan(node(apt_sources=own))["missing_components"]) == 3


def test_every_file_is_0644_and_written_by_the_project():
    for entry in plan(node(), source="cuda_repo")["files"]:
        assert entry["mode"] == "0644"
        assert entry["content"] is None or entry["content"].startswith("# Written by kube-gpu-nodes (nvidia_driver).")


# --- render assumptions ---------------------------------------------------------------------------


def test_render_with_only_the_os_assumes_and_says_so():
    result = plan()
    assert result["target"] == "535.*"
    assert "Pin: version 535.*" in files(result)[kd.FILES["apt_pin"]]
    said = " | ".join(result["assumed"])
    for words in ("no GPU facts recorded", "x86_64 assumed", "pinned as 535.*", "apt sources were not recorded",
                  "<running kernel>", "no package state recorded"):
        assert words in said
    assert len(result["missing_components"]) == 3


def test_host_plan_has_the_section():
    section = host_plan({"nvidia_driver": INPUTS}, {"nvidia_driver": {"os": OS["Ubuntu-24"]}})["nvidia_driver"]
    assert section["platform"] == "Ubuntu-24"


# --- runfile and dnf ------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "target", "args"), [
    ("NVIDIA-Linux-x86_64-535.216.01.run", "535.216.01", ["--silent", "--dkms", "--no-questions", "--ui=none"]),
    ("cuda_10.2.89_440.33.01_linux.run", "440.33.01", ["--silent", "--driver"]),
])
def test_runfile_names_and_flags(name, target, args):
    result = kd.runfile_plan({**INPUTS, "runfile_url": f"http://mirror/{name}", "runfile_extra_args": ["-x"]}, "")
    assert result["target"] == target and result["args"] == [*args, "-x"]
    assert result["installer"] == f"/var/tmp/{name}" and result["due"] is True
    assert kd.runfile_plan({**INPUTS, "runfile_path": f"/srv/{name}"}, target)["due"] is False


def test_runfile_open_modules_flag():
    result = kd.runfile_plan({**INPUTS, "kernel_module": "open", "runfile_path": "/x/NVIDIA-Linux-x86_64-570.1.run"},
                             "")
    assert result["args"][-1] == "--kernel-module-type=open"


@pytest.mark.parametrize(("inputs", "message"), [
    ({}, "needs exactly one of"),
    ({"runfile_url": "http://a/NVIDIA-Linux-x86_64-535.1.run", "runfile_path": "/b"}, "needs exactly one of"),
    ({"runfile_url": "ftp://a/NVIDIA-Linux-x86_64-535.1.run"}, "is not an http"),
    ({"runfile_path": "/srv/driver.run"}, "cannot tell the driver version"),
])
def test_runfile_refusals(inputs, message):
    with pytest.raises(KgnError, match=message):
        kd.runfile_plan({**INPUTS, **inputs}, "")


def rhel(packages=None, **inputs):
    observed = {"os": OS["RedHat-9"], "architecture": "x86_64", "kernel": "5.14.0-427.el9.x86_64",
                "initramfs_tools": ["dracut"], "gpu": {}, "driver": {"present": False, "owned": True},
                "packages": {"installed": "", "held": [], "present": [], "stack": [], "locked": [], **(packages or {})}}
    return kd.driver_plan({**INPUTS, "source": "cuda_repo", "branch": "550", **inputs}, observed)


def test_dnf_fresh_install_plan():
    result = rhel()
    assert result["specs"] == ["nvidia-driver", "nvidia-driver-cuda", "nvidia-persistenced"]
    assert result["missing"] == result["specs"] and result["target"] == "550.*"
    assert result["headers_missing"] is True
    assert result["kernels"]["headers_to_install"] == ["kernel-devel-5.14.0-427.el9.x86_64"]
    assert result["hold_changes"] == {"hold": ["nvidia-*", "kmod-nvidia-*", "libnvidia-*", "dkms-nvidia"],
                                      "unhold": []}
    assert result["module_changes"] is True


def test_dnf_installed_and_locked_is_a_no_op():
    done = {"installed": "550.90.07", "held": ["nvidia-driver"], "locked": ["nvidia-driver-3:550.90.07-1.el9.*"],
            "present": ["nvidia-driver=550.90.07", "nvidia-driver-cuda=550.90.07", "nvidia-persistenced=550.90.07",
                        "kernel-devel-5.14.0-427.el9.x86_64=installed"]}
    result = rhel(done)
    assert result["missing"] == [] and result["hold_changes"] == {"hold": [], "unhold": []}
    assert result["target"] == "550.90.07" and result["module_changes"] is False


def test_dnf_exact_version_and_planned_upgrade():
    locked = {"installed": "550.90.07", "held": ["nvidia-driver"], "locked": ["nvidia-driver-3:550.90.07-1.el9.*"],
              "present": ["nvidia-driver=550.90.07"]}
    with pytest.raises(KgnError, match=r"held at 550\.90\.07"):
        rhel(locked, version="550.127.05")
    result = rhel(locked, version="550.127.05", allow_upgrade=True)
    assert result["specs"] == ["nvidia-driver-550.127.05", "nvidia-driver-cuda-550.127.05",
                               "nvidia-persistenced-550.127.05"]
    assert result["release"] == result["versionlock_patterns"] and result["upgrade"] is True


def test_dnf_hold_false_deletes_the_locks():
    locked = {"installed": "550.90.07", "locked": ["nvidia-driver-3:550.90.07-1.el9.*"],
              "present": ["nvidia-driver=550.90.07", "nvidia-driver-cuda=550.90.07", "nvidia-persistenced=550.90.07"]}
    assert rhel(locked, hold=False)["hold_changes"]["unhold"] == ["nvidia-*", "kmod-nvidia-*", "libnvidia-*",
                                                                  "dkms-nvidia"]


def test_stack_excludes_the_container_toolkit():
    assert kd.is_stack_package("libnvidia-ml1") and kd.is_stack_package("firmware-nvidia-gsp")
    for name in ("nvidia-container-toolkit", "libnvidia-container1", "nvidia-docker2", "bash"):
        assert not kd.is_stack_package(name)


# --- the module: parsers ----------------------------------------------------------------------------


def test_os_release_parser():
    text = 'PRETTY_NAME="Rocky Linux 9.3"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n'
    assert state.os_release(text) == {"id": "rocky", "version_id": "9.3", "id_like": "rhel centos fedora"}


@pytest.mark.parametrize(("text", "version", "flavour"), [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n", "535.104.05",
     "proprietary"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build\n", "550.54.14", "open"),
    ("", "", ""),
])
def test_kernel_module_version(text, version, flavour):
    assert smi.parse_proc_version(text) == {"version": version, "flavour": flavour}


def test_dry_run_report():
    text = ("The following NEW packages will be installed:\n  nvidia-driver nvidia-smi\n  libcuda1\n"
            "0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.\nNeed to get 255 MB of archives.\n"
            "After this operation, 845 MB of additional disk space will be used.\nAbort.\n")
    report = mod.dry_run_report(text)
    assert report["download"] == "Need to get 255 MB of archives."
    assert report["disk"].startswith("After this operation, 845 MB")
    assert report["packages"] == ["libcuda1", "nvidia-driver", "nvidia-smi"]


def test_lists_older_than_an_hour_or_than_a_source_file_are_stale(tmp_path, monkeypatch):
    lists, source = tmp_path / "lists", tmp_path / "kgn-nvidia-driver.sources"
    lists.mkdir()
    source.write_text("Types: deb\n")
    monkeypatch.setattr(mod, "APT_LISTS", (str(lists),))
    minute_ago = time.time() - 60
    os.utime(lists, (minute_ago, minute_ago))
    assert mod.lists_stale([str(source)])  # written after the last refresh (a run that stopped there)
    os.utime(source, (minute_ago - 10, minute_ago - 10))
    assert not mod.lists_stale([str(source)])
    os.utime(lists, (minute_ago - 7200, minute_ago - 7200))
    assert mod.lists_stale([str(source)])


def test_locked_names():
    assert state._locked_names(["nvidia-driver-3:550.90.07-1.el9.*", "kmod-nvidia-latest-dkms-3:550.90.07-1.el9.*"]) \
        == ["kmod-nvidia-latest-dkms", "nvidia-driver"]


# --- the module: command sequences ------------------------------------------------------------------


class FakeModule:
    """run_command answers from a table of (argv prefix -> (rc, out, err)); every call is recorded."""

    TOOLS = ("apt-get", "apt-mark", "apt-cache", "dpkg-query", "dpkg", "systemctl", "dnf", "rpm", "sh",
             "update-initramfs", "dracut")

    def __init__(self, answers=None, check_mode=False, tools=TOOLS):
        self.answers, self.check_mode, self.tools, self.calls = answers or {}, check_mode, tools, []
        self.params = {}
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)

    def get_bin_path(self, name):
        return f"/usr/bin/{name}" if name in self.tools else None

    def run_command(self, argv, **_):
        argv = argv[2:] if argv[0] == "timeout" else argv
        self.calls.append(argv)
        for prefix, answer in self.answers.items():
            if tuple(argv[:len(prefix)]) == prefix:
                return answer(self) if callable(answer) else answer
        return 0, "", ""

    def ran(self, *prefix):
        return any(c[:len(prefix)] == list(prefix) for c in self.calls)

    def commands(self, *firsts):
        return [c for c in self.calls if c[0] in firsts]


@pytest.fixture
def quiet_node(monkeypatch, tmp_path):
    """No file of the test machine is read or written: pending files, writes and the event log are recorded."""
    written, events = [], []
    monkeypatch.setattr(mod.change, "pending", lambda changes: [dict(c, before=None) for c in changes
                                                                if c.get("content") is not None])
    monkeypatch.setattr(mod.change, "write", lambda todo, *a, **k: written.extend(t["path"] for t in todo) or [])
    monkeypatch.setattr(mod.devices, "nvidia_device_nodes", list)
    monkeypatch.setattr(mod, "log_event", lambda path, text: events.append(text))
    monkeypatch.setattr(mod, "lists_stale", lambda sources: True)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("")
    monkeypatch.setattr(mod, "NVIDIA_SMI", str(smi))
    return {"written": written, "events": events, "smi": smi}


def _dpkg_rows(rows, held=False):
    return "".join(f"{'hi' if held else 'ii'} |{name}|{version}\n" for name, version in rows.items())


def test_apt_fresh_install_sequence(quiet_node, monkeypatch):
    after = {"nvidia-driver": BOOKWORM[0], "nvidia-smi": BOOKWORM[0], "libcuda1": BOOKWORM[0],
             "firmware-nvidia-gsp": BOOKWORM[0]}
    fake = FakeModule({
        ("dpkg-query", "-W"): lambda f: (0, _dpkg_rows(after) if f.ran("apt-get", "install", "-y") else "", ""),
        ("apt-cache", "madison"): (0, "".join(f" nvidia-driver | {v} | http://deb.debian.org x\n" for v in BOOKWORM),
                                   ""),
        ("apt-get", "-o", "Debug::NoLocking=1"): (1, "Need to get 255 MB of archives.\nAbort.\n", ""),
        ("apt-get", "install", "-y"): (0, "Unpacking nvidia-driver ...\nSetting up nvidia-driver ...\n", ""),
        ("systemctl", "show"): (0, "LoadState=loaded\nActiveState=inactive\nUnitFileState=enabled\n", ""),
    })
    inputs = {**INPUTS, "kernel_headers": False, "persistenced_start": False}
    observed = node(packages={"offered": []})  # stale lists: the version is chosen after the refresh
    run = mod.Run(fake, inputs, observed, kd.driver_plan(inputs, observed))
    monkeypatch.setattr(state, "kernels", lambda module: {"running": "6.18.44", "kernels": [], "dkms": {}})
    run.apply_apt()
    run.kernel_side()
    run.kernel_modules()
    run.persistenced()
    run.request_reboot()
    # the kernels are read again after the install; the plan the result reports is still what the run installed
    assert run.plan["missing"] and run.plan["kernels"]["recorded"] is True
    apt = [c for c in fake.calls if c[0] in ("apt-get", "apt-mark") and c[1] != "check"]
    assert apt[0] == ["apt-get", "update", "-q"]
    assert apt[1][:5] == ["apt-get", "-o", "Debug::NoLocking=1", "install", "--assume-no"]
    install = apt[2]
    assert install[:3] == ["apt-get", "install", "-y"] and "--no-install-recommends" in install
    assert "--allow-downgrades" not in install
    assert install[-6:] == [f"{p}={BOOKWORM[0]}" for p in DISTRO[("Debian-12", "proprietary")][:5]] + [
        "nvidia-persistenced"]
    assert apt[3] == ["apt-mark", "hold", "firmware-nvidia-gsp", "libcuda1", "nvidia-driver", "nvidia-smi"]
    assert len(apt) == 4
    assert quiet_node["written"] == [kd.FILES["distro_sources"], kd.FILES["apt_pin"], kd.FILES["blacklist"]]
    assert quiet_node["events"] == [f"installed nvidia-driver={BOOKWORM[0]} (was absent)",
                                    f"reboot-requested: kernel module changed to {BOOKWORM[0]}"]
    assert run.download == "Need to get 255 MB of archives." and run.module_changed
    assert fake.commands("update-initramfs") == [["update-initramfs", "-u"]]  # the blacklist changed


def test_apt_planned_upgrade_releases_then_allows_downgrades(quiet_node):
    stack = {"nvidia-driver": "535.261.03-1", "nvidia-smi": "535.261.03-1"}
    # dpkg's selection says the hold (db:Status-Abbrev "hi"), until the run releases it
    fake = FakeModule({("dpkg-query", "-W"): lambda f: (0, _dpkg_rows(stack, held=not f.ran("apt-mark", "unhold")),
                                                         ""),
                       ("apt-cache", "madison"): (0, f" nvidia-driver | {BOOKWORM[0]} | x\n", ""),
                       ("apt-get", "install", "-y"): (0, "Unpacking x\n", "")})
    observed = node(packages={"installed": "535.261.03-1", "held": ["nvidia-driver", "nvidia-smi"],
                              "stack": sorted(stack), "present": [f"{n}={v}" for n, v in stack.items()]})
    inputs = {**INPUTS, "version": "535.309.01", "allow_upgrade": True, "kernel_headers": False}
    run = mod.Run(fake, inputs, observed, kd.driver_plan(inputs, observed))
    run.apply_apt()
    apt = [c for c in fake.calls if c[0] == "apt-mark"]
    assert apt[0] == ["apt-mark", "unhold", "nvidia-driver", "nvidia-smi"]
    assert apt[-1] == ["apt-mark", "hold", "nvidia-driver", "nvidia-smi"]  # released above, held again
    install = next(c for c in fake.calls if c[:3] == ["apt-get", "install", "-y"])
    assert "--allow-downgrades" in install and f"nvidia-driver={BOOKWORM[0]}" in install
    assert quiet_node["events"] == [f"installed nvidia-driver={BOOKWORM[0]} (was 535.261.03-1)"]


def test_apt_no_op_runs_nothing_that_changes(quiet_node, monkeypatch):
    versions = {p: BOOKWORM[0] for p in DISTRO[("Debian-12", "proprietary")][:5]}
    versions["nvidia-persistenced"] = "535.171.04-1~deb12u1"
    fake = FakeModule({("systemctl", "show"): (0, "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n",
                                               "")})
    observed = node(packages={"installed": BOOKWORM[0], "held": sorted(versions), "stack": sorted(versions),
                              "versions": versions, "present": [f"{n}={v}" for n, v in versions.items()]
                              + ["linux-headers-6.1.0-18-amd64=6.1.76-1"]})
    monkeypatch.setattr(mod.change, "pending", lambda changes: [])  # every file already in place
    run = mod.Run(fake, INPUTS, observed, kd.driver_plan(INPUTS, observed))
    run.apply_apt()
    run.kernel_side()
    run.persistenced()
    assert not run.changed
    assert [c for c in fake.calls if c[0] in ("apt-get", "apt-mark") and c[1] != "check"] == []  # check only reads
    assert [c for c in fake.commands("dpkg") if c[1] != "--audit"] == [["dpkg", "--verify", *sorted(versions)]]


def test_the_persistenced_unit_is_read_again_only_after_a_step_of_the_run(quiet_node, monkeypatch):
    unit = {"loaded": True, "active": False, "enabled": True}
    fake = FakeModule({("systemctl", "show"): (0, "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n",
                                               "")})
    observed = node(persistenced=unit)
    monkeypatch.setattr(mod.change, "pending", lambda changes: [])
    run = mod.Run(fake, INPUTS, observed, kd.driver_plan(INPUTS, observed))
    run.persistenced()  # nothing done yet: the unit as observed at the start of the call, stopped, so started
    assert fake.commands("systemctl") == [["systemctl", "start", "nvidia-persistenced.service"]]
    run.persistenced()  # after a step: read again (now active: nothing more to do)
    assert [c[:2] for c in fake.commands("systemctl")] == [["systemctl", "start"], ["systemctl", "show"]]


def test_apt_repair_reinstalls_at_the_installed_version(quiet_node):
    quiet_node["smi"].unlink()
    versions = {"nvidia-smi": BOOKWORM[0], "nvidia-driver": BOOKWORM[0]}
    fake = FakeModule({("dpkg-query", "-S", "*/nvidia-smi"): (0, "nvidia-smi: /usr/lib/nvidia/current/nvidia-smi\n"
                                                                 "nvidia-smi: /usr/share/doc/nvidia-smi\n", ""),
                       ("dpkg-query", "-W"): (0, _dpkg_rows(versions), "")})
    observed = node(packages={"installed": BOOKWORM[0], "held": sorted(versions), "stack": sorted(versions),
                              "versions": versions, "present": [f"{n}={v}" for n, v in versions.items()]})
    inputs = {**INPUTS, "kernel_headers": False}
    plan_ = kd.driver_plan(inputs, observed)
    plan_["missing"] = []

    class Restores(FakeModule):
        def run_command(self, argv, **kw):
            if "--reinstall" in argv:
                quiet_node["smi"].write_text("")
            return super().run_command(argv, **kw)

    fake.__class__ = Restores
    run = mod.Run(fake, inputs, observed, plan_)
    run.apt_repair(versions)
    reinstall = next(c for c in fake.calls if "--reinstall" in c)
    assert reinstall[-1] == f"nvidia-smi={BOOKWORM[0]}"
    assert run.repaired == [f"nvidia-smi: {quiet_node['smi']} missing; reinstalled nvidia-smi={BOOKWORM[0]}"]
    assert quiet_node["events"] == [f"reinstalled nvidia-smi={BOOKWORM[0]} (missing {quiet_node['smi']})"]


def test_check_mode_changes_nothing_and_tells_what_would(quiet_node):
    fake = FakeModule({("apt-get", "-o", "Debug::NoLocking=1"): (1, "Need to get 255 MB of archives.\n", "")},
                      check_mode=True)
    observed = node()
    run = mod.Run(fake, INPUTS, observed, kd.driver_plan(INPUTS, observed))
    run.apply_apt()
    run.kernel_side()
    run.request_reboot()
    changing = [c for c in fake.calls if c[:2] in (["apt-get", "install"], ["apt-get", "update"])
                or c[0] == "apt-mark"]
    assert changing == [] and quiet_node["written"] == [] and quiet_node["events"] == []
    said = " | ".join(run.actions)
    for words in ("wrote /etc/apt/sources.list.d/kgn-nvidia-driver.sources", "refreshed the package lists",
                  f"installed nvidia-driver={BOOKWORM[0]}", "apt-mark hold", "linux-headers-6.1.0-18-amd64"):
        assert words in said
    assert run.module_changed and run.download == "Need to get 255 MB of archives."
    assert any(d.get("after_header") == "driver packages" for d in run.diff)


def rpm_node(packages=None):
    return {"os": OS["RedHat-9"], "architecture": "x86_64", "kernel": "5.14.0-427.el9.x86_64", "secure_boot": False,
            "initramfs_tools": ["dracut"], "gpu": {}, "driver": {"present": False, "owned": True}, "files": {},
            "packages": {"installed": "", "held": [], "present": [], "stack": [], "locked": [], "versions": {},
                         **(packages or {})}}


def test_dnf_fresh_install_sequence(quiet_node):
    answers = {("rpm", "-q", "--qf"): (0, "nvidia-driver=550.90.07\n", "")}
    fake = FakeModule(answers)
    inputs = {**INPUTS, "source": "cuda_repo", "branch": "550"}
    run = mod.Run(fake, inputs, rpm_node(), kd.driver_plan(inputs, rpm_node()))
    run.apply_dnf()
    run.kernel_side()
    run.request_reboot()
    dnf = [c for c in fake.commands("dnf") if c[1] != "-q"]  # not the read-only versionlock list
    assert dnf[0] == ["dnf", "install", "-y", "kernel-devel-5.14.0-427.el9.x86_64"]
    assert dnf[1] == ["dnf", "install", "-y", "--setopt=install_weak_deps=False", "@nvidia-driver:550-dkms/default",
                      "nvidia-driver", "nvidia-driver-cuda", "nvidia-persistenced"]
    assert dnf[2] == ["dnf", "versionlock", "add", "nvidia-*", "kmod-nvidia-*", "libnvidia-*", "dkms-nvidia"]
    assert len(dnf) == 3
    assert quiet_node["written"] == [kd.FILES["cuda_yum_repo"], kd.FILES["blacklist"]]
    assert fake.commands("dracut") == [["dracut", "-f"]]
    assert quiet_node["events"] == ["installed nvidia-driver=550.90.07 (was absent)",
                                    "reboot-requested: kernel module changed to 550.90.07"]


def test_dnf_planned_upgrade_deletes_the_locks_first(quiet_node):
    fake = FakeModule({("rpm", "-q", "--qf"): (0, "nvidia-driver=550.127.05\n", "")})
    locked = {"installed": "550.90.07", "held": ["nvidia-driver"], "locked": ["nvidia-driver-3:550.90.07-1.el9.*"],
              "present": ["nvidia-driver=550.90.07", "kernel-devel-5.14.0-427.el9.x86_64=installed"]}
    inputs = {**INPUTS, "source": "cuda_repo", "branch": "550", "version": "550.127.05", "allow_upgrade": True}
    run = mod.Run(fake, inputs, rpm_node(locked), kd.driver_plan(inputs, rpm_node(locked)))
    run.apply_dnf()
    dnf = [c for c in fake.commands("dnf") if c[1] != "-q"]  # not the read-only versionlock list
    assert dnf[0][:3] == ["dnf", "versionlock", "delete"]
    assert dnf[1][-3:] == ["nvidia-driver-550.127.05", "nvidia-driver-cuda-550.127.05",
                           "nvidia-persistenced-550.127.05"]
    assert dnf[2][:3] == ["dnf", "versionlock", "add"]
    assert run.module_changed and quiet_node["events"][0] == "installed nvidia-driver=550.127.05 (was 550.90.07)"


def test_runfile_sequence(quiet_node, tmp_path, monkeypatch):
    installer = tmp_path / "NVIDIA-Linux-x86_64-535.216.01.run"
    installer.write_text("#!/bin/sh\n")
    inputs = {**INPUTS, "source": "runfile", "runfile_path": str(installer)}
    plan_ = kd.driver_plan(inputs, node())
    plan_["runfile"]["installer"] = str(installer)
    fake = FakeModule()
    run = mod.Run(fake, inputs, node(), plan_)
    run.apply_runfile()
    run.request_reboot()
    assert fake.commands("sh") == [["sh", str(installer), "--silent", "--dkms", "--no-questions", "--ui=none"]]
    assert quiet_node["written"] == [kd.FILES["runfile_stamp"]]
    assert quiet_node["events"][-1] == "reboot-requested: kernel module changed to 535.216.01"
    again = mod.Run(FakeModule(), inputs, node(runfile_installed="535.216.01"),
                    kd.driver_plan(inputs, node(runfile_installed="535.216.01")))
    again.apply_runfile()
    assert not again.changed


def test_adopted_driver_run_touches_no_package_and_warns_once(quiet_node):
    fake = FakeModule({("systemctl", "show"): (0, "LoadState=not-found\nActiveState=inactive\n", "")})
    observed = node(driver=FOREIGN)
    run = mod.Run(fake, INPUTS, observed, kd.driver_plan(INPUTS, observed))
    run.apply_adopted()
    run.kernel_side()
    run.persistenced()
    assert not fake.commands("apt-get", "apt-mark", "dpkg")
    # the stand-in change.pending reports every file with content as new: the pin and the blacklist
    assert quiet_node["written"] == [kd.FILES["apt_pin"], kd.FILES["blacklist"]]
    assert len(fake.warnings) == 1 and fake.warnings[0].startswith("adopted: the NVIDIA driver 535.104.05")
    assert quiet_node["events"][0].startswith("adopted the driver 535.104.05")


def test_driver_state_finds_a_driver_by_its_nvml_library_alone(monkeypatch, tmp_path):
    lib = tmp_path / "libnvidia-ml.so.450.102.04"
    lib.write_text("")
    (tmp_path / "libnvidia-ml.so.1").symlink_to(lib.name)
    monkeypatch.setattr(state, "NVML_GLOBS", (str(tmp_path / "libnvidia-ml.so.*.*"),))
    monkeypatch.setattr(smi, "PROC_VERSION", str(tmp_path / "no-proc-version"))
    # dpkg owns nothing of it
    fake = FakeModule({("dpkg-query", "-S"): (1, "", "no path found matching pattern")}, tools=("dpkg-query",))
    found = state.driver_state(fake, "debian", [], "")
    assert found == {"present": True, "version": "450.102.04", "kernel_module_version": "", "kernel_module": "",
                     "kernel_module_source": "", "nvidia_smi": "", "library": str(lib), "package_version": "",
                     "owner": "", "owned": False}
    # a package owning the library makes it ours
    fake = FakeModule({("dpkg-query", "-S"): (0, f"libnvidia-ml1:amd64: {lib}\n", "")}, tools=("dpkg-query",))
    assert state.driver_state(fake, "debian", [], "")["owned"] is True


# --- a CUDA repository source that is not ours (NVIDIA's cuda-keyring package, or written by hand) ------------

CUDA_2204 = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64"


@pytest.mark.parametrize(("path", "text"), [
    # what the cuda-keyring package installs
    ("/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list",
     f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA_2204}/ /\n"),
    # the same without the trailing slash, as in some guides
    ("/etc/apt/sources.list.d/cuda.list",
     f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA_2204} /\n"),
    ("/etc/apt/sources.list.d/cuda.sources",
     f"Types: deb\nURIs: {CUDA_2204}/\nSuites: /\nSigned-By: /usr/share/keyrings/cuda-archive-keyring.gpg\n"),
])
def test_cuda_repo_uses_the_source_already_on_the_node(path, text):
    observed = node("Ubuntu-22", apt_sources={path: text}, files={kd.FILES["cuda_sources"]: "old"}, cuda_keyring=True)
    result = kd.driver_plan({**INPUTS, "source": "cuda_repo", "branch": "570"}, observed)
    assert result["cuda_source_found"] == path
    # ours goes (apt refuses two entries of one URI with different Signed-By), and so does our key
    assert files(result)[kd.FILES["cuda_sources"]] is None
    assert result["cuda_keyring"]["wanted"] is False


@pytest.mark.parametrize("text", [
    f"# deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {CUDA_2204}/ /\n",  # commented out
    f"deb-src {CUDA_2204}/ /\n",  # sources only
    f"Types: deb\nURIs: {CUDA_2204}/\nSuites: /\nEnabled: no\n",  # disabled stanza (in a .sources file below)
    "deb https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/ /\n",  # another release
])
def test_cuda_repo_writes_its_own_source_when_none_enables_the_repository(text):
    path = "/etc/apt/sources.list.d/x.sources" if text.startswith("Types") else "/etc/apt/sources.list.d/x.list"
    result = kd.driver_plan({**INPUTS, "source": "cuda_repo", "branch": "570"},
                            node("Ubuntu-22", apt_sources={path: text}))
    assert result["cuda_source_found"] == ""
    assert f"URIs: {CUDA_2204}/\n" in files(result)[kd.FILES["cuda_sources"]]
    assert result["cuda_keyring"]["wanted"] is True


def test_our_own_cuda_source_is_not_taken_for_a_foreign_one():
    ours = {kd.FILES["cuda_sources"]: f"Types: deb\nURIs: {CUDA_2204}/\nSuites: /\n"}
    assert kd.foreign_cuda_source(ours, CUDA_2204) == ""


def test_apt_an_interrupted_dpkg_of_the_driver_is_finished_first_and_said(quiet_node):
    """The shared package-health repair (module_utils/driver/pkghealth.py) runs before anything else apt does."""
    stack = {"nvidia-driver": BOOKWORM[0], "nvidia-smi": BOOKWORM[0]}
    fake = FakeModule({
        ("dpkg-query", "-W", "-f", "${db:Status-Abbrev}|${Package}|${Version}\n"): lambda f: (
            0, "" if f.ran("dpkg", "--configure") else f"iU |nvidia-smi|{BOOKWORM[0]}\n", ""),
        ("dpkg", "--audit"): lambda f: (0, "" if f.ran("dpkg", "--configure") else " nvidia-smi NVIDIA\n", ""),
        ("apt-get", "check"): lambda f: (0 if f.ran("dpkg", "--configure") else 100, "",
                                         "E: dpkg was interrupted, you must manually run 'dpkg --configure -a'"),
        ("dpkg-query", "-W"): (0, _dpkg_rows(stack), ""),
        ("apt-cache", "madison"): (0, f" nvidia-driver | {BOOKWORM[0]} | x\n", ""),
        ("apt-get", "install", "-y"): (0, "Unpacking x\n", "")})
    observed = node(packages={"installed": BOOKWORM[0], "held": [], "stack": sorted(stack),
                              "present": [f"{n}={v}" for n, v in stack.items()]})
    run = mod.Run(fake, INPUTS, observed, kd.driver_plan(INPUTS, observed))
    run.apply_apt()
    assert fake.calls.index(["dpkg", "--configure", "-a"]) < min(
        i for i, c in enumerate(fake.calls) if c[:2] in (["apt-get", "update"], ["apt-get", "install"]))
    assert any("unpacked but not configured" in r and "dpkg --configure -a" in r for r in run.repaired)
    assert "dpkg --configure -a (finish the interrupted dpkg)" in run.actions


def test_observe_reads_the_node_once_through_driver_state(quiet_node, monkeypatch):
    # nvidia-kernel-common has a version of its own (Debian's nvidia-support source): not the driver's
    stack = {"nvidia-driver": "550.163.01-2", "nvidia-smi": "550.163.01-2", "nvidia-kernel-dkms": "550.163.01-2",
             "nvidia-kernel-common": "20240109+1", "nvidia-modprobe": "550.127.05-1"}
    held = {n: v for n, v in stack.items() if n in ("nvidia-driver", "nvidia-smi")}
    rows = _dpkg_rows(held, held=True) + _dpkg_rows({n: v for n, v in stack.items() if n not in held})
    fake = FakeModule({("dpkg-query", "-W"): (0, rows, ""),
                       ("apt-cache", "madison"): (0, " nvidia-driver | 550.163.01-2 | x\n", "")})
    monkeypatch.setattr(mod.host, "read", lambda path, *a, **k: (
        'ID=debian\nVERSION_ID="13"\n' if path == "/etc/os-release" else None))
    monkeypatch.setattr(state, "kernels", lambda module: {"running": "6.18.44", "kernels": [], "dkms": {}})
    inputs = {**INPUTS, "branch": "auto", "kernel_module": "auto"}
    observed = mod.observe(fake, inputs, {"gpus": [{"product_name": "Tesla T4"}]})
    assert observed["os"] == {"id": "debian", "version_id": "13", "id_like": ""}
    assert observed["packages"]["installed"] == "550.163.01-2" and observed["packages"]["held"] == [
        "nvidia-driver", "nvidia-smi"]
    assert not fake.ran("apt-mark")  # the holds come from dpkg-query's selection, not apt-mark showhold
    assert observed["driver"]["package_version"] == "550.163.01" and observed["kernels"]["kernels"] == []
    plan_ = kd.driver_plan({**inputs, "today": "2026-11-26"}, observed)
    assert (plan_["branch"], plan_["kernel_module"], plan_["branch_choice"]["how"]) == ("550", "proprietary",
                                                                                          "installed")


def test_a_kernel_still_without_the_module_after_the_install_is_built(quiet_node, monkeypatch):
    kernel = "6.12.117+deb13-amd64"
    added = {"present": True, "modules": [{"module": "nvidia-current", "version": "550.163.01", "kernel": "",
                                           "state": "added"}]}
    bare = {"version": kernel, "running": False, "headers": True, "module": "", "module_version": "",
            "signed": False}
    built = {**bare, "module": f"/lib/modules/{kernel}/updates/dkms/nvidia-current.ko.xz",
             "module_version": "550.163.01"}
    fake = FakeModule({("dpkg-query", "-W"): (0, _dpkg_rows({"nvidia-driver": "550.163.01-2"}), "")},
                      tools=(*FakeModule.TOOLS, "dkms"))
    monkeypatch.setattr(state, "kernels", lambda module: {"running": "6.18.44", "dkms": added, "kernels": [
        built if module.ran("dkms", "autoinstall") else bare]})
    observed = node("Debian-13", packages={"installed": "550.163.01-2", "present": ["nvidia-driver=550.163.01-2"],
                                           "offered": ["550.163.01-2"], "stack": ["nvidia-driver"],
                                           "held": ["nvidia-driver"]},
                    kernels={"running": "6.18.44", "dkms": added, "kernels": [bare]})
    inputs = {**INPUTS, "branch": "550"}
    run = mod.Run(fake, inputs, observed, kd.driver_plan(inputs, observed))
    assert run.plan["kernels"]["builds"] == [kernel]
    run.kernel_modules()
    assert fake.commands("dkms") == [["dkms", "autoinstall", "-k", kernel]]
    assert f"built the NVIDIA module for kernel {kernel} (dkms autoinstall -k {kernel})" in run.actions
    assert run.plan["kernels"]["kernels"][0]["status"] == "ok"


def test_what_a_run_installed_is_recorded_in_words_for_the_role_and_the_report():
    class Run:
        check, download, disk = False, "Need to get 207 MB of archives.", "After this operation, 688 MB will be used."

    plan = {"missing": ["nvidia-driver=550.163.01-2"], "version_package": "nvidia-driver", "target": "550.163.01-2"}
    assert mod.install_words(Run, plan) == [
        "installed nvidia-driver=550.163.01-2: Need to get 207 MB of archives. After this operation, 688 MB will be "
        "used."]
    Run.check, Run.download, Run.disk = True, "", ""
    assert mod.install_words(Run, plan) == ["would install nvidia-driver=550.163.01-2: download size unknown"]
    assert mod.install_words(Run, dict(plan, missing=[])) == []  # nothing installed: no change to report
