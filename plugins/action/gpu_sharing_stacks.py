"""Action of kgn.gpu_nodes.gpu_sharing_stacks: the stacks planned once, on the controller, and the templates that plan
chose rendered from it; the module then applies exactly that (module_utils/stacks/stacks.py finish_plan)."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import lookup_loader
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks.stacks import stacks_plan
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.run_report import plain


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if args.get("manifests") is None:
            settings = plain(args.get("settings") or {})
            try:
                plan = stacks_plan(settings)
            except KgnError as err:
                return dict(result, failed=True, msg=f"{err}. Nothing was changed.")
            templates = [m["template"] for m in plan["manifests"]]
            # the template lookup finds them in the calling role's templates/ (the task's search path)
            lookup = lookup_loader.get("ansible.builtin.template", loader=self._loader, templar=self._templar)
            try:
                texts = lookup.run(templates, variables=task_vars, template_vars={"plan": plan}) if templates else []
            except Exception as err:  # a template that does not render: say which and why
                raise AnsibleActionFail(f"k8s_manifests: rendering the stack templates failed: {err}") from None
            rendered = zip(plan["manifests"], texts, strict=True)
            args.update(manifests={m["path"]: str(text) for m, text in rendered}, plan=plan)
        return dict(result, **self._execute_module(module_name="kgn.gpu_nodes.gpu_sharing_stacks", module_args=args,
                                                   task_vars=task_vars))
