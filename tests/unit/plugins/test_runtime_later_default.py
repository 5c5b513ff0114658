"""A config file of the node read after ours that sets the default runtime (runtime.runtime_plan ``default_set_by``).

The node is a folder: real containerd, CRI-O and docker files are written under tmp_path, read the way the
nvidia_container_runtime module and its action plugin read them (runtime_steps: containerd's imports, globs expanded on
the node; runtime_live: CRI-O's drop-in folder), and planned. The file that wins is the last one that sets the default,
in the engine's own order: containerd reads config.toml, then each import in order (a glob's files sorted), then the
imports of those files; CRI-O reads crio.conf, then its drop-in folder in lexical order; dockerd takes flags from the
ExecStart systemd runs."""

from __future__ import annotations

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.plan import host_plan
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime, runtime_live, runtime_steps
from ansible_collections.kgn.gpu_nodes.plugins.modules.nvidia_container_runtime import read_paths

V3 = "io.containerd.cri.v1.runtime"
V2 = "io.containerd.grpc.v1.cri"


def v3_default(name):
    return f'version = 3\n\n[plugins."{V3}".containerd]\ndefault_runtime_name = "{name}"\n'


def v2_default(name):
    return (f'version = 2\n\n[plugins."{V2}".containerd]\ndefault_runtime_name = "{name}"\n\n'
            f'[plugins."{V2}".containerd.runtimes.{name}]\nruntime_type = "io.containerd.runc.v2"\n')


class Node:
    """A node's /etc under tmp_path: ``write`` files, ``observed`` as the module reads them, ``plan``."""

    def __init__(self, root):
        self.root = root
        self.etc = f"{root}/etc"
        self.inputs = {
            "engine": "auto", "kubernetes_version": "1.31.2", "set_default": True, "mode": "legacy",
            "binary": "/usr/bin/nvidia-container-runtime", "toolkit_version": "1.20.0",
            "docker_config": f"{self.etc}/docker/daemon.json", "docker_runtime_path": "nvidia-container-runtime",
            "docker_runtime_args": [],
            "containerd_config": f"{self.etc}/containerd/config.toml",
            "containerd_dropin": f"{self.etc}/containerd/conf.d/99-nvidia.toml",
            "crio_config": f"{self.etc}/crio/crio.conf", "crio_dropin": f"{self.etc}/crio/crio.conf.d/99-nvidia.conf",
            "toolkit_config": f"{self.etc}/nvidia-container-runtime/config.toml",
        }

    def path(self, relative):
        return f"{self.etc}/{relative}"

    def write(self, files):
        for relative, text in files.items():
            path = self.root / "etc" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def observed(self, versions, docker_unit=None):
        paths = [self.inputs[k] for k in ("docker_config", "containerd_config", "containerd_dropin", "crio_config",
                                          "crio_dropin")]
        files = {path: host.read(path) for path in paths}
        config = self.inputs["containerd_config"]
        if versions.get("containerd"):
            for path, text in runtime_steps.containerd_import_texts(config, files[config], read_paths).items():
                files.setdefault(path, text)
        if versions.get("crio"):
            for path, text in runtime_live.crio_dropin_texts(f"{self.etc}/crio/crio.conf.d").items():
                files.setdefault(path, text)
        observed = {"versions": versions, "cri_dockerd": True, "files": files, "toolkit_default": ""}
        if docker_unit is not None:
            observed["docker_unit"] = docker_unit
        return observed

    def plan(self, versions, docker_unit=None, **inputs):
        observed = self.observed(versions, docker_unit)
        return host_plan({"container_runtime": {**self.inputs, **inputs}},
                         {"container_runtime": observed})["container_runtime"]


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


# --- containerd ---------------------------------------------------------------------------------------------------


