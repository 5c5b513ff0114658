"""node_labels module, run through `ansible localhost -m` against a fake kubectl: one read per API server, a
patch only for the nodes that differ, every node reported, nothing failed for an API that does not answer."""

from __future__ import annotations

import json

from kubectl_fake import answer, calls, install, items, run_module

MANAGED = "kube-gpu-nodes.io/managed-labels"
NO_GPU = {"gpu_present": False, "gpus": []}


def _node(name, labels=None):
    labels = labels or {}
    annotations = {MANAGED: ",".join(sorted(labels))} if labels else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels, **{"kubernetes.io/hostname": name}),
                         "annotations": annotations}}


DONE = {"gpushare": "true", "nvidia.com/gpu.present": "false"}
NODES = {"gpu1": {"stacks": ["gpushare"], "gpu_facts": NO_GPU, "require_gpu": False},
         "gpu2": {"stacks": ["gpushare"], "gpu_facts": NO_GPU, "require_gpu": False, "node_name": "gpu-2"}}


def _args(tmp_path, rules, **over):
    return {"nodes": NODES, "api_host": "cp1", "kubectl": str(install(tmp_path / "bin", rules)),
            "kubeconfig": "/fake/admin.conf", **over}


def test_one_read_and_a_patch_only_for_the_node_that_differs(tmp_path):
    before = answer(items(_node("gpu1"), _node("gpu-2", DONE)))
    after = answer(items(_node("gpu1", DONE), _node("gpu-2", DONE)))
    rules = [{"match": ["get", "nodes"], "answers": [before, after]},
             {"match": ["patch", "node"], "answers": [answer("node/gpu1 patched\n")]}]
    result = run_module("gpu_node_labels", _args(tmp_path, rules))
    assert result["status"] == "CHANGED", result
    assert result["nodes"]["gpu1"]["status"] == "patched" and result["nodes"]["gpu2"]["status"] == "unchanged"
    argvs = [c["argv"] for c in calls(tmp_path / "bin")]
    patches = [a for a in argvs if a[0] == "patch"]
    assert len(patches) == 1 and patches[0][:3] == ["patch", "node", "gpu1"] and "--dry-run=none" in patches[0]
    sent = json.loads(patches[0][patches[0].index("-p") + 1])
    assert sent["metadata"]["labels"] == DONE and sent["metadata"]["annotations"][MANAGED] == ",".join(sorted(DONE))
    assert argvs.count(["get", "nodes", "--output=json"]) == 2  # one read, one live check after the patch
    assert result["nodes"]["gpu1"]["record"]["labels"]["gpushare"] == "true"


def test_check_mode_sends_the_patch_as_a_server_dry_run(tmp_path):
    rules = [{"match": ["get", "nodes"], "answers": [answer(items(_node("gpu1"), _node("gpu-2")))]},
             {"match": ["patch", "node"], "answers": [answer("node/x patched (server dry run)\n")]}]
    result = run_module("gpu_node_labels", _args(tmp_path, rules), check=True)
    assert result["status"] == "CHANGED"
    assert {n["status"] for n in result["nodes"].values()} == {"would patch"}
    patches = [c["argv"] for c in calls(tmp_path / "bin") if c["argv"][0] == "patch"]
    assert len(patches) == 2 and all("--dry-run=server" in p for p in patches)


def test_a_patch_the_api_does_not_show_is_reported(tmp_path):
    rules = [{"match": ["get", "nodes"], "answers": [answer(items(_node("gpu1"), _node("gpu-2", DONE)))]},
             {"match": ["patch", "node"], "answers": [answer("node/gpu1 patched\n")]}]
    result = run_module("gpu_node_labels", _args(tmp_path, rules))
    assert result["nodes"]["gpu1"]["status"] == "patch not live"
    assert "gpushare" in result["nodes"]["gpu1"]["reason"]


def test_an_api_that_does_not_answer_is_said_per_node_not_a_failure(tmp_path):
    rules = [{"match": ["get", "nodes"], "answers": [answer(rc=1, stderr="Unable to connect to the server\n")]}]
    result = run_module("gpu_node_labels", _args(tmp_path, rules))
    assert result["status"] == "SUCCESS"
    for node in result["nodes"].values():
        assert node["status"] == "api unreachable"
        assert "Unable to connect to the server" in node["reason"] and "kubectl on cp1" in node["reason"]
        assert node["desired"] == DONE


