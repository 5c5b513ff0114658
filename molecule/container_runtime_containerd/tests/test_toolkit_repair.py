"""nvidia_container_toolkit keeps the toolkit whole: a deleted /usr/bin/nvidia-container-runtime is found by
dpkg --verify, announced by check mode, reinstalled at its pin by the next run (side_effect.yml)."""

from __future__ import annotations

import json

CASE = "/var/tmp/kgn-side-effect/toolkit_repair.json"


def _case(host) -> dict:
    return json.loads(host.file(CASE).content_string)


def test_check_mode_announces_the_reinstall_and_changes_nothing(host):
    case = _case(host)
    # read from the role's record of each run (kgn_state_nvidia_container_toolkit)
    assert case["check_changed"] is True and case["check_mode"] is True
    version = host.package("nvidia-container-toolkit-base").version
    assert case["would_repair"] == [f"nvidia-container-toolkit-base={version}"]
    assert case["exists_after_check"] is False


def test_the_run_reinstalls_the_package_and_says_so(host):
    case = _case(host)
    assert case["repair_changed"] is True
    (repaired,) = case["repaired"]
    assert repaired.startswith("nvidia-container-toolkit-base 1.20.0")
    assert "/usr/bin/nvidia-container-runtime is missing" in repaired
    assert case["exists_after_repair"] is True and case["mode_after_repair"] == "0755"
    assert case["live"]["problems"] == []
    assert case["live"]["binary"]["executes"] is True


def test_the_next_run_has_nothing_left_to_do(host):
    case = _case(host)
    assert case["again_changed"] is False and case["again_check_mode"] is False


def test_the_binary_is_back_and_verifies(host):
    assert host.file("/usr/bin/nvidia-container-runtime").contains("STAND-IN")
    # conffiles (c) left out: the refresh service's env file is one the runtime role edits on purpose (CDI mode)
    verify = host.run("dpkg --verify nvidia-container-toolkit-base").stdout.splitlines()
    assert [line for line in verify if " c /" not in line] == []


def test_toolkit_packages_are_held_at_their_pin(host):
    held = host.check_output("apt-mark showhold").split()
    assert {"nvidia-container-toolkit", "nvidia-container-toolkit-base"} <= set(held)
    assert host.package("nvidia-container-toolkit-base").version.startswith("1.20.0")
