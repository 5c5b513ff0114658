"""What the nvidia_driver role leaves on a Debian node (real non-free packages, no GPU)."""

from __future__ import annotations

import json

BRANCH = {"nvidia_driver-bookworm": "535", "nvidia_driver-trixie": "550"}
STACK = ("nvidia-driver", "nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "firmware-nvidia-gsp", "nvidia-persistenced")


def _name(host) -> str:
    return host.backend.get_hostname()


def test_driver_of_the_pinned_branch_is_installed(host):
    pkg = host.package("nvidia-driver")
    assert pkg.is_installed
    assert pkg.version.startswith(BRANCH[_name(host)] + ".")


def test_driver_stack_is_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    missing = [p for p in STACK if p not in held]
    assert missing == [], f"not held: {missing}"


def test_apt_pin_names_the_installed_version(host):
    pin = host.file("/etc/apt/preferences.d/kgn-nvidia-driver.pref")
    assert pin.exists and pin.mode == 0o644
    assert f"Pin: version {host.package('nvidia-driver').version}" in pin.content_string
    # apt itself agrees: the installed version is the pinned candidate at priority 1001.
    policy = host.check_output("apt-cache policy nvidia-driver")
    assert "1001" in policy


def test_server_install_skips_the_recommends(host):
    # --no-install-recommends: nvidia-settings (Recommends of nvidia-driver) and the Vulkan ICD
    # (Recommends of nvidia-driver-libs) stay out. (Debian's nvidia-driver still Depends on the X
    # driver package; see the role README.)
    assert not host.package("nvidia-settings").is_installed
    assert not host.package("nvidia-vulkan-icd").is_installed


def test_non_free_was_added_without_touching_the_stock_sources(host):
    own = host.file("/etc/apt/sources.list.d/kgn-nvidia-driver.sources").content_string
    assert "Components: contrib non-free" in own
    if _name(host).endswith("bookworm"):
        stock = host.file("/etc/apt/sources.list").content_string
        assert "non-free " not in stock.replace("non-free-firmware", "")
    else:
        stock = host.file("/etc/apt/sources.list.d/debian.sources").content_string
        assert "Components: main non-free-firmware" in stock


def test_nouveau_is_blacklisted(host):
    blacklist = host.file("/etc/modprobe.d/kgn-blacklist-nouveau.conf")
    assert blacklist.exists and blacklist.mode == 0o644
    assert blacklist.contains("^blacklist nouveau$")
    assert blacklist.contains("^options nouveau modeset=0$")


def test_persistence_daemon_unit_is_present_and_enabled(host):
    unit = host.service("nvidia-persistenced")
    assert unit.is_enabled


def test_missing_nvidia_smi_was_reinstalled_and_said_so(host):
    # side_effect.yml deleted /usr/bin/nvidia-smi: check mode said what it would repair and left it
    # missing; the run reinstalled the package at its installed version and listed it in `repaired`.
    report = json.loads(host.file("/var/log/kgn/nvidia_driver_repair.json").content_string)
    # read from the role's record of each run (kgn_state_nvidia_driver): the check's and then the real run's
    assert report["check_mode"] is True and report["check_mode_run"] is False, report
    assert report["check_changed"] is True and report["missing_after_check"] is True, report
    assert any("would reinstall nvidia-smi=" in line for line in report["check_would_repair"]), report
    assert report["changed"] is True and report["present_after_run"] is True, report
    version = host.package("nvidia-smi").version
    wanted = f"/usr/bin/nvidia-smi missing; reinstalled nvidia-smi={version}"
    assert any(wanted in line for line in report["repaired"]), report
    assert host.file("/usr/bin/nvidia-smi").exists
    assert "nvidia-smi" in host.check_output("apt-mark showhold").split()  # held again after the reinstall
    log = host.file("/var/log/kgn/nvidia_driver.log").content_string
    assert f"reinstalled nvidia-smi={version} (missing /usr/bin/nvidia-smi)" in log


def test_second_run_did_not_reinstall_or_request_a_reboot(host):
    # dpkg logs every install; the role logs every install and reboot request it makes.
    installs = host.check_output("grep -c ' install nvidia-driver:' /var/log/dpkg.log || true")
    assert installs.strip() == "1"
    log = host.file("/var/log/kgn/nvidia_driver.log").content_string.splitlines()
    assert len([line for line in log if " installed nvidia-driver=" in line]) == 1
    assert len([line for line in log if "reboot-requested" in line]) == 1


def test_nvidia_smi_reports_the_missing_kernel_module_not_a_crash(host):
    # No GPU and no module in a container: gpu_facts must get this message, not a traceback.
    result = host.run("nvidia-smi -q -x")
    assert result.rc != 0
    assert "couldn't communicate with the NVIDIA driver" in result.stdout + result.stderr


def test_bad_inputs_failed_early_and_changed_nothing(host):
    report = json.loads(host.file("/var/log/kgn/nvidia_driver_bad_inputs.json").content_string)
    assert {case["case"] for case in report} == {
        "unknown source",
        "cuda the driver cannot run",
        "branch without support for the gpu",
        "flavour the gpu cannot run",
        "runfile url 404",
        "held driver outside a planned upgrade",
    }
    for case in report:
        assert case["failed"] is True, case
        assert case["expected"] in case["message"], case
        assert case["before"] == case["after"], case