def test_a_node_the_api_does_not_know_is_not_registered(tmp_path):
    rules = [{"match": ["get", "nodes"], "answers": [answer(items(_node("gpu1", DONE)))]}]
    result = run_module("gpu_node_labels", _args(tmp_path, rules))
    assert result["status"] == "SUCCESS"
    assert result["nodes"]["gpu2"]["status"] == "not registered"
    assert result["nodes"]["gpu2"]["record"] == {"node_name": "gpu-2", "registered": False, "labels": {},
                                                  "annotations": {}}
    assert not [c for c in calls(tmp_path / "bin") if c["argv"][0] == "patch"]


def test_render_writes_each_nodes_patch_without_kubectl(tmp_path):
    args = _args(tmp_path, [], render_dir=str(tmp_path / "out"),
                 observed={"nodes": {"gpu-2": {"labels": DONE, "annotations": {MANAGED: "gpushare"}}}})
    result = run_module("gpu_node_labels", args)
    patch = json.loads((tmp_path / "out/gpu1/_plan/node_labels.json").read_text())["patch"]
    assert patch["metadata"]["labels"] == DONE
    recorded = json.loads((tmp_path / "out/gpu2/_plan/node_labels.json").read_text())["patch"]
    assert recorded == {}  # the recorded node already has them: nothing to send
    assert not (tmp_path / "out/gpu1/etc").exists()  # labels go to the API: no file on the node
    assert result["nodes"]["gpu1"]["status"] == "rendered" and calls(tmp_path / "bin") == []


# --- one node per call (the role's way): the node records its facts, says what changed, fails alone ------------
ONE = {"gpu1": {"stacks": ["gpushare"], "gpu_facts": NO_GPU, "require_gpu": False}}


def _one(tmp_path, rules, **over):
    return _args(tmp_path, rules, nodes=ONE, **over)


def test_one_node_is_read_by_name_and_records_its_facts(tmp_path):
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(json.dumps(_node("gpu1"))),
                                                              answer(json.dumps(_node("gpu1", DONE)))]},
             {"match": ["patch", "node"], "answers": [answer("node/gpu1 patched\n")]}]
    result = run_module("gpu_node_labels", _one(tmp_path, rules))
    assert result["status"] == "CHANGED", result
    argvs = [c["argv"] for c in calls(tmp_path / "bin")]
    assert argvs[0] == ["get", "nodes", "gpu1", "--ignore-not-found", "--output=json"]
    facts = result["ansible_facts"]
    assert facts["kgn_observed_node_labels"]["labels"]["gpushare"] == "true"
    state = facts["kgn_state_node_labels"]
    assert state["changed"] is True and state["repaired"] == []
    # the first labelling of a node is a change, not a repair
    assert state["changes"] == ["labels of node gpu1: set gpushare=true, nvidia.com/gpu.present=false"]


def test_labels_this_project_set_and_someone_removed_are_a_repair(tmp_path):
    before = _node("gpu1", DONE)
    before["metadata"]["labels"].pop("gpushare")
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(json.dumps(before)),
                                                              answer(json.dumps(_node("gpu1", DONE)))]},
             {"match": ["patch", "node"], "answers": [answer("node/gpu1 patched\n")]}]
    result = run_module("gpu_node_labels", _one(tmp_path, rules))
    state = result["ansible_facts"]["kgn_state_node_labels"]
    assert state["repaired"] == ["labels of node gpu1 corrected: gpushare=true (changed since this project set them)"]
    assert state["changes"] == []
    assert result["repaired"] == state["repaired"]  # the module says it too (a warning in the run's output)


def test_one_node_the_api_does_not_know_is_said_and_not_a_failure(tmp_path):
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer("")]},
             {"match": ["get", "nodes"], "answers": [answer(items(_node("gpu-01.example.com"), _node("cp1")))]}]
    result = run_module("gpu_node_labels", _one(tmp_path, rules))
    assert result["status"] == "SUCCESS"
    assert result["nodes"]["gpu1"]["status"] == "not registered"
    said = result["nodes"]["gpu1"]["say"][0]
    # the variable to set and the Nodes the API has, so the fix is in the message
    assert said.startswith("NOT LABELLED: gpu1") and "set kube_node_name for gpu1" in said
    assert "which lists cp1, gpu-01.example.com" in said
    assert result["ansible_facts"]["kgn_observed_node_labels"]["registered"] is False


