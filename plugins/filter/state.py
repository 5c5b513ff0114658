"""Filters over plugins/module_utils/state.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import state
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


class FilterModule:
    """Filters of the state decisions."""

    def filters(self) -> dict:
        return wrap({
            "file_in_place": state.file_in_place,
        })
