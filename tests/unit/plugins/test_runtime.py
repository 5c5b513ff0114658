"""Unit tests of filter_plugins/kgn_runtime.py over the tables of docs/versions.md section B."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

FILTER_DIR = Path(__file__).resolve().parents[3] / "plugins" / "filter"
import ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime as kr  # noqa: E402

# The CentOS 7 reference cluster's full daemon.json before nvidia was added (docs/field-notes.md).
REFERENCE_DAEMON = {
    "registry-mirrors": ["https://n73pm3wf.mirror.aliyuncs.com"],
    "exec-opts": ["native.cgroupdriver=systemd"],
    "log-driver": "json-file",
    "log-opts": {"max-size": "100m"},
    "storage-driver": "overlay2",
    "storage-opts": ["overlay2.override_kernel_check=true"],
}


# --- B1: package per Docker version ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("docker", "package"),
    [
        ("1.13.1", "nvidia-docker2"),
        ("17.03.2", "nvidia-docker2"),
        ("18.06.3", "nvidia-docker2"),
        ("18.09.7", "nvidia-docker2"),  # the CentOS 7 reference cluster's node
        ("19.03.0", "nvidia-container-toolkit"),
        ("19.03.15", "nvidia-container-toolkit"),
        ("20.10.24+dfsg1", "nvidia-container-toolkit"),  # Debian bookworm docker.io
        ("26.1.5", "nvidia-container-toolkit"),
        ("v27.3.1", "nvidia-container-toolkit"),
    ],
)
def test_docker_package_switches_at_19_03(docker, package):
    assert kr.docker_nvidia_package(docker) == package


@pytest.mark.parametrize("bad", ["latest", "", None, 19.03, "19.x"])
def test_docker_package_rejects_bad_versions(bad):
    with pytest.raises(KgnError, match="docker_version"):
        kr.docker_nvidia_package(bad)


# --- B4: dockershim ---------------------------------------------------------------------------------
@pytest.mark.parametrize("minor", range(16, 37))
def test_dockershim_available_below_1_24(minor):
    assert kr.dockershim_available(f"1.{minor}.0") is (minor < 24)


@pytest.mark.parametrize(
    ("detected", "k8s", "requested", "expected"),
    [
        ({"docker": "20.10.24", "containerd": "1.6.20"}, "1.23.1", "auto", "docker"),
        ({"docker": "20.10.24", "containerd": "1.6.20"}, "1.30.4", "auto", "containerd"),
        ({"docker": "20.10.24", "containerd": "1.6.20", "cri_dockerd": True}, "1.30.4", "auto", "docker"),
        ({"containerd": "1.7.24"}, "1.30.4", "auto", "containerd"),
        ({"containerd": "1.7.24"}, "1.23.1", "auto", "containerd"),
        ({"crio": "1.30.0", "containerd": "1.7.0"}, "1.30.4", "auto", "crio"),
        ({"docker": "20.10.24", "containerd": "1.6.20"}, "1.23.1", "containerd", "containerd"),
        ({"docker": "18.09.7"}, "1.16.15", "docker", "docker"),
    ],
)
def test_container_runtime_choice(detected, k8s, requested, expected):
    assert kr.container_runtime_choice(detected, k8s, requested) == expected


@pytest.mark.parametrize(
    ("detected", "k8s", "requested", "message"),
    [
        ({"docker": "20.10.24"}, "1.30.4", "auto", "no usable engine"),
        ({}, "1.23.1", "auto", "found: none"),
        ({"containerd": "1.7.0"}, "1.30.4", "docker", "docker is not installed"),
        ({"docker": "20.10.24", "containerd": "1.6"}, "1.25.0", "docker", "cri-dockerd"),
        ({"docker": "20.10.24"}, "1.23.1", "podman", "use one of auto, docker, containerd, crio"),
    ],
)
def test_container_runtime_choice_errors(detected, k8s, requested, message):
    with pytest.raises(KgnError, match=message):
        kr.container_runtime_choice(detected, k8s, requested)


# --- B3: containerd layout --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("containerd", "config_version", "plugin", "imports"),
    [
        ("1.3.0", 2, "io.containerd.grpc.v1.cri", False),
        ("1.4.13", 2, "io.containerd.grpc.v1.cri", True),
        ("1.5.9", 2, "io.containerd.grpc.v1.cri", True),
        ("1.6.20", 2, "io.containerd.grpc.v1.cri", True),  # bookworm
        ("1.7.24", 2, "io.containerd.grpc.v1.cri", True),  # trixie
        ("2.0.0", 3, "io.containerd.cri.v1.runtime", True),
        ("v2.1.4", 3, "io.containerd.cri.v1.runtime", True),
    ],
)
def test_containerd_layout(containerd, config_version, plugin, imports):
    layout = kr.containerd_layout(containerd)
    assert layout["config_version"] == config_version
    assert layout["cri_plugin"] == plugin
    assert layout["runtimes_path"] == ["plugins", plugin, "containerd", "runtimes"]
    assert layout["default_runtime_path"][-1] == "default_runtime_name"
    assert layout["imports_supported"] is imports
    assert layout["imports_merge"] == ("key" if config_version == 3 else "plugin")


def test_containerd_layout_refuses_1_2():
    with pytest.raises(KgnError, match=r"older than 1\.3"):
        kr.containerd_layout("1.2.13")


# --- B1: repository layout -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("toolkit", "era", "suites"),
    [
        (
            "1.5.1",
            "nvidia-docker",
            [
                "https://nvidia.github.io/libnvidia-container/ubuntu18.04/$(ARCH) /",
                "https://nvidia.github.io/nvidia-container-runtime/ubuntu18.04/$(ARCH) /",
                "https://nvidia.github.io/nvidia-docker/ubuntu18.04/$(ARCH) /",
            ],
        ),
        ("1.6.0", "libnvidia-container", ["https://nvidia.github.io/libnvidia-container/ubuntu18.04/$(ARCH) /"]),
        ("1.13.5", "libnvidia-container", ["https://nvidia.github.io/libnvidia-container/ubuntu18.04/$(ARCH) /"]),
        ("1.14.0", "stable", ["https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /"]),
        ("1.17.8", "stable", ["https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /"]),
    ],
)
def test_repo_layout_by_era(toolkit, era, suites):
    layout = kr.nvidia_repo_layout(toolkit, distribution="ubuntu18.04")
    assert layout["era"] == era
    assert layout["apt_suites"] == suites
    assert layout["keyring"] == "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
    assert layout["apt_list_file"] == "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
    key = "nvidia-docker/gpgkey" if era == "nvidia-docker" else "libnvidia-container/gpgkey"
    assert layout["gpgkey_url"] == f"https://nvidia.github.io/{key}"


def test_repo_layout_mirror_and_rpm():
    deb = kr.nvidia_repo_layout("1.17.8", base_url="file:///srv/kgn-nvidia-repo/")
    assert deb["apt_suites"] == ["file:///srv/kgn-nvidia-repo/libnvidia-container/stable/deb/$(ARCH) /"]
    assert deb["gpgkey_url"] == "file:///srv/kgn-nvidia-repo/libnvidia-container/gpgkey"
    rpm = kr.nvidia_repo_layout("1.14.6", family="rpm")
    assert rpm["rpm_repo_file_url"] == (
        "https://nvidia.github.io/libnvidia-container/stable/rpm/nvidia-container-toolkit.repo"
    )
    assert rpm["apt_suites"] == []
    old = kr.nvidia_repo_layout("1.0.5", family="rpm", distribution="centos7")
    assert old["rpm_repo_file_url"] == "https://nvidia.github.io/nvidia-docker/centos7/nvidia-docker.repo"


# The sections of NVIDIA's own .repo files (NVIDIA/libnvidia-container gh-pages stable/rpm/nvidia-container-toolkit.repo
# and centos7/libnvidia-container.repo, NVIDIA/nvidia-docker gh-pages centos7/nvidia-docker.repo).
NV = "https://nvidia.github.io"
LIBNVIDIA_CENTOS7 = (
    "libnvidia-container",
    f"{NV}/libnvidia-container/centos7/$basearch",
    f"{NV}/libnvidia-container/gpgkey",
)


@pytest.mark.parametrize(
    ("toolkit", "sections"),
    [
        (
            "1.5.1",
            [
                LIBNVIDIA_CENTOS7,
                (
                    "nvidia-container-runtime",
                    f"{NV}/nvidia-container-runtime/centos7/$basearch",
                    f"{NV}/nvidia-container-runtime/gpgkey",
                ),
                ("nvidia-docker", f"{NV}/nvidia-docker/centos7/$basearch", f"{NV}/nvidia-docker/gpgkey"),
            ],
        ),
        (
            "1.13.5",
            [LIBNVIDIA_CENTOS7],
        ),
        (
            "1.14.0",
            [
                (
                    "nvidia-container-toolkit",
                    f"{NV}/libnvidia-container/stable/rpm/$basearch",
                    f"{NV}/libnvidia-container/gpgkey",
                )
            ],
        ),
    ],
)
def test_repo_layout_rpm_sections_are_nvidias(toolkit, sections):
    layout = kr.nvidia_repo_layout(toolkit, distribution="centos7", family="rpm")
    assert [(r["id"], r["baseurl"], r["gpgkey"]) for r in layout["rpm_repos"]] == sections
    assert layout["yum_repo_file"] == "/etc/yum.repos.d/nvidia-container-toolkit.repo"
    assert kr.nvidia_repo_layout(toolkit, distribution="centos7")["rpm_repos"] == []


def test_repo_layout_rpm_sections_keep_nvidias_paths_under_a_mirror():
    layout = kr.nvidia_repo_layout("1.5.1", "http://mirror.local/nvidia/", "centos7", "rpm")
    assert [r["baseurl"] for r in layout["rpm_repos"]] == [
        "http://mirror.local/nvidia/libnvidia-container/centos7/$basearch",
        "http://mirror.local/nvidia/nvidia-container-runtime/centos7/$basearch",
        "http://mirror.local/nvidia/nvidia-docker/centos7/$basearch",
    ]
    assert [r["gpgkey"] for r in layout["rpm_repos"]] == [
        "http://mirror.local/nvidia/libnvidia-container/gpgkey",
        "http://mirror.local/nvidia/nvidia-container-runtime/gpgkey",
        "http://mirror.local/nvidia/nvidia-docker/gpgkey",
    ]


# --- B1: rpm package specs -------------------------------------------------------------------------
def test_rpm_packages_fresh_node_with_docker_19_or_later():
    plan = kr.nvidia_toolkit_rpm_packages("1.17.8")
    assert plan == {
        "install": ["nvidia-container-toolkit-1.17.8", "nvidia-container-toolkit-base-1.17.8"],
        "names": ["nvidia-container-toolkit", "nvidia-container-toolkit-base"],
        "unmet": ["nvidia-container-toolkit-1.17.8", "nvidia-container-toolkit-base-1.17.8"],
        "moved": [],
    }


def test_rpm_packages_reference_docker_18_gets_nvidia_docker2_and_no_base_before_1_11():
    plan = kr.nvidia_toolkit_rpm_packages("1.17.8", "nvidia-docker2", "2.14.0")
    assert plan["install"][-1] == "nvidia-docker2-2.14.0"
    assert plan["names"] == ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "nvidia-docker2"]
    old = kr.nvidia_toolkit_rpm_packages("1.10.0", "nvidia-docker2", "2.11.0")
    assert old["install"] == ["nvidia-container-toolkit-1.10.0", "nvidia-docker2-2.11.0"]


def test_rpm_packages_in_place_need_nothing_and_a_new_pin_moves_them():
    installed = [
        "nvidia-container-toolkit=1.17.8-1",
        "nvidia-container-toolkit-base=1.17.8-1",
        "python3-dnf-plugin-versionlock=4.3.0-20.el9",
    ]
    done = kr.nvidia_toolkit_rpm_packages("1.17.8", installed=installed)
    assert done["unmet"] == [] and done["moved"] == []
    bumped = kr.nvidia_toolkit_rpm_packages("1.18.0", installed=installed)
    assert bumped["unmet"] == ["nvidia-container-toolkit-1.18.0", "nvidia-container-toolkit-base-1.18.0"]
    assert bumped["moved"] == ["nvidia-container-toolkit", "nvidia-container-toolkit-base"]
    # 1.17.80 is not 1.17.8; nvidia-docker2 missing is unmet but does not move
    installed = ["nvidia-container-toolkit=1.17.80-1", "nvidia-container-toolkit-base=1.17.8"]
    other = kr.nvidia_toolkit_rpm_packages("1.17.8", "nvidia-docker2", "2.14.0", installed)
    assert other["unmet"] == ["nvidia-container-toolkit-1.17.8", "nvidia-docker2-2.14.0"]
    assert other["moved"] == ["nvidia-container-toolkit"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("1.17.8", "auto"), "not nvidia-container-toolkit or nvidia-docker2"),
        (("1.17.8", "nvidia-container-toolkit", "2.14.0", ["nvidia-container-toolkit 1.17.8"]), "name=version-release"),
        (("latest",), "nvidia_container_toolkit_version"),
        (("1.17.8", "nvidia-docker2", "newest"), "nvidia_docker2_version"),
    ],
)
def test_rpm_packages_errors(args, message):
    with pytest.raises(KgnError, match=message):
        kr.nvidia_toolkit_rpm_packages(*args)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"toolkit_version": "1.10.0"}, "give the distribution"),
        ({"toolkit_version": "1.17.8", "family": "apk"}, "deb or rpm"),
        ({"toolkit_version": "1.17.8", "base_url": ""}, "base URL is empty"),
        ({"toolkit_version": "stable"}, "nvidia_container_toolkit_version"),
    ],
)
def test_repo_layout_errors(kwargs, message):
    with pytest.raises(KgnError, match=message):
        kr.nvidia_repo_layout(**kwargs)


# --- B2: daemon.json -------------------------------------------------------------------------------
def test_daemon_merge_keeps_every_reference_key():
    merged = kr.docker_daemon_merge(REFERENCE_DAEMON)
    for key, value in REFERENCE_DAEMON.items():
        assert merged[key] == value
    assert merged["default-runtime"] == "nvidia"
    assert merged["runtimes"] == {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}
    assert set(merged) == set(REFERENCE_DAEMON) | {"default-runtime", "runtimes"}


def test_daemon_merge_is_pure_and_idempotent():
    before = json.loads(json.dumps(REFERENCE_DAEMON))
    once = kr.docker_daemon_merge(REFERENCE_DAEMON)
    assert before == REFERENCE_DAEMON
    assert kr.docker_daemon_merge(once) == once


def test_daemon_merge_keeps_other_runtimes_and_replaces_default():
    existing = {"default-runtime": "runc", "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}}}
    merged = kr.docker_daemon_merge(existing, "/usr/bin/nvidia-container-runtime", ["--debug"])
    assert merged["runtimes"]["kata"] == {"path": "/usr/bin/kata-runtime"}
    assert merged["runtimes"]["nvidia"] == {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": ["--debug"]}
    assert merged["default-runtime"] == "nvidia"
    assert "default-runtime" not in kr.docker_daemon_merge({}, set_default=False)


def test_daemon_merge_of_nvidia_docker2_shipped_file():
    shipped = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}}
    assert kr.docker_daemon_merge(shipped) == {**shipped, "default-runtime": "nvidia"}


def test_daemon_merge_rejects_bad_shapes():
    with pytest.raises(KgnError, match="'runtimes' must be an object"):
        kr.docker_daemon_merge({"runtimes": ["nvidia"]})
    with pytest.raises(KgnError, match="list of strings"):
        kr.docker_daemon_merge({}, runtime_args="--debug")


def test_json_document_names_file_and_line():
    text = '{\n  "log-driver": "json-file",\n  "log-opts": {"max-size": "100m"}\n  "storage-driver": "overlay2"\n}\n'
    with pytest.raises(KgnError, match=r"/etc/docker/daemon.json is not valid JSON: line 4, column 3"):
        kr.json_document(text, "/etc/docker/daemon.json")
    with pytest.raises(KgnError, match="must hold a JSON object"):
        kr.json_document("[1]", "/etc/docker/daemon.json")
    assert kr.json_document("  \n", "x") == {}
    assert kr.json_document(json.dumps(REFERENCE_DAEMON), "x") == REFERENCE_DAEMON


# --- B3: containerd merge ---------------------------------------------------------------------------
V2_RUNC = """
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.6"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
        NoPivotRoot = false
