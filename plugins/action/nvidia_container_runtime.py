"""Action of kgn.gpu_nodes.nvidia_container_runtime: the module reads the node and applies the plan; the plan is made
here on the control machine, where TOML is read and written with maintained libraries (module_utils/runtime/tomlio.py;
the steps: module_utils/runtime/runtime_steps.py)."""

from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime_steps
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime.runtime_args import (
    ARGUMENT_SPEC,
    REQUIRED_TOGETHER,
)


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC, required_together=REQUIRED_TOGETHER).validate(args)
        if checked.error_messages:
            return dict(result, failed=True, msg="; ".join(checked.error_messages))

        def step(phase, **extra):
            done = self._execute_module(module_name="kgn.gpu_nodes.nvidia_container_runtime",
                                        module_args={**args, "phase": phase, **extra}, task_vars=task_vars)
            if done.get("failed"):
                raise runtime_steps.StepFailed(done)
            return done

        return dict(result, **runtime_steps.run(checked.validated_parameters, step, self._task.check_mode))
