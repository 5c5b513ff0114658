"""nvidia_container_runtime with a file of the node, read after ours, that sets the default runtime back to runc.

The task runs as its action plugin runs it (observe, plan on the control machine's side, apply with the live state)
against a node in tmp_path with its commands answered by a fake: it must refuse before it writes or restarts anything,
name the file, keep the user's file as it is, and record the live state (``default_set_by``) that verify diagnoses. In
check mode it says the same as a warning and records it."""

from __future__ import annotations

import json
import os

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import change, host
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime_steps
from ansible_collections.kgn.gpu_nodes.plugins.modules import nvidia_container_runtime as mod

V3 = "io.containerd.cri.v1.runtime"


class Ended(Exception):
    def __init__(self, how, result):
        super().__init__(how)
        self.how, self.result = how, result


class FakeModule:
    def __init__(self, params, check_mode=False):
        self.params, self.check_mode, self.warnings = params, check_mode, []

    def fail_json(self, **result):
        raise Ended("failed", result)

    def exit_json(self, **result):
        raise Ended("exited", result)

    def warn(self, text):
        self.warnings.append(text)

    def get_bin_path(self, name):
        return None

    def from_json(self, text):
        return json.loads(text)


def task(module):
    """The task as the action plugin runs it (runtime_steps.run): each step a call of the module; ends like the
    module, with Ended."""
    def step(phase, **extra):
        one = FakeModule({**module.params, "phase": phase, "paths": [], "text": None, "plan": None, "judged": {},
                          **extra}, module.check_mode)
        one.warnings = module.warnings
        try:
            mod.dispatch(one)
        except Ended as ended:
            if ended.how == "failed":
                raise runtime_steps.StepFailed({**ended.result, "failed": True}) from None
            return ended.result
        raise AssertionError(f"phase {phase} did not end")

    result = runtime_steps.run(module.params, step, module.check_mode)
    raise Ended("failed" if result.get("failed") else "exited", result)


@pytest.fixture
def node(tmp_path, monkeypatch):
    etc = tmp_path / "etc"
    files = {
        "containerd/config.toml": f'version = 3\nimports = ["{etc}/containerd/conf.d/*.toml"]\n',
        "containerd/conf.d/zz-runc.toml": f'version = 3\n[plugins."{V3}".containerd]\ndefault_runtime_name = "runc"\n',
    }
    for relative, text in files.items():
        (etc / relative).parent.mkdir(parents=True, exist_ok=True)
        (etc / relative).write_text(text)
    binary = tmp_path / "nvidia-container-runtime"
    binary.write_text("#!/bin/sh\n")
    calls = []

    def run(module, argv, timeout=60, data=None):
        calls.append(list(argv))
        if argv == ["containerd", "--version"]:
            return 0, "containerd containerd.io 2.1.4 75cb2b7\n", ""
        if argv[:2] == ["systemctl", "show"] and argv[-1] == "containerd":
            return 0, "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=0\n", ""
        if argv[0] == "ctr":
            return 0, "Client: 2.1.4\nServer: 2.1.4\n", ""
        if argv[:2] == ["crictl", "info"]:
            config = {"containerd": {"defaultRuntimeName": "runc", "runtimes": {"nvidia": {}, "runc": {}}}}
            return 0, json.dumps({"config": config}), ""
        if argv[0] == str(binary):
            return 0, "NVIDIA Container Runtime version 1.20.0\n", ""
        return None, "", f"{argv[0]}: command not found"

    def never(*args, **kwargs):
        raise AssertionError("nothing may be written or restarted")

    monkeypatch.setattr(host, "run", run)
    monkeypatch.setattr(change, "apply", never)
    monkeypatch.setattr(change, "write", never)
    params = {
        "engine": "containerd", "kubernetes_version": "1.31.2", "set_default": True, "binary": str(binary),
        "docker_config": f"{etc}/docker/daemon.json", "docker_runtime_path": "nvidia-container-runtime",
        "docker_runtime_args": [], "containerd_config": f"{etc}/containerd/config.toml",
        "containerd_dropin": f"{etc}/containerd/conf.d/99-nvidia.toml", "crio_config": f"{etc}/crio/crio.conf",
        "crio_dropin": f"{etc}/crio/crio.conf.d/99-nvidia.conf", "mode": "legacy", "toolkit_version": "1.20.0",
        "cdi_spec_path": f"{tmp_path}/run/cdi/nvidia.json",
        "toolkit_config": f"{etc}/nvidia-container-runtime/config.toml", "dev_char_links": False,
        "envvar_unprivileged": "auto", "stacks": [],
        "health_timeout": 30, "render_dir": None, "render_host": None, "observed": {},
    }
    return {"etc": str(etc), "params": params, "calls": calls, "files": files}


