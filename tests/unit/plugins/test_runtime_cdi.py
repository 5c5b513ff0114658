"""The runtime mode (CDI or legacy), CDI switched on per engine, containerd config version 4, the toolkit's mode."""

from __future__ import annotations

import copy
import json
import pathlib
import tomllib

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime

CTK = pathlib.Path(__file__).parents[1] / "fixtures" / "nvidia-ctk-1.20.0"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


def mode(engine_versions, requested="auto", toolkit="1.20.0", k8s="1.30.4", engine="auto", **observed):
    return runtime.runtime_mode({"mode": requested, "engine": engine, "kubernetes_version": k8s,
                                 "toolkit_version": toolkit}, {"versions": engine_versions, **observed})


@pytest.mark.parametrize(
    ("versions", "toolkit", "k8s", "expected", "words"),
    [
        ({"containerd": "2.1.9"}, "1.20.0", "1.30.4", "cdi", "containerd 2.1.9 and container toolkit 1.20.0"),
        ({"containerd": "1.7.24"}, "1.20.0", "1.30.4", "cdi", "support CDI (auto)"),
        ({"containerd": "1.6.20"}, "1.20.0", "1.30.4", "legacy",
         "containerd 1.6.20 has no CDI (from containerd 1.7.0)"),
        ({"containerd": "2.1.9"}, "1.17.8", "1.30.4", "legacy", "older than 1.18.0"),
        ({"crio": "1.30.0"}, "1.20.0", "1.30.4", "cdi", "crio 1.30.0"),
        ({"crio": "1.22.5"}, "1.20.0", "1.22.3", "legacy", "crio 1.22.5 has no CDI"),
        ({"docker": "28.5.2"}, "1.20.0", "1.23.1", "cdi", "docker 28.5.2"),
        ({"docker": "20.10.24"}, "1.20.0", "1.23.1", "legacy", "docker 20.10.24 has no CDI (from docker 25.0.0)"),
        ({"docker": "18.09.9"}, "1.20.0", "1.16.15", "legacy", "needs nvidia-docker2"),
    ],
)
def test_auto_is_cdi_where_toolkit_and_engine_support_it(versions, toolkit, k8s, expected, words):
    result = mode(versions, toolkit=toolkit, k8s=k8s)
    assert result["mode"] == expected and words in result["why"]


def test_the_installed_toolkit_wins_over_the_pin():
    assert mode({"containerd": "2.1.9"}, toolkit="1.20.0", toolkit_version="1.17.8")["mode"] == "legacy"


def test_explicit_legacy_and_refused_cdi():
    assert mode({"containerd": "2.1.9"}, requested="legacy")["mode"] == "legacy"
    assert mode({"containerd": "1.7.24"}, requested="cdi", toolkit="1.14.6")["mode"] == "cdi"
    with pytest.raises(KgnError, match=r"is cdi but containerd 1.6.20 has no CDI .*set nvidia_container_runtime_mode"):
        mode({"containerd": "1.6.20"}, requested="cdi")
    with pytest.raises(KgnError, match="not one of auto, cdi, legacy"):
        mode({"containerd": "2.1.9"}, requested="jit-cdi")


def test_a_controller_side_check_without_observation_assumes_and_says():
    result = runtime.runtime_mode({"kubernetes_version": "1.33.1", "toolkit_version": "1.20.0"})
    assert result["mode"] == "cdi" and result["engine"] == "containerd" and result["assumed"]


# --- containerd: CDI on, config version 4 --------------------------------------------------------------

V17_DEFAULT = """
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = false
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  sandbox_image = "registry.k8s.io/pause:3.8"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
"""

# A version 4 config as containerd 2.3 reads it: server settings under plugins (containerd v2.3.0
# cmd/containerd/server/config/config.go serviceMigrate), the CRI tables where version 3 has them.
V4 = """
version = 4
imports = ["/etc/containerd/conf.d/*.toml"]
[plugins."io.containerd.server.v1.grpc"]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      SystemdCgroup = true
"""


