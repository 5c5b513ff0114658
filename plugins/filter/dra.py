"""Filters over plugins/module_utils/stacks/dra.py and the DRA node switch (documentation: the sidecar <filter>.yml
files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.stacks import dra, stacks
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({"dra_switch_plan": stacks.dra_switch, "dra_published_problems": dra.published_problems})
