"""Action of kgn.gpu_nodes.gpu_node_labels_result: one node takes its labels from its API server's batch."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.run_report import plain


def node_answer(batches, host):
    """``(entry, batch)``: this host's entry of the batch that labelled it, with that batch's loop result; entry is
    None when its batch has none (the batch failed, or its API host could not be reached). ``(None, None)`` when no
    batch held the host."""
    for batch in (batches or {}).get("results") or []:
        if not isinstance(batch, dict):
            continue
        entry = (batch.get("nodes") or {}).get(host)
        if entry is not None:
            return entry, batch
        if host in ((batch.get("item") or {}).get("nodes") or {}):
            return None, batch
    return None, None


def take(batches, host):
    """The task result of ``host`` from the batches (pure): facts, changed, diff, or its failure."""
    entry, batch = node_answer(batches, host)
    if batch is None:
        return {"failed": True, "msg": f"gpu_node_labels_result: no batch of the labels task holds {host} (did the "
                                       "batch task run for this play's hosts?)"}
    where = (batch.get("item") or {}).get("where") or "its API host"
    if entry is None:
        words = str(batch.get("msg") or "no answer").strip()
        if batch.get("unreachable"):
            return {"changed": False, "warnings": [f"NOT LABELLED: {host}: {where} could not be reached: {words}"],
                    "status": "api host unreachable"}
        return {"failed": True, "msg": f"labelling the nodes through {where} failed: {words}"}
    result = {"changed": bool(entry.get("changed")), "status": entry.get("status"), "node_name": entry.get("node_name")}
    if entry.get("facts"):
        result["ansible_facts"] = entry["facts"]
    if entry.get("diff"):
        result["diff"] = entry["diff"]
    if entry.get("refusal"):
        result.update(failed=True, msg=entry["refusal"])
    return result


class ActionModule(ActionBase):
    _supports_check_mode = True
    _requires_connection = False
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        # taken out of the task's arguments: ansible-core returns a task's arguments with its result, and the batches
        # hold every node of the play
        batches = plain(self._task.args.pop("batches", None))
        host = str(self._task.args.pop("host", None) or (task_vars or {}).get("inventory_hostname") or "")
        if self._task.args:
            raise AnsibleActionFail(f"gpu_node_labels_result: unknown option(s) {', '.join(sorted(self._task.args))}; "
                                    "accepted: batches, host")
        if not isinstance(batches, dict):
            raise AnsibleActionFail("gpu_node_labels_result: batches must be the registered result of the labels "
                                    f"batch task (a loop result), got {type(batches).__name__}")
        answer = take(batches, host)
        for line in answer.pop("warnings", []):
            Display().warning(line)
        result.update(answer)
        return result
