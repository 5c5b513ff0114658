"""Who may take GPUs by NVIDIA_VISIBLE_DEVICES: the decision (isolation.py), the toolkit file that carries it
(runtime.toolkit_config_text), the device plugin's strategy (stacks plan) and the verify check (gpu_isolation)."""

from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation, runtime
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime import toml_parse
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import checks as c
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify  # noqa: F401

# `nvidia-ctk config default` of toolkit 1.20.0 (captured, tests/unit/fixtures/nvidia-ctk-1.20.0)
DEFAULT = (Path(__file__).parents[1] / "fixtures" / "nvidia-ctk-1.20.0" / "config-default.toml").read_text()


@pytest.mark.parametrize("stacks,version", [([], "1.36.3"), (["nvidia_device_plugin"], "1.16.15"),
                                            (["nvidia_dra"], "1.34.1"), (["hami"], "1.23.0")])
def test_auto_closes_the_door_where_every_stack_hands_gpus_out_another_way(stacks, version):
    policy = isolation.envvar_policy("auto", stacks, version)
    assert policy["refuse"] and policy["needed_by"] == [] and policy["why"].startswith("closed")
    assert isolation.device_list_strategy(policy) == "volume-mounts"


@pytest.mark.parametrize("stack,version", [("gpushare", "1.22.3"), ("nano_gpu", "1.20.0"), ("elastic_gpu", "1.23.1"),
                                           ("hami", "1.22.3")])
def test_auto_leaves_it_open_for_a_stack_that_needs_it_and_says_so(stack, version):
    policy = isolation.envvar_policy("auto", [stack], version)
    assert not policy["refuse"] and policy["needed_by"] == [stack]
    assert policy["why"].startswith("open:") and "kgn_gpu_envvar_unprivileged: accept" in policy["why"]
    assert isolation.device_list_strategy(policy) == "envvar"
    with pytest.raises(KgnError, match=r"is refuse, but .* its pods would start without their GPU"):
        isolation.envvar_policy("refuse", [stack], version)


def test_accept_is_the_named_old_behaviour_and_a_wrong_value_is_refused():
    policy = isolation.envvar_policy("accept", ["nvidia_device_plugin"], "1.36.3")
    assert not policy["refuse"] and "any container on this node may take every GPU" in policy["why"]
    with pytest.raises(KgnError, match="kgn_gpu_envvar_unprivileged must be one of auto, refuse, accept"):
        isolation.envvar_policy("closed", [], "1.36.3")


