"""Filters over plugins/module_utils/scheduler/scheduler.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "scheduler_variant": scheduler.scheduler_variant,
    "scheduler_config": scheduler.scheduler_config,
})
