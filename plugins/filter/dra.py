"""Filters over plugins/module_utils/dra.py and the DRA node switch (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import dra, stacks
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


class FilterModule:
    """Filters of the DRA decisions (playbooks/nvidia_dra_switch.yml)."""

    def filters(self) -> dict:
        return wrap({"dra_switch_plan": stacks.dra_switch, "dra_published_problems": dra.published_problems})
