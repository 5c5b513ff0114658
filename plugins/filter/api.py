"""Filters over plugins/module_utils/api.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import api
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


class FilterModule:
    """Filters of the api decisions."""

    def filters(self) -> dict:
        return wrap({
            "api_nodes": api.api_nodes,
            "api_host": api.api_host,
        })
