"""containerd: bookworm 1.6 (legacy mode) and trixie (1.7, then 2.1 after side_effect.yml's upgrade; CDI mode):
nvidia is the CRI default runtime, SystemdCgroup as runc's, the runtime mode as the engine allows."""

from __future__ import annotations

import json
import tomllib

DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


def _trixie(host) -> bool:
    return host.file("/etc/kgn-lab-node").content_string.strip() == "trixie"


def _cri(host) -> str:
    # config version 2 on containerd 1.x; the trixie node runs 2.1 (version 3) after the upgrade case
    return "io.containerd.cri.v1.runtime" if _trixie(host) else "io.containerd.grpc.v1.cri"


def _dump(host) -> dict:
    return tomllib.loads(host.check_output("containerd config dump"))


def test_config_dump_has_nvidia_as_default_runtime(host):
    containerd = _dump(host)["plugins"][_cri(host)]["containerd"]
    assert containerd["default_runtime_name"] == "nvidia"
    nvidia = containerd["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_systemd_cgroup_matches_runc(host):
    runtimes = _dump(host)["plugins"][_cri(host)]["containerd"]["runtimes"]
    runc = runtimes["runc"]["options"].get("SystemdCgroup", False)
    assert runtimes["nvidia"]["options"].get("SystemdCgroup", False) == runc
    # molecule.yml: only the trixie node has SystemdCgroup = true for runc
    assert runc is _trixie(host)


def test_runtime_lives_in_an_imported_dropin(host):
    main = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
    assert DROPIN in main["imports"]
    assert "nvidia" not in str(main.get("plugins", {}))
    dropin = tomllib.loads(host.file(DROPIN).content_string)
    assert dropin["version"] == (3 if _trixie(host) else 2)
    assert dropin["plugins"][_cri(host)]["containerd"]["default_runtime_name"] == "nvidia"
    assert DROPIN in _dump(host)["imports"]


def test_containerd_serves(host):
    assert host.service("containerd").is_running
    assert host.run("ctr version").rc == 0


def test_the_runtime_mode_follows_what_the_engine_supports(host):
    toolkit = host.file("/etc/nvidia-container-runtime/config.toml").content_string.splitlines()
    cri = _dump(host)["plugins"][_cri(host)]
    if _trixie(host):  # containerd 1.7 / 2.1 with toolkit 1.20.0: CDI
        assert 'mode = "cdi"' in toolkit
        assert cri["enable_cdi"] is True
        spec = json.loads(host.file("/var/run/cdi/nvidia.json").content_string)
        assert spec["kind"] == "nvidia.com/gpu" and {d["name"] for d in spec["devices"]} >= {"0", "all"}
        assert host.service("nvidia-cdi-refresh.path").is_enabled
        assert "NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.json" in host.file(
            "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env").content_string
    else:  # containerd 1.6 has no CDI: legacy
        assert 'mode = "legacy"' in toolkit
        assert not cri.get("enable_cdi")
        assert not host.file("/var/run/cdi/nvidia.json").exists


def test_toolkit_installed_from_standin_repository(host):
    assert host.package("nvidia-container-toolkit").version.startswith("1.20.0")
    assert host.file("/usr/bin/nvidia-container-runtime").contains("STAND-IN")
