"""Filters over plugins/module_utils/labels/labels.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.labels import labels
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "kubelet_node_labels": labels.kubelet_node_labels,
})
