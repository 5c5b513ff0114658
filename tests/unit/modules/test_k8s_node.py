"""k8s_node module against a fake kubectl: cordon and drain (only when GPU pods run, for gpu_pods), uncordon only a
node it cordoned, the pods of one kind restarted, an API that does not answer said or refused."""

from __future__ import annotations

import json

from kubectl_fake import answer, calls, install, items, run_module


def _node(unschedulable=False):
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu1"},
                       "spec": {"unschedulable": True} if unschedulable else {}})


GPU_POD = {"metadata": {"namespace": "ml", "name": "train"},
           "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
WEB_POD = {"metadata": {"namespace": "web", "name": "nginx"}, "spec": {"containers": [{}]}}


def _args(tmp_path, rules, **over):
    return {"node": "gpu1", "api_host": "cp1", "kubectl": str(install(tmp_path / "bin", rules)),
            "kubeconfig": "/fake/admin.conf", **over}


def _argvs(tmp_path):
    return [c["argv"] for c in calls(tmp_path / "bin")]


def test_drained_cordons_and_drains_with_the_timeout(tmp_path):
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(_node())]},
             {"match": ["get", "pods"], "answers": [answer(items(WEB_POD))]},
             {"match": ["cordon"], "answers": [answer("node/gpu1 cordoned\n")]},
             {"match": ["drain"], "answers": [answer("node/gpu1 drained\n")]}]
    result = run_module("k8s_node", _args(tmp_path, rules, state="drained", timeout=300))
    assert result["status"] == "CHANGED" and result["cordoned"] and result["drained"]
    drain = next(a for a in _argvs(tmp_path) if a[0] == "drain")
    assert drain == ["drain", "gpu1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s"]
    assert "--disable-eviction" not in drain  # evictions: PodDisruptionBudgets are respected


def test_gpu_pods_only_drains_a_node_whose_pods_use_gpus(tmp_path):
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(_node())]},
             {"match": ["get", "pods"], "answers": [answer(items(WEB_POD))]}]
    result = run_module("k8s_node", _args(tmp_path, rules, state="drained", drain_when="gpu_pods"))
    assert result["status"] == "SUCCESS" and not result["cordoned"]
    assert not [a for a in _argvs(tmp_path) if a[0] in ("cordon", "drain")]
    rules[1]["answers"] = [answer(items(WEB_POD, GPU_POD))]
    rules += [{"match": ["cordon"], "answers": [answer("node/gpu1 cordoned\n")]},
              {"match": ["drain"], "answers": [answer("node/gpu1 drained\n")]}]
    result = run_module("k8s_node", _args(tmp_path / "2", rules, state="drained", drain_when="gpu_pods"))
    assert result["drained"] and result["gpu_pods"] == ["ml/train"]


def test_a_drain_a_budget_blocks_fails_naming_it_and_the_node_stays_cordoned(tmp_path):
    blocked = ('error when evicting pods/"train" -n "ml": global timeout reached: 1m0s\n'
               "Cannot evict pod as it would violate the pod's disruption budget.")
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(_node())]},
             {"match": ["get", "pods"], "answers": [answer(items(GPU_POD))]},
             {"match": ["cordon"], "answers": [answer("node/gpu1 cordoned\n")]},
             {"match": ["drain"], "answers": [answer(rc=1, stderr=blocked)]}]
    result = run_module("k8s_node", _args(tmp_path, rules, state="drained", timeout=60))
    assert result["status"] == "FAILED!" and result["cordoned"] is True
    assert "global timeout reached" in result["msg"] and "stays cordoned" in result["msg"]


def test_schedulable_uncordons_only_a_cordoned_node(tmp_path):
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(_node(unschedulable=True))]},
             {"match": ["uncordon"], "answers": [answer("node/gpu1 uncordoned\n")]}]
    assert run_module("k8s_node", _args(tmp_path, rules, state="schedulable"))["status"] == "CHANGED"
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(_node())]}]
    assert run_module("k8s_node", _args(tmp_path / "2", rules, state="schedulable"))["status"] == "SUCCESS"
    assert not [a for a in _argvs(tmp_path / "2") if a[0] == "uncordon"]


def test_pods_restarted_deletes_the_selected_pods_on_the_node(tmp_path):
    plugin = {"metadata": {"namespace": "kube-system", "name": "nvidia-device-plugin-ds-x1"}, "spec": {}}
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(_node())]},
             {"match": ["get", "pods"], "answers": [answer(items(plugin))]},
             {"match": ["delete"], "answers": [answer('pod "nvidia-device-plugin-ds-x1" deleted\n')]}]
    result = run_module("k8s_node", _args(tmp_path, rules, state="pods_restarted",
                                          selector="name=nvidia-device-plugin-ds"))
    assert result["restarted"] == ["kube-system/nvidia-device-plugin-ds-x1"]
    listed = next(a for a in _argvs(tmp_path) if a[:2] == ["get", "pods"])
    assert "spec.nodeName=gpu1" in listed and "name=nvidia-device-plugin-ds" in listed


def test_an_api_that_does_not_answer_is_refused_or_skipped(tmp_path):
    rules = [{"match": ["get"], "answers": [answer(rc=1, stderr="Unable to connect to the server: timeout\n")]}]
    result = run_module("k8s_node", _args(tmp_path, rules, state="drained"))
    assert result["status"] == "FAILED!" and "Unable to connect" in result["msg"] and "kubectl on cp1" in result["msg"]
    result = run_module("k8s_node", _args(tmp_path / "2", rules, state="drained", if_unreachable="skip"))
    assert result["status"] == "SUCCESS" and result["reachable"] is False
    assert result["msg"].startswith("not done: ") and "Unable to connect" in result["msg"]