def test_containerd_v3_a_user_file_the_glob_sorts_after_ours_is_named(node):
    node.write({
        "containerd/config.toml": f'version = 3\nimports = ["{node.etc}/containerd/conf.d/*.toml"]\n',
        "containerd/conf.d/10-mirrors.toml": v3_default("crun"),  # before ours: ours wins over it
        "containerd/conf.d/zz-runc.toml": v3_default("runc"),
    })
    plan = node.plan({"containerd": "2.1.4"})
    later = plan["default_set_by"]
    assert later == {
        "engine": "containerd", "path": node.path("containerd/conf.d/zz-runc.toml"),
        "key": f'plugins."{V3}".containerd.default_runtime_name', "value": "runc", "table": False,
        "importer": node.path("containerd/config.toml"), "entry": f"{node.etc}/containerd/conf.d/*.toml",
        "ours": node.path("containerd/conf.d/99-nvidia.toml"), "config": node.path("containerd/config.toml")}
    message = runtime.default_refusal(plan)
    assert message == (
        f'{node.etc}/containerd/conf.d/zz-runc.toml sets plugins."{V3}".containerd.default_runtime_name = "runc"; '
        f"containerd reads it after this project's drop-in {node.etc}/containerd/conf.d/99-nvidia.toml (it reads "
        f"{node.etc}/containerd/config.toml, then each of its imports in order, a glob's files sorted by name, then "
        "the imports of those files; the last file that sets a key wins), so containerd would run \"runc\" by default "
        "whatever this project writes: a restart would not make nvidia the default. This project does not override "
        f"a later file. Choose one: remove default_runtime_name from {node.etc}/containerd/conf.d/zz-runc.toml (its "
        "other settings stay); or rename it so that it sorts before 99-nvidia.toml (for example "
        f"{node.etc}/containerd/conf.d/50-zz-runc.toml), as {node.etc}/containerd/conf.d/*.toml imports both; or "
        "keep that default and set nvidia_container_runtime_set_default: false (nvidia stays registered but is not "
        "the default: GPU pods, the device plugin's included, then need a RuntimeClass whose handler is nvidia)")
    # the plan itself is what it was: the drop-in and the import, the user's files untouched
    assert [f["path"] for f in plan["files"]] == [node.inputs["containerd_dropin"], node.inputs["containerd_config"]]


def test_containerd_v2_a_relative_glob_import_after_ours_is_named(node):
    node.write({
        "containerd/config.toml": 'version = 2\nimports = ["conf.d/*.toml"]\n',
        "containerd/conf.d/runc-default.toml": v2_default("runc"),
    })
    later = node.plan({"containerd": "1.7.24"})["default_set_by"]
    assert (later["path"], later["value"], later["table"]) == (node.path("containerd/conf.d/runc-default.toml"),
                                                               "runc", False)
    assert later["key"] == f'plugins."{V2}".containerd.default_runtime_name'


def test_containerd_1x_a_later_cri_table_without_the_key_takes_the_whole_table(node):
    """containerd 1.x replaces a plugin's table whole on import (containerd#5837): a later registry-only CRI table
    drops our runtime and sets the default back to the built-in one."""
    node.write({
        "containerd/config.toml": 'version = 2\nimports = ["/nowhere/x.toml", "conf.d/*.toml"]\n',
        "containerd/conf.d/registry.toml": f'version = 2\n[plugins."{V2}".registry]\nconfig_path = "/etc/certs.d"\n',
    })
    plan = node.plan({"containerd": "1.7.24"})
    assert plan["default_set_by"]["path"] == node.path("containerd/conf.d/registry.toml")
    assert plan["default_set_by"]["table"] is True and plan["default_set_by"]["value"] == "runc"
    message = runtime.default_refusal(plan)
    assert f'has a [plugins."{V2}"] table without default_runtime_name: containerd 1.x takes' in message
    assert f"move that table's settings into {node.etc}/containerd/config.toml" in message


@pytest.mark.parametrize(("version", "text"), [("2.1.4", v3_default("runc")), ("1.7.24", v2_default("runc"))])
def test_containerd_a_user_file_sorting_before_ours_is_not_named(node, version, text):
    config_version = 3 if version.startswith("2") else 2
    node.write({
        "containerd/config.toml": f'version = {config_version}\nimports = ["{node.etc}/containerd/conf.d/*.toml"]\n',
        "containerd/conf.d/50-runc.toml": text,
    })
    plan = node.plan({"containerd": version})
    assert plan["default_set_by"] is None and runtime.default_refusal(plan) == ""


