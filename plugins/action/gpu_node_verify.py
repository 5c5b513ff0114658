"""Action of kgn.gpu_nodes.gpu_node_verify: read the host live (the module), judge it on the controller (verify.py)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.api import api_answer
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.verify import verify
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.run_report import plain

JUDGED = ("settings", "states", "api", "api_host", "pod_smoke")


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        # Taken out of the task's own arguments, not a copy: ansible-core sends the task's templated arguments back
        # to the controller with every result, and these grow with the fleet (the API's answer and the pod smoke's
        # results of every node), which made the controller's memory and time grow with the square of it.
        args = self._task.args
        judge = {key: plain(args.pop(key, None)) for key in JUDGED}  # 2.19 tags templated values
        settings = judge["settings"]
        if settings is not None:
            try:
                args.update(verify.probe_args(settings, judge["states"] or {}))
            except KgnError as err:
                raise AnsibleActionFail(f"gpu_node_verify: {err}") from None
        probe = self._execute_module(module_name="kgn.gpu_nodes.gpu_node_verify", module_args=dict(args),
                                     task_vars=task_vars)
        if probe.get("failed") or settings is None:
            return dict(result, **probe)
        try:
            answer = api_answer(judge["api"], judge["api_host"] or "")
            smoke = verify.pod_smoke_answer(judge["pod_smoke"], settings.get("node_name"), judge["api_host"] or "")
            row = verify.verify_host(settings, judge["states"] or {}, probe.get("observed") or {}, answer,
                                     (task_vars or {}).get("kgn_run_failure"), smoke)
        except KgnError as err:
            raise AnsibleActionFail(f"gpu_node_verify: {err}") from None
        # the one change verify can make: the engine smoke pulled its image
        result.update(changed=bool(probe.get("changed")), observed=probe.get("observed") or {}, row=row)
        return result
