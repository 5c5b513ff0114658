"""containerd (bookworm 1.6, trixie 1.7): nvidia is the CRI default runtime, SystemdCgroup as runc's."""

from __future__ import annotations

import tomllib

CRI = "io.containerd.grpc.v1.cri"  # config version 2: containerd 1.x
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


def _dump(host) -> dict:
    return tomllib.loads(host.check_output("containerd config dump"))


def test_config_dump_has_nvidia_as_default_runtime(host):
    containerd = _dump(host)["plugins"][CRI]["containerd"]
    assert containerd["default_runtime_name"] == "nvidia"
    nvidia = containerd["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_systemd_cgroup_matches_runc(host):
    runtimes = _dump(host)["plugins"][CRI]["containerd"]["runtimes"]
    runc = runtimes["runc"]["options"].get("SystemdCgroup", False)
    assert runtimes["nvidia"]["options"].get("SystemdCgroup", False) == runc
    # molecule.yml: only the trixie node has SystemdCgroup = true for runc
    assert runc is (host.file("/etc/kgn-lab-node").content_string.strip() == "trixie")


def test_runtime_lives_in_an_imported_dropin(host):
    main = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
    assert DROPIN in main["imports"]
    assert "nvidia" not in str(main.get("plugins", {}))
    dropin = tomllib.loads(host.file(DROPIN).content_string)
    assert dropin["version"] == 2
    assert dropin["plugins"][CRI]["containerd"]["default_runtime_name"] == "nvidia"
    assert DROPIN in _dump(host)["imports"]


def test_containerd_serves(host):
    assert host.service("containerd").is_running
    assert host.run("ctr version").rc == 0


def test_toolkit_installed_from_standin_repository(host):
    assert host.package("nvidia-container-toolkit").version.startswith("1.17.8")
    assert host.file("/usr/bin/nvidia-container-runtime").contains("STAND-IN")
