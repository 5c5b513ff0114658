"""Filters over plugins/module_utils/smoke.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import smoke
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


class FilterModule:
    """Filters of the pod smoke's plumbing."""

    def filters(self) -> dict:
        return wrap({
            "pod_smoke_batches": smoke.pod_smoke_batches,
            "pod_smoke_host": smoke.host_from_state,
        })
