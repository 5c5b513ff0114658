"""Filters over plugins/module_utils/mig.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import mig
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


class FilterModule:
    """Filters of the MIG decisions."""

    def filters(self) -> dict:
        return wrap({"mig_gpu_pods": mig.mig_gpu_pods})