def test_containerd_explicit_imports_count_in_their_listed_order_not_sorted(node):
    before_ours = f'version = 3\nimports = ["{node.etc}/containerd/zz-first.toml", "{node.etc}/containerd/aa.toml"]\n'
    node.write({"containerd/config.toml": before_ours, "containerd/zz-first.toml": v3_default("crun"),
                "containerd/aa.toml": v3_default("runc")})
    assert node.plan({"containerd": "2.1.4"})["default_set_by"] is None  # both listed before ours, appended last

    ours_first = (f'version = 3\nimports = ["{node.etc}/containerd/conf.d/99-nvidia.toml", '
                  f'"{node.etc}/containerd/aa.toml"]\n')
    node.write({"containerd/config.toml": ours_first})
    plan = node.plan({"containerd": "2.1.4"})
    assert plan["default_set_by"]["path"] == node.path("containerd/aa.toml")  # sorts before ours, listed after
    assert (f"or list it before {node.etc}/containerd/conf.d/99-nvidia.toml in the imports of "
            f"{node.etc}/containerd/config.toml;") in runtime.default_refusal(plan)


def test_containerd_an_import_of_an_import_is_read_after_every_import_of_config_toml(node):
    node.write({
        "containerd/config.toml": f'version = 3\nimports = ["{node.etc}/containerd/site.toml"]\n',
        "containerd/site.toml": f'version = 3\nimports = ["{node.etc}/containerd/site.d/*.toml"]\n',
        "containerd/site.d/00-runc.toml": v3_default("runc"),
    })
    plan = node.plan({"containerd": "2.1.4"})
    assert plan["default_set_by"]["path"] == node.path("containerd/site.d/00-runc.toml")
    assert plan["default_set_by"]["importer"] == node.path("containerd/site.toml")
    assert (f"or import it from {node.etc}/containerd/config.toml before {node.etc}/containerd/conf.d/99-nvidia.toml "
            f"(it is imported by {node.etc}/containerd/site.toml") in runtime.default_refusal(plan)


def test_containerd_2_a_version_2_user_file_counts_after_its_migration(node):
    node.write({
        "containerd/config.toml": f'version = 3\nimports = ["{node.etc}/containerd/conf.d/*.toml"]\n',
        "containerd/conf.d/legacy.toml": v2_default("runc"),  # containerd 2.x migrates grpc.v1.cri to cri.v1.runtime
    })
    later = node.plan({"containerd": "2.1.4"})["default_set_by"]
    assert later["path"] == node.path("containerd/conf.d/legacy.toml")
    assert later["key"] == f'plugins."{V2}".containerd.default_runtime_name'


@pytest.mark.parametrize("case", ["later_sets_nvidia", "set_default_off"])
def test_containerd_nothing_to_refuse(node, case):
    node.write({
        "containerd/config.toml": f'version = 3\nimports = ["{node.etc}/containerd/conf.d/*.toml"]\n',
        "containerd/conf.d/zz.toml": v3_default("nvidia" if case == "later_sets_nvidia" else "runc"),
    })
    plan = node.plan({"containerd": "2.1.4"}, set_default=case != "set_default_off")
    assert plan["default_set_by"] is None


def test_containerd_without_a_drop_in_a_later_import_overrides_config_toml(node):
    node.write({
        "containerd/config.toml": f'version = 3\nimports = ["{node.etc}/containerd/conf.d/*.toml"]\n',
        "containerd/conf.d/10-runc.toml": v3_default("runc"),
    })
    plan = node.plan({"containerd": "2.1.4"}, containerd_dropin="")
    assert plan["default_set_by"]["path"] == node.path("containerd/conf.d/10-runc.toml")
    assert plan["default_set_by"]["ours"] == node.path("containerd/config.toml")
    assert f"after this project's {node.etc}/containerd/config.toml (it reads" in runtime.default_refusal(plan)


