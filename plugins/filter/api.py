"""Filters over plugins/module_utils/api.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import api, kube
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "api_host": api.api_host,
    "cluster_failures": api.cluster_failures,
    "kube_api": kube.kube_api,
    "kube_api_targets": kube.kube_api_targets,
})
