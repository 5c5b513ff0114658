"""Answers of the Kubernetes API, read once per play and shared by every host of it."""

from __future__ import annotations

import json

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError

# What the roles read of a Node object (gpu_node_labels: labels, annotations; gpu_node_verify: the rest).
_NODE_FIELDS = {
    "labels": ("metadata", "labels"),
    "annotations": ("metadata", "annotations"),
    "allocatable": ("status", "allocatable"),
    "capacity": ("status", "capacity"),
}


def _node_summary(node: dict, fields: list) -> dict:
    return {key: dict((node.get(_NODE_FIELDS[key][0]) or {}).get(_NODE_FIELDS[key][1]) or {}) for key in fields}


def api_nodes(registered: object, fields: object = None) -> dict:
    """Index `kubectl get nodes -o json` answers (a looped command's register) by API host and node name."""
    name = "api_nodes"
    fields = list(_NODE_FIELDS) if fields is None else fields
    if not isinstance(fields, list) or not set(fields) <= set(_NODE_FIELDS):
        raise KgnError(f"{name}: fields {fields!r} must be a list of {', '.join(_NODE_FIELDS)}")
    results = registered.get("results") if isinstance(registered, dict) else registered
    if not isinstance(results, list):
        raise KgnError(
            f"{name}: input must be the register of a command looped over API hosts (a dict with 'results'), "
            f"not {type(registered).__name__}"
        )
    index: dict = {}
    for result in results:
        if not isinstance(result, dict) or not isinstance(result.get("item"), dict) or "host" not in result["item"]:
            raise KgnError(f"{name}: every result needs the loop item it ran for, a dict with 'host'")
        if result.get("skipped"):
            continue
        host = result["item"]["host"]
        error = ""
        nodes: dict = {}
        if result.get("unreachable") or result.get("rc", 1) != 0:
            error = (result.get("stderr") or result.get("msg") or f"kubectl exited {result.get('rc')}").strip()
            error = error.splitlines()[0] if error else ""
        else:
            try:
                items = json.loads(result.get("stdout") or "")["items"]
            except (ValueError, KeyError, TypeError) as exc:
                error = f"kubectl get nodes did not answer with a node list ({exc})"
            else:
                nodes = {item["metadata"]["name"]: _node_summary(item, fields) for item in items}
        index[host] = {"ok": not error, "error": error, "nodes": nodes}
    return index