def test_the_module_reads_every_imported_file_once_even_in_a_cycle(node):
    node.write({
        "containerd/config.toml": f'version = 3\nimports = ["{node.etc}/containerd/a.toml"]\n',
        "containerd/a.toml": f'version = 3\nimports = ["{node.etc}/containerd/config.toml", "b.toml", "gone.toml"]\n',
        "containerd/b.toml": "version = 3\n",
    })
    config = node.inputs["containerd_config"]
    texts = runtime_steps.containerd_import_texts(config, host.read(config), read_paths)
    assert texts == {node.path("containerd/a.toml"): host.read(node.path("containerd/a.toml")),
                     node.path("containerd/b.toml"): "version = 3\n",
                     node.path("containerd/gone.toml"): None}


def test_go_glob_lists_each_folder_sorted_dot_files_too(node):
    node.write({"containerd/d/x.toml": "", "containerd/d-b/x.toml": "", "containerd/d/.hidden.toml": "",
                "containerd/d/y.conf": ""})
    assert runtime_live.go_glob(f"{node.etc}/containerd/d*/*.toml") == [
        node.path("containerd/d/.hidden.toml"), node.path("containerd/d/x.toml"), node.path("containerd/d-b/x.toml")]
    known = {p: "" for p in runtime_live.go_glob(f"{node.etc}/containerd/*/*")}
    assert runtime.containerd_load_order(node.path("containerd/d/x.toml"), known)[0]["path"] == \
        node.path("containerd/d/x.toml")
    assert runtime.glob_match("/etc/*.toml", "/etc/a.toml") and not runtime.glob_match("/etc/*.toml", "/etc/a/b.toml")


# --- CRI-O ------------------------------------------------------------------------------------------------------


def test_crio_a_drop_in_after_ours_is_named_and_one_before_is_not(node):
    node.write({
        "crio/crio.conf": '[crio.runtime]\ndefault_runtime = "runc"\n',
        "crio/crio.conf.d/10-crio.conf": '[crio.runtime]\ndefault_runtime = "crun"\n',
    })
    assert node.plan({"crio": "1.31.0"})["default_set_by"] is None

    node.write({"crio/crio.conf.d/99-zz-crun.conf": '[crio.runtime]\ndefault_runtime = "crun"\n'})
    plan = node.plan({"crio": "1.31.0"})
    assert plan["default_set_by"] == {
        "engine": "crio", "path": node.path("crio/crio.conf.d/99-zz-crun.conf"),
        "key": "[crio.runtime] default_runtime", "value": "crun", "ours": node.path("crio/crio.conf.d/99-nvidia.conf"),
        "config": node.path("crio/crio.conf")}
    assert runtime.default_refusal(plan) == (
        f'{node.etc}/crio/crio.conf.d/99-zz-crun.conf sets [crio.runtime] default_runtime = "crun" and CRI-O reads it '
        f"after this project's drop-in {node.etc}/crio/crio.conf.d/99-nvidia.conf (it reads {node.etc}/crio/crio.conf, "
        f"then every file in {node.etc}/crio/crio.conf.d/ in lexical order; the last file that sets a key wins), so "
        "CRI-O would run \"crun\" by default whatever this project writes: a restart would not make nvidia the "
        "default. This project does not override a later drop-in. Choose one: remove default_runtime from "
        f"{node.etc}/crio/crio.conf.d/99-zz-crun.conf (its other settings stay); or rename it so that it sorts before "
        f"99-nvidia.conf (for example {node.etc}/crio/crio.conf.d/50-zz-crun.conf); or keep that default and set "
        "nvidia_container_runtime_set_default: false (nvidia stays registered but is not the default: GPU pods, the "
        "device plugin's included, then need a RuntimeClass whose handler is nvidia)")