"""

V3_RUNC = """
version = 3
imports = ["/etc/containerd/conf.d/*.toml"]
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      SystemdCgroup = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
"""


@pytest.mark.parametrize("systemd_cgroup", [True, False])
def test_containerd_v2_inline_copies_runc_options(systemd_cgroup):
    existing = tomllib.loads(V2_RUNC.replace("SystemdCgroup = true", f"SystemdCgroup = {str(systemd_cgroup).lower()}"))
    out = kr.containerd_nvidia(existing, "1.6.20")
    cri = out["config"]["plugins"]["io.containerd.grpc.v1.cri"]
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert out["dropin"] is None
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"] == {
        "SystemdCgroup": systemd_cgroup,
        "NoPivotRoot": False,
        "BinaryName": "/usr/bin/nvidia-container-runtime",
    }
    assert "BinaryName" not in cri["containerd"]["runtimes"]["runc"]["options"]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.6"
    assert kr.containerd_nvidia(out["config"], "1.6.20")["config"] == out["config"]


def test_containerd_v2_dropin_carries_whole_cri_table():
    existing = tomllib.loads(V2_RUNC)
    out = kr.containerd_nvidia(existing, "1.7.24", dropin_path="/etc/containerd/conf.d/99-nvidia.toml")
    assert out["config"]["imports"] == ["/etc/containerd/conf.d/99-nvidia.toml"]
    assert out["config"]["plugins"] == existing["plugins"]  # main file untouched but for imports
    dropin = out["dropin"]
    assert dropin["version"] == 2
    cri = dropin["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.6"  # containerd#5837: whole table
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    again = kr.containerd_nvidia(out["config"], "1.7.24", dropin_path="/etc/containerd/conf.d/99-nvidia.toml")
    assert again == out
    toml_text = kr.toml_emit(dropin)
    assert tomllib.loads(toml_text) == dropin


def test_containerd_v3_dropin_for_containerd_2():
    existing = tomllib.loads(V3_RUNC)
    out = kr.containerd_nvidia(existing, "2.1.4", dropin_path="/etc/containerd/conf.d/99-nvidia.toml")
    assert out["config_version"] == 3
    assert out["cri_plugin"] == "io.containerd.cri.v1.runtime"
    # the existing glob already imports the drop-in: nothing added
    assert out["config"]["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert out["config"] == {**existing}
    rendered = tomllib.loads(kr.toml_emit(out["dropin"]))
    assert rendered == {
        "version": 3,
        "plugins": {
            "io.containerd.cri.v1.runtime": {
                "containerd": {
                    "default_runtime_name": "nvidia",
                    "runtimes": {
                        "nvidia": {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"},
                        }
                    },
                }
            }
        },
    }


def test_containerd_v3_inline_and_new_file():
    out = kr.containerd_nvidia({}, "2.0.0")
    assert out["config"]["version"] == 3
    runtimes = out["config"]["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"},
    }
    assert kr.containerd_nvidia({}, "1.6.20")["config"]["version"] == 2


def test_containerd_v2_config_on_containerd_2_keeps_v2_paths():
    out = kr.containerd_nvidia(tomllib.loads(V2_RUNC), "2.0.2")
    assert out["config_version"] == 2
    assert "nvidia" in out["config"]["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]


@pytest.mark.parametrize(
    ("existing", "version", "message"),
    [
        ({"disabled_plugins": ["cri"]}, "1.6.20", r'Remove "cri" from disabled_plugins'),
        ({"version": 2, "disabled_plugins": ["io.containerd.grpc.v1.cri"]}, "1.7.0", "CRI plugin is off"),
        ({"plugins": {"cri": {}}}, "1.6.20", "no 'version' key"),
        ({"version": 3}, "1.7.24", "containerd is 1.x"),
        ({"version": 7}, "1.7.24", "knows 1 to 4"),
        ({"version": 4}, "2.2.1", "older than 2.3"),
        ({}, "1.2.0", "older than 1.3"),
    ],
)
def test_containerd_refusals(existing, version, message):
    with pytest.raises(KgnError, match=message):
        kr.containerd_nvidia(existing, version)


# --- CRI-O ------------------------------------------------------------------------------------------
def test_crio_dropin_from_nothing():
    dropin = kr.crio_dropin({})
    assert dropin == {
        "crio": {
            "runtime": {
                "default_runtime": "nvidia",
                "runtimes": {"nvidia": {"runtime_path": "/usr/bin/nvidia-container-runtime", "runtime_type": "oci"}},
            }
        }
    }
    assert tomllib.loads(kr.toml_emit(dropin)) == dropin


def test_crio_dropin_copies_default_runtime_options():
    existing = {
        "crio": {
            "runtime": {
                "default_runtime": "crun",
                "runtimes": {
                    "crun": {
                        "runtime_path": "/usr/bin/crun",
                        "runtime_root": "/run/crun",
                        "monitor_path": "/usr/libexec/crio/conmon",
                    }
                },
            }
        }
    }
    nvidia = kr.crio_dropin(existing)["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia == {
        "runtime_path": "/usr/bin/nvidia-container-runtime",
        "runtime_root": "/run/crun",
        "monitor_path": "/usr/libexec/crio/conmon",
        "runtime_type": "oci",
    }
    assert "default_runtime" not in kr.crio_dropin(existing, set_default=False)["crio"]["runtime"]


# --- TOML -------------------------------------------------------------------------------------------
def test_toml_parse_errors_name_the_file():
    with pytest.raises(KgnError, match=r"/etc/containerd/config.toml is not valid TOML: .*line 2"):
        kr.toml_parse("version = 2\n[plugins\n", "/etc/containerd/config.toml")
    assert kr.toml_parse("", "x") == {}


DEBIAN_1_6 = """
version = 2
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
"""


@pytest.mark.parametrize("dropin", ["", "/etc/containerd/conf.d/99-nvidia.toml"])
def test_containerd_keeps_builtin_runc_when_the_file_has_none(dropin):
    # Debian's config.toml has no runc entry; containerd 1.6 drops its built-in runc once a file defines runtimes.
    effective = tomllib.loads(V2_RUNC)
    out = kr.containerd_nvidia(tomllib.loads(DEBIAN_1_6), "1.6.20", dropin_path=dropin, builtin=effective)
    doc = out["dropin"] if dropin else out["config"]
    runtimes = doc["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["runc"] == effective["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runc"]
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert doc["plugins"]["io.containerd.grpc.v1.cri"]["cni"]["bin_dir"] == "/usr/lib/cni"
    # a v3 dump is not mixed into a v2 file
    v3 = kr.containerd_nvidia(tomllib.loads(DEBIAN_1_6), "2.0.0", builtin=tomllib.loads(V3_RUNC))
    assert "runc" not in v3["config"]["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
