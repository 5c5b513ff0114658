"""Filters over plugins/module_utils/stacks/stacks.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import stacks
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "stack_catalog": stacks.stack_catalog,
    "stack_extenders": stacks.stack_extenders,
    "stack_problems": stacks.stack_problems,
    "stacks_plan": stacks.stacks_plan,
})