def test_the_run_refuses_before_writing_or_restarting_and_names_the_file(node):
    module = FakeModule(node["params"])
    with pytest.raises(Ended) as ended:
        task(module)
    assert ended.value.how == "failed"
    result = ended.value.result
    user = f"{node['etc']}/containerd/conf.d/zz-runc.toml"
    assert result["msg"].startswith(
        f'{user} sets plugins."{V3}".containerd.default_runtime_name = "runc"; containerd reads it after this '
        f"project's drop-in {node['etc']}/containerd/conf.d/99-nvidia.toml")
    assert result["msg"].endswith("whose handler is nvidia). Nothing was changed.")
    # nothing restarted, nothing written: the user's file and config.toml as they were, no drop-in
    assert not [c for c in node["calls"] if c[:2] in (["systemctl", "restart"], ["systemctl", "reset-failed"])]
    for relative, text in node["files"].items():
        assert host.read(f"{node['etc']}/{relative}") == text
    assert host.read(f"{node['etc']}/containerd/conf.d/99-nvidia.toml") is None
    # what verify reads: the live state names the file that wins
    live = result["ansible_facts"]["kgn_state_container_runtime"]["live"]
    assert live["default_set_by"] == {"path": user, "key": f'plugins."{V3}".containerd.default_runtime_name',
                                      "value": "runc", "ours": f"{node['etc']}/containerd/conf.d/99-nvidia.toml",
                                      "config": f"{node['etc']}/containerd/config.toml", "table": False}
    assert f"containerd's default runtime is 'runc', not nvidia ({user} sets" in live["problems"][0]
    assert result["observed"]["files"][user] == node["files"]["containerd/conf.d/zz-runc.toml"]


def test_check_mode_records_the_file_and_warns_that_a_run_would_refuse(node):
    module = FakeModule(node["params"], check_mode=True)
    with pytest.raises(Ended) as ended:
        task(module)
    assert ended.value.how == "exited"
    state = ended.value.result["ansible_facts"]["kgn_state_container_runtime"]
    assert state["live"]["default_set_by"]["path"] == f"{node['etc']}/containerd/conf.d/zz-runc.toml"
    assert [w for w in module.warnings if w.startswith("not repaired: a run would refuse: ")
            and "zz-runc.toml sets" in w]


def test_without_the_later_file_the_run_goes_on_to_change_the_node(node):
    os.unlink(f"{node['etc']}/containerd/conf.d/zz-runc.toml")
    module = FakeModule(node["params"])
    with pytest.raises(AssertionError, match="nothing may be written"):
        task(module)  # it reaches the change (here refused by the test's fake)


def test_a_render_from_an_observation_with_the_later_file_refuses_too(node, tmp_path):
    etc = node["etc"]
    observed = {"versions": {"containerd": "2.1.4"}, "toolkit_default": "",
                "files": {f"{etc}/{relative}": text for relative, text in node["files"].items()}}
    module = FakeModule({**node["params"], "render_dir": str(tmp_path / "rendered"), "render_host": "n1",
                         "observed": observed})
    with pytest.raises(Ended) as ended:
        task(module)
    assert ended.value.how == "failed" and ended.value.result["msg"].endswith(". Nothing was rendered.")
    assert f"{etc}/containerd/conf.d/zz-runc.toml sets" in ended.value.result["msg"]
    assert not (tmp_path / "rendered").exists()
