"""TOML through maintained libraries (module_utils/runtime/tomlio.py) and the steps of an nvidia_container_runtime
task (runtime_steps): the plan is made where TOML is written, a node without a TOML reader is refused before a change
that would need one, and the engine's answer it cannot read is a problem, never a guess."""

from __future__ import annotations

import sys
import types

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime, runtime_live, runtime_steps, tomlio
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime_args import ARGUMENT_SPEC

NO_READER = {"tomllib": None, "tomli": None, "toml": None}  # None in sys.modules: `import` raises ImportError


@pytest.fixture
def without_readers(monkeypatch):
    for name, value in NO_READER.items():
        monkeypatch.setitem(sys.modules, name, value)


def test_the_reader_is_the_standard_library_on_the_control_machine():
    assert tomlio.reader() == "tomllib"
    assert tomlio.loads('a = 1\n[b]\nc = "d"\n') == {"a": 1, "b": {"c": "d"}}


def test_an_older_python_reads_with_what_its_os_ships(monkeypatch, without_readers):
    toml = types.ModuleType("toml")  # python3-toml's module, as EPEL's python36-toml installs it
    toml.loads = lambda text: {"read by": "toml", "text": text}
    monkeypatch.setitem(sys.modules, "toml", toml)
    assert tomlio.reader() == "toml"
    assert runtime.toml_parse("x = 1", "f") == {"read by": "toml", "text": "x = 1"}


def test_a_python_without_a_reader_says_what_to_install(without_readers):
    assert tomlio.reader() == ""
    with pytest.raises(tomlio.NoReader, match=r"Python 3\.9\.2 on this node cannot read TOML .*install python3-tomli "
                                              r"or python3-toml \(python36-toml from EPEL on EL 7\)"):
        raise tomlio.NoReader(tomlio.no_reader_words("3.9.2"))
    with pytest.raises(tomlio.NoReader):
        runtime.toml_parse("version = 2", "containerd config dump")


def test_writing_is_tomli_w_and_its_bytes_are_stable():
    document = {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"containerd": {"runtimes": {
        "nvidia": {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": "/usr/bin/x"}}}}}}}
    text = runtime.toml_emit(document)
    assert runtime.toml_parse(text) == document
    assert text.startswith("version = 3\n\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia]\n")


@pytest.mark.parametrize(("engine", "node", "refused"), [
    ("crio", {"toml_reader": "", "python": "3.9.2", "crictl": True}, "crio status config"),
    ("containerd", {"toml_reader": "", "python": "3.6.8", "crictl": False}, "containerd config dump"),
    ("containerd", {"toml_reader": "", "python": "3.6.8", "crictl": True}, ""),
    ("containerd", {"toml_reader": "toml", "python": "3.6.8", "crictl": False}, ""),
    ("docker", {"toml_reader": "", "python": "3.6.8", "crictl": False}, ""),
    ("crio", None, ""),  # a render: no node
])
def test_a_node_that_could_not_check_its_engine_after_a_restart_is_refused(engine, node, refused):
    words = runtime.toml_refusal({"engine": engine}, node)
    assert (refused in words) if refused else words == ""
    if refused:
        assert f"Python {node['python']} on this node cannot read TOML" in words


class Node:
    """A module whose commands are answered from ``answers`` {argv[0]: (rc, out)} (runtime_live reads through
    host.run)."""

    def __init__(self, monkeypatch, answers):
        from ansible_collections.kgn.gpu_nodes.plugins.module_utils import host

        def run(module, argv, timeout=60, data=None):
            return (*answers.get(argv[0], (127, "")), "")

        monkeypatch.setattr(host, "run", run)
        monkeypatch.setattr(host, "service", lambda module, unit: {"active": True, "state": "running",
                                                                   "started": None})
        monkeypatch.setattr(host, "changed_since", lambda paths, started: [])


def test_an_engine_answer_the_node_cannot_read_is_a_problem_not_a_default(monkeypatch, without_readers):
    Node(monkeypatch, {"ctr": (0, "Server: 2.1.4"), "containerd": (0, 'version = 3\n')})
    plan = {"engine": "containerd", "service": "containerd", "cri_plugin": "io.containerd.cri.v1.runtime",
            "files": [], "runtime_mode": "legacy"}
    live = runtime_live.live_state(None, plan)
    assert live["unread"].startswith("containerd config dump: Python ")
    assert live["problems"] == [f"containerd answers, but its answer was not read ({live['unread']})"]


def _params(**extra):
    params = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    params.update({"kubernetes_version": "1.31.2", "engine": "containerd", "mode": "legacy", **extra})
    return params


V2_WITH_IMPORTS = ('version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n\n'
                   '[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "runc"\n')


def test_the_steps_read_the_imports_migrate_without_them_and_hand_the_plan_to_apply():
    asked = []

    def step(phase, **arguments):
        asked.append((phase, arguments))
        if phase == "observe":
            return {"observed": {"versions": {"containerd": "2.1.4"}, "toolkit_default": "",
                                 "files": {"/etc/containerd/config.toml": V2_WITH_IMPORTS}},
                    "node": {"toml_reader": "tomllib", "python": "3.13.5", "crictl": False}}
        if phase == "read":
            return {"globs": {"/etc/containerd/conf.d/*.toml": ["/etc/containerd/conf.d/10-user.toml"]},
                    "texts": {"/etc/containerd/conf.d/10-user.toml": "version = 2\n"}}
        if phase == "migrate":
            return {"migrated": 'version = 3\n\n[plugins."io.containerd.cri.v1.runtime".containerd]\n'
                                'default_runtime_name = "runc"\n'}
        return {"changed": True, "applied": arguments}

    done = runtime_steps.run(_params(), step, check_mode=False)
    assert [phase for phase, _ in asked] == ["observe", "read", "migrate", "apply"]
    assert asked[1][1] == {"paths": ["/etc/containerd/conf.d/*.toml"]}
    migrated = runtime.toml_parse(asked[2][1]["text"])
    assert "imports" not in migrated and migrated["version"] == 2
    applied = done["applied"]
    assert applied["observed"]["files"]["/etc/containerd/conf.d/10-user.toml"] == "version = 2\n"
    config = next(f for f in applied["plan"]["files"] if f["path"] == "/etc/containerd/config.toml")
    assert runtime.toml_parse(config["content"])["version"] == 3  # written in containerd 2.x's layout
    assert applied["judged"]["dropin"] == "/etc/containerd/conf.d/99-nvidia.toml"


def test_the_steps_refuse_before_apply_where_the_node_could_not_check_the_engine():
    def step(phase, **arguments):
        assert phase == "observe", "nothing may be read further or applied"
        return {"observed": {"versions": {"crio": "1.30.0"}, "toolkit_default": "", "files": {}},
                "node": {"toml_reader": "", "python": "3.9.18", "crictl": True}}

    done = runtime_steps.run(_params(engine="crio"), step, check_mode=False)
    assert done["failed"] and done["msg"].endswith(". Nothing was changed.")
    assert "crio status config" in done["msg"] and "Python 3.9.18" in done["msg"]


def test_a_failed_step_is_the_tasks_result():
    def step(phase, **arguments):
        raise runtime_steps.StepFailed({"failed": True, "msg": "containerd --version: boom"})

    assert runtime_steps.run(_params(), step, check_mode=False) == {"failed": True,
                                                                    "msg": "containerd --version: boom"}
