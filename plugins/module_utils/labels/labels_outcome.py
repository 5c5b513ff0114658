"""What the labels step says and records for a node, shared by the gpu_node_labels module (after its patches) and
its action (a node the play's one read of the nodes shows with nothing to change: answered on the controller,
without a module run on the API host)."""

import json

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import api_answer, node_list
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.change import recorded
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels.labels import MANAGED_ANNOTATION, labels_plan


def node_record(entry, node, api):
    """The node as the API shows it (what the role records as kgn_observed_node_labels); ``registered`` is null
    when the API was not read."""
    if node is None:
        return {"node_name": entry["node_name"], "registered": False if api.get("reachable") else None,
                "labels": {}, "annotations": {}}
    return {"node_name": entry["node_name"], "registered": True, "labels": node.get("labels") or {},
            "annotations": node.get("annotations") or {}}


def what_changed(result, before):
    """``(changes, repaired)`` in words: the first labelling of a node is a change; labels this project had set
    before (its annotation names them) and found changed or gone are a repair."""
    if result.get("status") not in ("patched", "would patch"):
        return [], []
    node = result["node_name"]
    ours_before = {k for k in str(((before or {}).get("annotations") or {}).get(MANAGED_ANNOTATION) or "").split(",")
                   if k}
    # a label set again that this project had set before was changed or removed since: a repair; a new label, or
    # one removed because the inventory no longer asks for it, is a change
    fixed = sorted(k for k in result["set"] if k in ours_before)
    new = sorted(k for k in result["set"] if k not in ours_before)
    gone = sorted(result["removed"])
    changes, repaired = [], []
    if new or gone:
        values = result["set"]
        parts = ([f"set {', '.join(f'{k}={values[k]}' for k in new)}"] if new else []) \
            + ([f"removed {', '.join(gone)}"] if gone else [])
        changes.append(f"labels of node {node}: {'; '.join(parts)}")
    if fixed:
        words = [f"{k}={result['set'][k]}" for k in fixed]
        repaired.append(f"labels of node {node} corrected: {', '.join(words)} (changed since this project set them)")
    return changes, repaired


def words(inventory_host, result):
    """What the role says for a node (``say``) and why it fails the host (``refusal``, empty when it does not)."""
    say, refusal = [], ""
    node, status = result.get("node_name"), result.get("status")
    if status in ("not registered", "api unreachable"):
        wanted = f" would get {json.dumps(result['desired'], sort_keys=True)}, but " if result.get("desired") else ": "
        say.append(f"NOT LABELLED: {node}{wanted}{result.get('reason')}")
    if result.get("foreign"):
        say.append(f"Left alone on {node} (set by someone else to another value): {', '.join(result['foreign'])}; "
                   "set gpu_node_labels_overwrite_foreign to take them over")
    if status == "refused":
        refusal = f"Nothing was changed on {inventory_host}. Fix: {'; '.join(result.get('problems') or [])}"
    elif status in ("failed", "patch failed", "patch not live"):
        refusal = f"{node}: {status}: {result.get('reason')}"
    return dict(result, say=say, refusal=refusal)


def nodes_seen(read, api_host, kubeconfig, names):
    """What the play's read of the nodes shows of ``names`` (``{reachable, error, nodes}``, as the module reads
    them), or None when it cannot stand for a read of them: no read of this API target (api_host and kubeconfig),
    a read that failed or was not made, or a node it does not list (the module then reads and says why).

    ``read``: the registered result of a kgn.gpu_nodes.k8s_read loop over the API targets (kube_api_targets),
    each result carrying its target as ``item``."""
    answer = api_answer(read, api_host, kubeconfig) if isinstance(read, dict) and "results" in read else None
    nodes = ((answer or {}).get("resources") or {}).get("nodes") or {}
    if answer is None or answer.get("failed") or answer.get("unreachable") or answer.get("reachable") is not True \
            or not nodes.get("served") or nodes.get("error"):
        return None
    wanted = [item for item in nodes.get("items") or []
              if isinstance(item, dict) and (item.get("metadata") or {}).get("name") in names]
    try:
        listed = node_list({"items": wanted})
    except (KgnError, KeyError, TypeError, AttributeError):
        return None
    if any(name not in listed for name in names):
        return None
    return {"reachable": True, "error": "", "nodes": {name: listed[name] for name in names}}


def unchanged_by_read(nodes, read, api_host, kubeconfig, check_mode):
    """The module's answer for ``nodes`` (its ``nodes`` option) when the play's read shows each of them with
    nothing to change, else None (then the module runs: a patch to send, a node to refuse or report, no usable
    read). The same plan, words and facts as the module's; nothing is sent to the API."""
    if not isinstance(nodes, dict) or not nodes:
        return None
    names = [(s.get("node_name") if isinstance(s, dict) else None) or h for h, s in nodes.items()]
    observed = nodes_seen(read, api_host, kubeconfig, names)
    if observed is None:
        return None
    try:
        plan = labels_plan({"nodes": nodes}, observed)
    except KgnError:
        return None  # the module says what is wrong
    if any(entry["status"] != "unchanged" for entry in plan["nodes"].values()):
        return None
    results = {host: words(host, dict(entry, record=node_record(entry, observed["nodes"][entry["node_name"]],
                                                                  observed)))
               for host, entry in plan["nodes"].items()}
    answer = {"changed": False, "nodes": results, "plan": plan, "observed": observed, "diff": [], "changes": [],
              "repaired": [], "warnings": [line for result in results.values() for line in result["say"]]}
    if len(results) == 1:
        (result,) = results.values()
        answer["ansible_facts"] = recorded("node_labels", result["record"], plan,
                                           {"node": result["record"], "status": result["status"]},
                                           False, check_mode, [], changes=[])
    return answer