def test_crio_walks_subfolders_in_lexical_order(node):
    node.write({"crio/crio.conf.d/99-nvidia.conf.d/runc.conf": '[crio.runtime]\ndefault_runtime = "runc"\n'})
    # filepath.Walk: the folder 99-nvidia.conf.d/ comes after the file 99-nvidia.conf
    assert node.plan({"crio": "1.31.0"})["default_set_by"]["path"] == \
        node.path("crio/crio.conf.d/99-nvidia.conf.d/runc.conf")


# --- Docker -----------------------------------------------------------------------------------------------------

RHEL_DOCKER = ("[Unit]\nDescription=Docker Application Container Engine\n\n[Service]\nType=notify\n"
               "ExecStart=/usr/bin/dockerd-current \\\n          --add-runtime docker-runc=/usr/libexec/docker/"
               "docker-runc-current \\\n          --default-runtime=docker-runc \\\n          --exec-opt "
               "native.cgroupdriver=systemd \\\n          $OPTIONS\n")


def docker_unit(node, unit, dropins=None):
    node.write({"systemd/docker.service": unit, **{f"systemd/docker.service.d/{k}": v
                                                   for k, v in (dropins or {}).items()}})
    paths = [node.path("systemd/docker.service"), *[node.path(f"systemd/docker.service.d/{k}")
                                                    for k in sorted(dropins or {})]]
    return {"paths": paths, "texts": {p: host.read(p) for p in paths}}


def test_docker_a_default_runtime_flag_in_the_unit_is_refused_naming_the_unit(node):
    plan = node.plan({"docker": "1.13.1"}, docker_unit(node, RHEL_DOCKER), kubernetes_version="1.23.1")
    assert plan["default_set_by"] == {"engine": "docker", "path": node.path("systemd/docker.service"),
                                      "key": "--default-runtime", "value": "docker-runc",
                                      "ours": node.inputs["docker_config"], "config": node.inputs["docker_config"]}
    message = runtime.default_refusal(plan)
    assert message.startswith(f"{node.etc}/systemd/docker.service starts dockerd with --default-runtime=docker-runc "
                              f"(its ExecStart), and this project sets \"default-runtime\" in {node.etc}/docker/"
                              "daemon.json: dockerd refuses to start when an option is both a flag and in daemon.json")
    assert "nvidia_container_runtime_set_default: false" in message
    # without set_default nothing conflicts: daemon.json gets no default-runtime
    assert node.plan({"docker": "1.13.1"}, docker_unit(node, RHEL_DOCKER), kubernetes_version="1.23.1",
                     set_default=False)["default_set_by"] is None


def test_docker_a_drop_in_that_resets_execstart_without_the_flag_is_fine(node):
    override = "[Service]\nExecStart=\nExecStart=/usr/bin/dockerd-current --exec-opt native.cgroupdriver=systemd\n"
    unit = docker_unit(node, RHEL_DOCKER, {"override.conf": override})
    assert node.plan({"docker": "1.13.1"}, unit, kubernetes_version="1.23.1")["default_set_by"] is None


def test_docker_a_config_file_flag_naming_another_file_is_refused(node):
    override = ("[Service]\nExecStart=\nExecStart=/usr/bin/dockerd -H fd:// "
                "--config-file=/srv/docker/daemon.json\n")
    unit = docker_unit(node, "[Service]\nExecStart=/usr/bin/dockerd -H fd://\n", {"10-config.conf": override})
    plan = node.plan({"docker": "24.0.7"}, unit)
    assert (plan["default_set_by"]["path"], plan["default_set_by"]["key"], plan["default_set_by"]["value"]) == (
        node.path("systemd/docker.service.d/10-config.conf"), "--config-file", "/srv/docker/daemon.json")
    assert "set nvidia_container_runtime_docker_config: /srv/docker/daemon.json" in runtime.default_refusal(plan)
    same = override.replace("/srv/docker/daemon.json", node.inputs["docker_config"])
    unit = docker_unit(node, "[Service]\nExecStart=/usr/bin/dockerd -H fd://\n", {"10-config.conf": same})
    assert node.plan({"docker": "24.0.7"}, unit)["default_set_by"] is None