def test_containerd_1_7_gets_enable_cdi_in_the_dropin_and_keeps_the_users_table():
    out = runtime.containerd_nvidia(tomllib.loads(V17_DEFAULT), "1.7.24", dropin_path=DROPIN, cdi=True)
    cri = out["dropin"]["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.8"
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
    legacy = runtime.containerd_nvidia(tomllib.loads(V17_DEFAULT), "1.7.24", dropin_path=DROPIN)
    assert legacy["dropin"]["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is False  # the user's, untouched


def test_cdi_spec_dirs_gain_our_folder_only_when_the_user_narrowed_them():
    narrowed = tomllib.loads(V17_DEFAULT.replace('cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]',
                                                 'cdi_spec_dirs = ["/etc/cdi"]'))
    cri = runtime.containerd_nvidia(narrowed, "1.7.24", dropin_path=DROPIN, cdi=True)["dropin"]["plugins"][
        "io.containerd.grpc.v1.cri"]
    assert cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]


def test_containerd_2_writes_only_its_keys_with_cdi_on():
    v3 = {"version": 3}
    out = runtime.containerd_nvidia(v3, "2.1.9", dropin_path=DROPIN, cdi=True)
    cri = out["dropin"]["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["enable_cdi"] is True and "cdi_spec_dirs" not in cri
    assert set(cri) == {"enable_cdi", "containerd"}


def test_config_version_4_is_recognised_and_merged_under_the_version_3_plugin_ids():
    existing = tomllib.loads(V4)
    out = runtime.containerd_nvidia(copy.deepcopy(existing), "2.3.1", dropin_path=DROPIN, cdi=True)
    assert out["config_version"] == 4 and out["cri_plugin"] == "io.containerd.cri.v1.runtime"
    assert out["config"] == existing  # the glob already imports the drop-in; the server settings untouched
    # containerd refuses a drop-in of a higher version than the root (v2.3.0 config.go LoadConfigWithPlugins)
    assert out["dropin"]["version"] <= existing["version"]
    nvidia = out["dropin"]["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"] == {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}
    assert runtime.containerd_layout("2.3.0")["config_version"] == 4
    assert runtime.containerd_nvidia({}, "2.3.0")["config"]["version"] == 4
    assert runtime.containerd_layout("2.2.1")["config_version"] == 3


def _containerd_cri_migration(plugins: dict) -> dict:
    """containerd's own v2 -> v3 move of the CRI runtime settings, ported line by line from containerd v2.3.0
    plugins/cri/runtime/plugin.go (configMigration, migrateConfig): every key of io.containerd.grpc.v1.cri but
    the image and server ones goes to io.containerd.cri.v1.runtime unless already there; containerd.* likewise
    but the snapshotter keys; runtimes keep their tables."""
    src = plugins.get("io.containerd.grpc.v1.cri")
    if not isinstance(src, dict):
        return plugins
    dst = plugins.setdefault("io.containerd.cri.v1.runtime", {})
    image = {"sandbox_image", "registry", "image_decryption", "max_concurrent_downloads",
             "image_pull_progress_timeout", "image_pull_with_sync_fs", "stats_collect_period"}
    server = {"disable_tcp_service", "stream_server_address", "stream_server_port", "stream_idle_timeout",
              "enable_tls_streaming", "x509_key_pair_streaming"}
    for key, value in src.items():
        if key in {"cni", "containerd"} | image | server:
            continue
        dst.setdefault(key, value)
    containerd = dst.setdefault("containerd", {})
    for key, value in (src.get("containerd") or {}).items():
        if key not in {"snapshotter", "disable_snapshot_annotations", "discard_unpacked_layers"}:
            containerd.setdefault(key, value)
    return plugins


def _merge(into: dict, other: dict) -> dict:
    # containerd 2.x merges imported plugin tables key by key (containerd#9982)
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def test_a_1_7_node_with_our_dropin_keeps_the_users_settings_on_containerd_2():
    """containerd 1.7 -> 2.x: our version 2 drop-in and the user's version 2 config, loaded the way containerd 2
    loads them (each file migrated by its own code, then merged), still give nvidia as the default with the
    user's SystemdCgroup, CDI on; and the next run on 2.x keeps the version 2 layout (no rewrite needed)."""
    user = tomllib.loads(V17_DEFAULT)
    on_17 = runtime.containerd_nvidia(copy.deepcopy(user), "1.7.24", dropin_path=DROPIN, cdi=True)
    on_2 = runtime.containerd_nvidia(copy.deepcopy(on_17["config"]), "2.1.9", dropin_path=DROPIN, cdi=True)
    assert on_2["config"] == on_17["config"] and on_2["dropin"] == on_17["dropin"]  # converged: nothing to write
    loaded = {}
    for doc in (on_2["config"], on_2["dropin"]):
        _merge(loaded, _containerd_cri_migration(copy.deepcopy(doc.get("plugins") or {})))
    cri = loaded["io.containerd.cri.v1.runtime"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["enable_cdi"] is True
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    assert cri["containerd"]["runtimes"]["nvidia"]["options"] == {
        "SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}


# --- Docker and CRI-O --------------------------------------------------------------------------------

def test_docker_features_cdi_keeps_other_features():
    merged = runtime.docker_daemon_merge({"features": {"buildkit": True}}, cdi=True)
    assert merged["features"] == {"buildkit": True, "cdi": True}
    assert "features" not in runtime.docker_daemon_merge({})
    with pytest.raises(KgnError, match="'features' must be an object"):
        runtime.docker_daemon_merge({"features": []}, cdi=True)


def test_crio_adds_our_spec_folder_only_to_narrowed_dirs():
    narrowed = {"crio": {"runtime": {"default_runtime": "crun", "cdi_spec_dirs": ["/etc/cdi"],
                                     "runtimes": {"crun": {"runtime_path": "/usr/bin/crun"}}}}}
    section = runtime.crio_dropin(narrowed, cdi_spec_dir="/var/run/cdi")["crio"]["runtime"]
    assert section["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert "cdi_spec_dirs" not in runtime.crio_dropin({}, cdi_spec_dir="/var/run/cdi")["crio"]["runtime"]


# --- the toolkit's config.toml -----------------------------------------------------------------------

def test_toolkit_mode_is_one_line_of_nvidias_default():
    default = (CTK / "config-default.toml").read_text()
    text = runtime.toolkit_config_text(None, default, "cdi")
    changed = [(a, b) for a, b in zip(default.splitlines(), text.splitlines(), strict=True) if a != b]
    assert changed == [('mode = "auto"', 'mode = "cdi"')]
    assert len(text.splitlines()) == len(default.splitlines())
    parsed = tomllib.loads(text)
    assert parsed["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert runtime.toolkit_config_text(text, default, "cdi") == text
    assert 'mode = "legacy"' in runtime.toolkit_config_text(text, default, "legacy")


def test_toolkit_mode_added_where_the_file_lacks_it():
    text = runtime.toolkit_config_text("disable-require = false\n", None, "cdi")
    assert tomllib.loads(text)["nvidia-container-runtime"] == {"mode": "cdi"}
    text = runtime.toolkit_config_text('[nvidia-container-runtime]\nlog-level = "info"\n', None, "legacy")
    assert tomllib.loads(text)["nvidia-container-runtime"] == {"mode": "legacy", "log-level": "info"}
    # a mode line under another table is not ours to change
    text = runtime.toolkit_config_text('[nvidia-container-runtime-hook]\nmode = "x"\n', None, "cdi")
    assert tomllib.loads(text)["nvidia-container-runtime-hook"]["mode"] == "x"
    with pytest.raises(KgnError, match="not valid TOML"):
        runtime.toolkit_config_text("[broken", None, "cdi")


def test_repairs_are_said_only_for_what_was_set_up_before():
    plan = {"engine": "docker", "files": [{"path": "/etc/docker/daemon.json", "content": json.dumps(
        runtime.docker_daemon_merge({"log-driver": "json-file"}))}]}
    wired = {"runtimes": {"nvidia": {"path": "/usr/bin/missing-runtime"}}, "default-runtime": "runc"}
    said = runtime.file_repairs(plan, {"files": {"/etc/docker/daemon.json": json.dumps(wired)}}, False)
    assert said == ["/etc/docker/daemon.json: runtimes.nvidia.path was '/usr/bin/missing-runtime', set back to "
                    "'nvidia-container-runtime'",
                    "/etc/docker/daemon.json: default-runtime was 'runc', set back to 'nvidia'"]
    fresh = {"files": {"/etc/docker/daemon.json": '{"log-driver": "json-file"}'}}
    assert runtime.file_repairs(plan, fresh, False) == []  # a first install is an install
    containerd = {"engine": "containerd", "files": [{"path": DROPIN}, {"path": "/etc/containerd/config.toml"}]}
    assert "no longer imported the nvidia drop-in" in runtime.file_repairs(containerd, {}, True)[0]
    assert runtime.file_repairs(containerd, {}, False) == []


def test_why_a_spec_was_regenerated():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import cdi
    current = (pathlib.Path(__file__).parents[1] / "fixtures" / "h100-cdi" / "nvidia-ctk-cdi-generate-uuid.json")
    current = current.read_text()
    stale = current.replace("580.159.04", "570.86.15")
    assert cdi.why_regenerated(stale, current) == ("stale: written for driver 570.86.15, the node's driver is now "
                                                   "580.159.04")
    assert cdi.why_regenerated("{", current).startswith("it was unreadable")
