"""gpu_node_labels_result: each node takes its own answer from its API server's labels batch (pure part)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils import labels
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

SPEC = importlib.util.spec_from_file_location(
    "gpu_node_labels_result", Path(__file__).resolve().parents[3] / "plugins/action/gpu_node_labels_result.py")
action = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(action)

CP1 = {"host": "cp1", "delegate_to": "cp1", "kubeconfig": "", "where": "cp1"}
CP2 = {"host": "cp2", "delegate_to": "cp2", "kubeconfig": "", "where": "cp2"}
FACTS = {"kgn_state_node_labels": {"changed": True}, "kgn_observed_node_labels": {"registered": True}}


def test_the_nodes_of_a_play_are_grouped_per_api_server_and_kubectl():
    requests = [{"host": "gpu1", "target": CP1, "kubectl": "kubectl", "settings": {"node_name": "gpu-1"}},
                {"host": "gpu2", "target": CP2, "kubectl": "kubectl", "settings": {}},
                {"host": "gpu3", "target": CP1, "kubectl": "kubectl", "settings": {},
                 "observed": {"node_name": "gpu3", "registered": True, "labels": {"a": "b"}}},
                {"host": "gpu4", "target": CP1, "kubectl": "/opt/kubectl", "settings": {},
                 "observed": {"node_name": "gpu4", "registered": False}}]
    batches = labels.label_batches(requests)
    assert [(b["where"], list(b["nodes"]), b["kubectl"]) for b in batches] == [
        ("cp1", ["gpu1", "gpu3"], "kubectl"), ("cp2", ["gpu2"], "kubectl"), ("cp1", ["gpu4"], "/opt/kubectl")]
    # only what a run registered is passed on for a render
    assert batches[0]["observed"] == {"gpu3": requests[2]["observed"]} and batches[2]["observed"] == {}
    assert labels.label_batches([]) == []
    with pytest.raises(KgnError, match="needs a host, a target and the node's settings"):
        labels.label_batches([{"host": "gpu1", "target": CP1}])
    with pytest.raises(KgnError, match="must be a list"):
        labels.label_batches("gpu1")


def test_a_nodes_part_of_the_plan_holds_only_that_node():
    plan = {"api": {"reachable": True, "error": ""}, "nodes": {"gpu1": {"status": "patch"}, "gpu2": {}},
            "assumed": ["gpu1: no GPU facts", "gpu2: no GPU facts", "gpu10: x"]}
    assert labels.node_plan(plan, "gpu1") == {"api": plan["api"], "nodes": {"gpu1": {"status": "patch"}},
                                              "assumed": ["gpu1: no GPU facts"]}


def batch(hosts, **item):
    """The registered loop result of one batch on cp1 for ``hosts``, with the module's answer ``item``."""
    return {"results": [{"item": dict(CP1, nodes={h: {} for h in hosts}), **item}]}


def test_a_node_takes_its_facts_change_and_diff():
    entry = {"status": "patched", "changed": True, "facts": FACTS, "diff": [{"before": "", "after": "a=b\n"}],
             "refusal": "", "node_name": "gpu-1"}
    answer = action.take(batch(["gpu1"], nodes={"gpu1": entry}), "gpu1")
    assert answer == {"changed": True, "status": "patched", "node_name": "gpu-1", "ansible_facts": FACTS,
                      "diff": entry["diff"]}


def test_a_refused_node_fails_alone_with_what_to_fix():
    entry = {"status": "refused", "changed": False, "facts": {"kgn_state_node_labels": {}},
             "refusal": "Nothing was changed on gpu3. Fix: ..."}
    answer = action.take(batch(["gpu1", "gpu3"], nodes={"gpu1": {"status": "unchanged"}, "gpu3": entry}), "gpu3")
    assert answer["failed"] and answer["msg"] == entry["refusal"]
    assert "failed" not in action.take(batch(["gpu1", "gpu3"], nodes={"gpu1": {"status": "unchanged"},
                                                                      "gpu3": entry}), "gpu1")


def test_an_api_host_that_cannot_be_reached_is_said_and_fails_no_node():
    answer = action.take(batch(["gpu1"], unreachable=True, msg="ssh: connect to host cp1 port 22: timed out"), "gpu1")
    assert "failed" not in answer and answer["status"] == "api host unreachable"
    assert answer["warnings"] == ["NOT LABELLED: gpu1: cp1 could not be reached: ssh: connect to host cp1 port 22: "
                                  "timed out"]


def test_a_failed_batch_fails_its_nodes_with_its_message_and_a_missing_one_says_so():
    answer = action.take(batch(["gpu1"], failed=True, msg="kubectl: Permission denied"), "gpu1")
    assert answer == {"failed": True, "msg": "labelling the nodes through cp1 failed: kubectl: Permission denied"}
    missing = action.take(batch(["gpu1"]), "gpu9")
    assert missing["failed"] and "no batch of the labels task holds gpu9" in missing["msg"]
