"""The gpu_node_verify action: the judged inputs (the API's answer, the pod smoke batch, the states) are read on the
controller and taken out of the task's own arguments, so that ansible-core does not send them back with the result
(it returns the task's templated arguments with every result: these grow with the fleet)."""

from __future__ import annotations

from unittest import mock

from ansible.playbook.task import Task
from ansible_collections.kgn.gpu_nodes.plugins.action.gpu_node_verify import JUDGED, ActionModule


def test_the_judged_inputs_leave_the_tasks_arguments_and_the_node_gets_only_its_own_pod_smoke():
    smoke = {"status": "ok", "summary": "nvidia_device_plugin: Succeeded"}
    batch = {"results": [{"item": {"host": "cp1", "nodes": [{"node_name": f"gpu{i}"} for i in range(64)]},
                          "nodes": {f"gpu{i}": dict(smoke) for i in range(64)}}]}
    task = Task()
    task.args = {"settings": {"host": "gpu7", "node_name": "gpu7", "kinds": ["gpu_node"]}, "states": {},
                 "api": {"results": []}, "api_host": "cp1", "pod_smoke": batch, "timeout": 5}
    context = mock.MagicMock(check_mode=False)
    action = ActionModule(task, mock.MagicMock(), context, mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    sent = {}

    def module(module_name, module_args, task_vars):
        sent.update(module_args)
        return {"observed": {}}

    with mock.patch.object(action, "_execute_module", side_effect=module), \
            mock.patch("ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify.verify.verify_host") as judge:
        judge.return_value = {"host": "gpu7"}
        result = action.run(task_vars={})
    assert not set(JUDGED) & set(task.dump_attrs()["args"]) and not set(JUDGED) & set(sent)
    assert sent["timeout"] == 5 and result["row"] == {"host": "gpu7"}
    assert judge.call_args.args[-1] == smoke  # the node's own entry of the batch
