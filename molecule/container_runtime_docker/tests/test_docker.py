"""Docker on a bookworm GPU node: nvidia is Docker's default runtime, merged into the reference daemon.json."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
REFERENCE = json.loads((PROJECT / "lab/roles/lab_gpu_node/files/reference-daemon.json").read_text())
STANDIN_LOG = "/var/log/nvidia-container-runtime-standin.log"


def _daemon_json(host) -> dict:
    return json.loads(host.file("/etc/docker/daemon.json").content_string)


def test_docker_info_reports_nvidia_as_default_runtime(host):
    out = host.check_output("docker info")
    assert "Default Runtime: nvidia" in out
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert "nvidia" in runtimes


def test_docker_run_goes_through_the_standin_runtime(host):
    name = f"kgn-probe-{uuid.uuid4().hex[:8]}"
    container_id = host.check_output(
        f"docker create --name {name} --network none kgn-lab/busybox:local /bin/busybox true"
    )
    try:
        result = host.run(f"docker start --attach {name}")
        assert result.rc == 0, result.stderr
    finally:
        host.run(f"docker rm -f {name}")
    calls = [line for line in host.file(STANDIN_LOG).content_string.splitlines() if container_id in line]
    assert any(" create " in f" {line} " for line in calls), calls
    assert any(" start " in f" {line} " for line in calls), calls


def test_reference_daemon_json_preserved_key_by_key(host):
    merged = _daemon_json(host)
    for key, value in REFERENCE.items():
        assert merged[key] == value, key
    assert merged["default-runtime"] == "nvidia"
    assert merged["runtimes"]["nvidia"] == {"path": "nvidia-container-runtime", "runtimeArgs": []}
    assert set(merged) == set(REFERENCE) | {"default-runtime", "runtimes"}


def test_toolkit_comes_from_the_signed_standin_repository(host):
    source = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").content_string
    assert (
        "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
        "file:///srv/kgn-nvidia-repo/libnvidia-container/stable/deb/$(ARCH) /" in source
    )
    assert host.package("nvidia-container-toolkit").version.startswith("1.20.0")
    policy = host.check_output("apt-cache policy nvidia-container-toolkit")
    assert "file:/srv/kgn-nvidia-repo/libnvidia-container/stable/deb/amd64" in policy
    assert "nvidia-container-toolkit" in host.check_output("apt-mark showhold")


def test_toolkit_keyring_holds_the_pinned_key_and_both_packages_are_held(host):
    fingerprint = Path("/var/cache/kgn-lab/nvidia-repo/fingerprint").read_text().strip()
    for path in ("/usr/share/keyrings/nvidia-container-toolkit-keyring.asc",
                 "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"):
        assert host.file(path).mode == 0o644, path
        keys = host.check_output(f"gpg --homedir $(mktemp -d) --batch --show-keys --with-colons {path}")
        assert f"fpr:::::::::{fingerprint}:" in keys, path
    held = host.check_output("apt-mark showhold").split()
    assert {"nvidia-container-toolkit", "nvidia-container-toolkit-base"} <= set(held)
    assert host.package("nvidia-container-toolkit-base").version.startswith("1.20.0")
    assert host.run("dpkg --verify nvidia-container-toolkit nvidia-container-toolkit-base").stdout.strip() == ""
    assert host.run("nvidia-container-runtime --version").rc == 0


def test_invalid_json_fails_naming_file_and_line_and_leaves_file_alone(host):
    case = json.loads(host.file("/var/tmp/kgn-side-effect/invalid_json.json").content_string)
    assert "/etc/docker/daemon.json is not valid JSON: line 4" in case["msg"]
    assert case["before"] == case["after"]


def test_refused_daemon_json_is_rolled_back_and_docker_runs_again(host):
    case = json.loads(host.file("/var/tmp/kgn-side-effect/refused_by_docker.json").content_string)
    # Docker's own words for a directive given both as a flag and in daemon.json
    assert "specified both as a flag and in the configuration file" in case["msg"]
    assert "previous files were restored" in case["msg"]
    assert case["before"] == case["after"]
    assert case["active"] == "active"
    assert case["default_runtime"] == "runc"


def test_dev_char_guard_is_a_noop_without_nvidia_devices(host):
    assert not host.run("ls /dev/nvidia*").stdout.strip()
    assert not host.file("/lib/udev/rules.d/71-nvidia-dev-char.rules").exists


def test_docker_20_10_runs_the_legacy_mode(host):
    # Docker 20.10 has no CDI (from 25): the toolkit's runtime stays on the hook
    config = host.file("/etc/nvidia-container-runtime/config.toml").content_string
    assert 'mode = "legacy"' in config.splitlines()
    assert "features" not in json.loads(host.file("/etc/docker/daemon.json").content_string)
