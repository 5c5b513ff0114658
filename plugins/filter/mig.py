"""Filters over plugins/module_utils/mig/mig.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.mig import mig
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({"mig_gpu_pods": mig.mig_gpu_pods})