def test_one_node_whose_stacks_its_gpus_cannot_run_fails_alone(tmp_path):
    nodes = {"gpu1": {"stacks": ["gpushare", "nano_gpu"], "gpu_facts": NO_GPU, "require_gpu": False}}
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(json.dumps(_node("gpu1")))]}]
    result = run_module("gpu_node_labels", _args(tmp_path, rules, nodes=nodes))
    assert result["status"] == "FAILED!"
    assert "Nothing was changed on gpu1" in result["msg"] and "both claim every GPU" in result["msg"]
    assert not [c for c in calls(tmp_path / "bin") if c["argv"][0] == "patch"]


# The play's one read of the nodes (nodes_read): a node it shows with nothing to change is answered by the action on
# the controller, with the module's own words and facts; anything else runs the module, which reads the node itself.
TARGET = {"host": "cp1", "kubeconfig": "/fake/admin.conf", "delegate_to": "cp1", "where": "cp1"}


def _read(*nodes, reachable=True, target=None, **extra):
    return {"results": [{"item": dict(target or TARGET), "reachable": reachable, "error": "",
                         "resources": {"nodes": {"served": True, "error": "", "items": list(nodes)}}, **extra}]}


def _without_times(result):
    facts = json.loads(json.dumps(result["ansible_facts"]))
    facts["kgn_state_node_labels"].pop("at")
    return facts


def test_a_node_the_read_shows_unchanged_is_answered_without_kubectl_as_the_module_would(tmp_path):
    node = _node("gpu1", DONE)
    module = run_module("gpu_node_labels", _one(tmp_path / "m", [{"match": ["get", "nodes", "gpu1"],
                                                                  "answers": [answer(json.dumps(node))]}]))
    rules = []  # any kubectl call would fail: the fake has no rule for it
    result = run_module("gpu_node_labels", _one(tmp_path, rules, nodes_read=_read(_node("gpu-2"), node)))
    assert result["status"] == "SUCCESS", result
    assert calls(tmp_path / "bin") == []
    assert result["nodes"] == module["nodes"] and result["plan"] == module["plan"]
    assert result["observed"] == module["observed"]
    assert _without_times(result) == _without_times(module)
    assert result["ansible_facts"]["kgn_state_node_labels"]["live"]["status"] == "unchanged"


def test_the_unchanged_answer_keeps_check_mode_and_says_foreign_labels(tmp_path):
    node = _node("gpu1", DONE)
    node["metadata"]["labels"]["gpushare"] = "false"  # someone else's value: left alone, said
    node["metadata"]["annotations"] = {}
    result = run_module("gpu_node_labels", _one(tmp_path, [], nodes_read=_read(node)), check=True)
    assert result["status"] == "SUCCESS" and calls(tmp_path / "bin") == []
    assert result["nodes"]["gpu1"]["foreign"] == ["gpushare"]
    assert result["nodes"]["gpu1"]["say"][0].startswith("Left alone on gpu1")  # the run's warning
    assert result["ansible_facts"]["kgn_state_node_labels"]["check_mode"] is True


def test_a_node_that_differs_in_the_read_runs_the_module_which_reads_and_patches(tmp_path):
    rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(json.dumps(_node("gpu1"))),
                                                              answer(json.dumps(_node("gpu1", DONE)))]},
             {"match": ["patch", "node"], "answers": [answer("node/gpu1 patched\n")]}]
    result = run_module("gpu_node_labels", _one(tmp_path, rules, nodes_read=_read(_node("gpu1"))))
    assert result["status"] == "CHANGED", result
    argvs = [c["argv"] for c in calls(tmp_path / "bin")]
    assert argvs[0][:3] == ["get", "nodes", "gpu1"] and [a for a in argvs if a[0] == "patch"]


def test_a_read_that_cannot_stand_for_the_node_runs_the_module(tmp_path):
    node = _node("gpu1", DONE)
    other = dict(TARGET, kubeconfig="/other/admin.conf")
    reads = {"another API target": _read(node, target=other),
             "an API that did not answer": _read(node, reachable=False),
             "an unreachable API host": _read(node, unreachable=True),
             "a node the read does not list": _read(_node("gpu-2"))}
    for why, read in reads.items():
        folder = tmp_path / why.replace(" ", "-")
        rules = [{"match": ["get", "nodes", "gpu1"], "answers": [answer(json.dumps(node))]}]
        result = run_module("gpu_node_labels", _one(folder, rules, nodes_read=read))
        assert result["status"] == "SUCCESS", (why, result)
        assert [c["argv"][:3] for c in calls(folder / "bin")] == [["get", "nodes", "gpu1"]], why
