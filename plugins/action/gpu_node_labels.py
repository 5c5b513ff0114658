"""Action of kgn.gpu_nodes.gpu_node_labels: a node the play's one read of the nodes (option nodes_read) shows with
nothing to change is answered here, on the controller, with the module's own plan, words and facts
(module_utils/labels/labels_outcome.py); anything else (a patch to send, a node to refuse or report, no usable read, a
render) runs the module on the API host, which reads the node again itself."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels.labels_outcome import unchanged_by_read
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.run_report import plain


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        read = args.pop("nodes_read", None)
        if not args.get("render_dir") and read:
            # the read is passed as Ansible holds it: only this node's part of it is copied
            answer = unchanged_by_read(plain(args.get("nodes")), read, args.get("api_host"), args.get("kubeconfig"),
                                       bool(self._task.check_mode))
            if answer is not None:
                return dict(result, **plain(answer))
        return dict(result, **self._execute_module(module_name="kgn.gpu_nodes.gpu_node_labels", module_args=args,
                                                   task_vars=task_vars))
