"""Filters over plugins/module_utils/smoke/smoke.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "pod_smoke_batches": smoke.pod_smoke_batches,
    "pod_smoke_host": smoke.host_from_state,
})