def test_the_toolkit_file_sets_the_commented_defaults_in_place_and_keeps_the_rest():
    closed = isolation.toolkit_settings(isolation.envvar_policy("auto", [], "1.36.3"))
    text = runtime.toolkit_config_text(None, DEFAULT, "cdi", closed)
    parsed = toml_parse(text, "config.toml")
    assert parsed["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False
    assert parsed["accept-nvidia-visible-devices-as-volume-mounts"] is True
    assert parsed["nvidia-container-runtime"]["mode"] == "cdi"
    # the two commented lines became the settings, nothing else moved
    changed = [(a, b) for a, b in zip(DEFAULT.splitlines(), text.splitlines(), strict=True) if a != b]
    assert [a for a, _ in changed] == ["#accept-nvidia-visible-devices-as-volume-mounts = false",
                                       "#accept-nvidia-visible-devices-envvar-when-unprivileged = true",
                                       'mode = "auto"']
    assert runtime.toolkit_config_text(text, DEFAULT, "cdi", closed) == text  # a second run changes nothing
    opened = runtime.toolkit_config_text(text, DEFAULT, "cdi", isolation.toolkit_settings(
        isolation.envvar_policy("accept", [], "1.36.3")))
    assert toml_parse(opened, "c")["accept-nvidia-visible-devices-envvar-when-unprivileged"] is True
    # a file without the keys: they go before the first table (TOML's top level)
    bare = runtime.toolkit_config_text('[nvidia-container-runtime]\nmode = "legacy"\n', None, "legacy", closed)
    assert bare.splitlines()[0] == "accept-nvidia-visible-devices-envvar-when-unprivileged = false"
    assert toml_parse(bare, "c")["nvidia-container-runtime"]["mode"] == "legacy"


def test_the_runtime_plan_carries_the_decision_of_the_nodes_stacks():
    base = {"engine": "docker", "kubernetes_version": "1.22.3", "toolkit_version": "1.20.0", "mode": "legacy",
            "set_default": True, "binary": "/usr/bin/nvidia-container-runtime",
            "docker_config": "/etc/docker/daemon.json",
            "docker_runtime_path": "nvidia-container-runtime", "docker_runtime_args": [],
            "containerd_config": "/etc/containerd/config.toml", "containerd_dropin": "",
            "crio_config": "/etc/crio/crio.conf", "crio_dropin": "/etc/crio/crio.conf.d/99-nvidia.conf"}
    observed = {"versions": {"docker": "24.0.5"}, "toolkit_default": DEFAULT}
    for stacks_, refuse, value in ((["gpushare"], False, True), (["nvidia_device_plugin"], True, False)):
        plan = runtime.runtime_plan(dict(base, stacks=stacks_), observed)
        assert plan["isolation"]["refuse"] is refuse
        text = plan["toolkit_files"][0]["content"]
        assert toml_parse(text, "c")["accept-nvidia-visible-devices-envvar-when-unprivileged"] is value


def _stacks_plan(**inputs):
    return stacks.stacks_plan(dict({"kubernetes_version": "1.36.3", "stacks": ["nvidia_device_plugin"]}, **inputs))


def test_the_device_plugin_gets_the_strategy_of_the_decision():
    assert _stacks_plan()["isolation"]["device_list_strategy"] == "volume-mounts"
    assert _stacks_plan(envvar_unprivileged="accept")["isolation"]["device_list_strategy"] == "envvar"
    with pytest.raises(KgnError, match="refuse, but gpushare"):
        _stacks_plan(stacks=["gpushare"], kubernetes_version="1.22.3", envvar_unprivileged="refuse")


def _run_check(probe, decided, pod=None):
    seen = {"smoke": {"isolation": probe, "pod": {"isolation": pod} if pod else None}}
    want = {"smoke": {"engine": True, "pod": True}, "isolation": decided}
    return c.REGISTRY["gpu_isolation"].run(seen, want, c.Done())


CLOSED = {"status": "closed", "injected": [], "summary": "closed: ..."}
OPEN = {"status": "open", "injected": ["nvidia-smi"], "summary": "open: ... got nvidia-smi"}


def test_the_check_compares_what_a_container_got_with_the_decision():
    refuse = isolation.envvar_policy("auto", ["nvidia_device_plugin"], "1.36.3")
    needed = isolation.envvar_policy("auto", ["gpushare"], "1.22.3")
    assert _run_check(CLOSED, refuse)["status"] == "ok"
    result = _run_check(CLOSED, refuse, pod=OPEN)  # the pod got something: open, whatever the engine's container
    assert (result["status"], result["evidence"]["probe"]) == ("failed", "open")
    assert "engine: closed" in result["summary"] and "pod: open" in result["summary"]
    assert _run_check(OPEN, needed)["status"] == "warn" and "gpushare" in _run_check(OPEN, needed)["summary"]
    assert _run_check(CLOSED, needed)["status"] == "failed"  # gpushare's pods would get nothing
    assert _run_check({"status": "not_run", "injected": [], "summary": "not run: x"}, refuse)["status"] == "skipped"


def test_the_probe_pod_is_judged_by_what_it_got():
    from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke_pod

    log = ("kgn-smoke: nvidia-smi -L\nNVIDIA-SMI has failed\nkgn-smoke: rc 9\nkgn-smoke: dev\nnull\n"
           "kgn-smoke: proc\nkgn-smoke: env\nkgn-smoke: end\n")
    done = {"status": {"phase": "Succeeded"}}
    got = smoke_pod.judge_probe(done, log)
    assert (got["status"], got["injected"]) == ("open", ["nvidia-smi"]) and got["summary"].startswith("open: a pod")
    closed = smoke_pod.judge_probe(done, log.replace("NVIDIA-SMI has failed", "sh: nvidia-smi: not found")
                                   .replace("rc 9", "rc 127"))
    assert closed["status"] == "closed"
    pending = smoke_pod.judge_probe({"status": {"phase": "Pending"}}, "", {"summary": "was not scheduled"})
    assert pending == {"status": "not_run", "injected": [], "summary": "not run: the probe pod was not scheduled"}
