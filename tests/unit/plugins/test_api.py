"""api_nodes: one node list per API host, indexed for every host of the play."""

from __future__ import annotations

import json

import pytest
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import api_nodes
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

NODE = {
    "metadata": {"name": "gpu-1", "labels": {"a": "1"}, "annotations": {"kube-gpu-nodes.io/managed-labels": "a"}},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}},
}


def answer(host: str, rc: int = 0, stdout: str = "", **over) -> dict:
    return {"item": {"host": host, "kubectl": "kubectl"}, "rc": rc, "stdout": stdout, "stderr": ""} | over


def test_indexes_each_node_by_api_host_and_name():
    listed = {"results": [answer("cp1", stdout=json.dumps({"items": [NODE, {"metadata": {"name": "cpu-1"}}]}))]}
    index = api_nodes(listed)
    assert index["cp1"]["ok"] is True and index["cp1"]["error"] == ""
    assert index["cp1"]["nodes"]["gpu-1"] == {
        "labels": {"a": "1"},
        "annotations": {"kube-gpu-nodes.io/managed-labels": "a"},
        "allocatable": {"nvidia.com/gpu": "8"},
        "capacity": {"nvidia.com/gpu": "8"},
    }
    assert index["cp1"]["nodes"]["cpu-1"] == {"labels": {}, "annotations": {}, "allocatable": {}, "capacity": {}}


def test_only_the_asked_fields_are_kept():
    listed = [answer("cp1", stdout=json.dumps({"items": [NODE]}))]
    assert api_nodes(listed, ["labels"])["cp1"]["nodes"]["gpu-1"] == {"labels": {"a": "1"}}
    with pytest.raises(KgnError, match="fields"):
        api_nodes(listed, ["spec"])


def test_a_failed_or_unreachable_api_host_keeps_its_first_error_line():
    listed = {"results": [
        answer("cp1", rc=1, stderr="The connection to the server was refused\nmore detail"),
        {"item": {"host": "cp2"}, "unreachable": True, "msg": "ssh: connect to host cp2 port 22: timed out"},
        answer("cp3", stdout="not json"),
    ]}
    index = api_nodes(listed)
    assert index["cp1"] == {"ok": False, "error": "The connection to the server was refused", "nodes": {}}
    assert index["cp2"]["ok"] is False and "timed out" in index["cp2"]["error"]
    assert index["cp3"]["ok"] is False and "did not answer with a node list" in index["cp3"]["error"]


def test_skipped_results_are_left_out_and_a_plain_list_is_accepted():
    assert api_nodes([{"item": {"host": "cp1"}, "skipped": True}]) == {}


@pytest.mark.parametrize("bad", ["text", {"results": [{"rc": 0}]}, {"results": [{"item": "cp1"}]}])
def test_input_that_is_not_a_looped_register_is_refused(bad):
    with pytest.raises(KgnError, match="api_nodes"):
        api_nodes(bad)
