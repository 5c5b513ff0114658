"""Filters over plugins/module_utils/scheduler/scheduler_patch.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.scheduler import scheduler_patch
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "scheduler_extender_urls": scheduler_patch.scheduler_extender_urls,
    "systemd_exec_start": scheduler_patch.systemd_exec_start,
    "systemd_exec_line": scheduler_patch.systemd_exec_line,
    "scheduler_args": scheduler_patch.scheduler_args,
    "scheduler_static_pod": scheduler_patch.scheduler_static_pod,
    "scheduler_flag_value": scheduler_patch.scheduler_flag_value,
})
