"""runtime_plan: the engine, the files and what is removed, from the inputs and what the node shows."""

from __future__ import annotations

import json
import tomllib

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime

INPUTS = {"engine": "auto", "kubernetes_version": "1.30.4", "set_default": True,
          "binary": "/usr/bin/nvidia-container-runtime", "docker_config": "/etc/docker/daemon.json",
          "docker_runtime_path": "nvidia-container-runtime", "docker_runtime_args": [],
          "containerd_config": "/etc/containerd/config.toml",
          "containerd_dropin": "/etc/containerd/conf.d/99-nvidia.toml",
          "crio_config": "/etc/crio/crio.conf", "crio_dropin": "/etc/crio/crio.conf.d/99-nvidia.conf",
          "mode": "auto", "toolkit_version": "1.20.0"}
DROPIN = INPUTS["containerd_dropin"]


def plan(observed, **inputs):
    return host_plan({"container_runtime": {**INPUTS, **inputs}}, {"container_runtime": observed})["container_runtime"]


def test_docker_keeps_the_users_keys_and_order():
    observed = {"versions": {"docker": "20.10.24"}, "cri_dockerd": False, "toolkit_default": "",
                "files": {"/etc/docker/daemon.json": '{"log-driver": "json-file", "data-root": "/srv/docker"}'}}
    result = plan(observed, kubernetes_version="1.23.1")
    assert result["engine"] == "docker" and result["remove"] == [] and result["assumed"] == []
    [daemon] = result["files"]
    assert list(json.loads(daemon["content"])) == ["log-driver", "data-root", "runtimes", "default-runtime"]
    assert daemon["validate"] is None  # dockerd --validate exists from 23.0


def test_a_switch_back_to_docker_removes_our_containerd_dropin_and_its_import():
    config = f'version = 2\nimports = ["{DROPIN}", "/etc/containerd/other.toml"]\n'
    observed = {"versions": {"docker": "24.0.7", "containerd": "1.7.24"}, "cri_dockerd": True,
                "files": {INPUTS["containerd_config"]: config, DROPIN: "version = 2\n"}}
    result = plan(observed, engine="docker")
    assert result["engine"] == "docker"
    removed = {r["path"]: r for r in result["remove"]}
    assert removed[DROPIN]["content"] is None and removed[DROPIN]["service"] == "containerd"
    kept = tomllib.loads(removed[INPUTS["containerd_config"]]["content"])
    assert kept["imports"] == ["/etc/containerd/other.toml"]
    assert result["files"][0]["validate"] == ["dockerd", "--validate", "--config-file=%s"]


def test_containerd_starts_from_the_builtin_default_when_config_toml_is_missing():
    default = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "runc"\n'
    observed = {"versions": {"containerd": "1.7.24"}, "files": {}, "containerd_default": default,
                "toolkit_default": "[nvidia-container-runtime]\nmode = \"auto\"\n"}
    result = plan(observed)
    assert result["engine"] == "containerd" and result["cri_plugin"] == "io.containerd.grpc.v1.cri"
    paths = [f["path"] for f in result["files"]]
    assert paths == [DROPIN, INPUTS["containerd_config"]]  # the drop-in first: config.toml imports it
    assert result["assumed"] == []


def test_nothing_observed_is_assumed_and_said():
    result = plan({})
    assert result["engine"] == "containerd"
    assert any("containerd 1.7.24 and no other engine" in a for a in result["assumed"])
    assert any("built-in default" in a for a in result["assumed"])


def test_docker_without_dockershim_or_cri_dockerd_is_refused():
    with pytest.raises(KgnError, match="no dockershim"):
        plan({"versions": {"docker": "24.0.7"}}, engine="docker")


def test_a_broken_daemon_json_is_refused_naming_the_line():
    observed = {"versions": {"docker": "20.10.24"}, "files": {"/etc/docker/daemon.json": '{\n  "a": 1\n  "b": 2\n}'}}
    with pytest.raises(KgnError, match=r"/etc/docker/daemon\.json is not valid JSON: line 3"):
        plan(observed, kubernetes_version="1.23.1")



@pytest.mark.parametrize(
    ("config", "dropin_text", "orphaned"),
    [
        ('version = 2\nimports = ["/etc/containerd/conf.d/99-nvidia.toml"]\n', "x", False),
        ('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n', "x", False),  # a glob that covers it
        ("version = 2\n[plugins]\n", "x", True),  # `containerd config default` written over ours
        ("version = 2\n[plugins]\n", None, False),  # no drop-in on disk: nothing orphaned
        ("not = [toml", "x", False),  # unreadable: the engine's own checks report it
    ],
)
def test_a_drop_in_is_orphaned_only_when_present_and_no_longer_imported(config, dropin_text, orphaned):
    assert runtime.dropin_orphaned(config, DROPIN, dropin_text) is orphaned
    assert runtime.dropin_orphaned(config, "", dropin_text) is False


@pytest.mark.parametrize("parse", [runtime.toml_parse, runtime.json_document])
def test_a_file_with_bytes_that_are_not_utf8_is_never_parsed_merged_or_written_back(parse):
    text = b'{"log-driver": "json-file", "label": "caf\xe9"}'.decode("utf-8", "replace")  # as host.read gives it
    with pytest.raises(KgnError, match=r"/etc/x is not UTF-8 text \(character 42 .*left as it is"):
        parse(text, "/etc/x")


def test_cdi_refresh_uses_the_toolkits_units_or_our_own():
    observed = {"versions": {"containerd": "2.1.9"}, "files": {}, "toolkit_default": ""}
    toolkit = plan({**observed, "cdi_refresh_unit": True})
    assert toolkit["runtime_mode"] == "cdi" and toolkit["cdi"]["refresh"]["unit"] == "nvidia-cdi-refresh.path"
    env = next(f for f in toolkit["toolkit_files"] if f["path"] == runtime.REFRESH_ENV)
    assert env["content"].endswith("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.json\n")
    own = plan({**observed, "cdi_refresh_unit": False}, mode="cdi", toolkit_version="1.14.6")
    assert own["cdi"]["refresh"]["unit"] == "kgn-cdi-refresh.path"
    assert "--output=/var/run/cdi/nvidia.json" in own["toolkit_files"][1]["content"]
    # not observed (a render): the toolkit ships its units from 1.18
    assert plan(observed)["cdi"]["refresh"]["unit"] == "nvidia-cdi-refresh.path"
    legacy = plan({"versions": {"containerd": "1.6.20"}, "files": {}, "toolkit_default": ""})
    assert legacy["runtime_mode"] == "legacy" and legacy["cdi"] is None
    assert [f["path"] for f in legacy["toolkit_files"]] == ["/etc/nvidia-container-runtime/config.toml"]
