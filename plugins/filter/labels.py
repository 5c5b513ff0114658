"""Filters over plugins/module_utils/labels.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import labels
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


class FilterModule:
    """Filters of the labels decisions."""

    def filters(self) -> dict:
        return wrap({
            "kubelet_node_labels": labels.kubelet_node_labels,
        })
