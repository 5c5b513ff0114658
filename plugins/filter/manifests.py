"""Filters over plugins/module_utils/manifests.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import manifests
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import wrap


class FilterModule:
    """Filters of the manifests decisions."""

    def filters(self) -> dict:
        return wrap({
            "manifest_api": manifests.manifest_api,
            "manifest_removed_apis": manifests.manifest_removed_apis,
            "device_plugin": manifests.device_plugin,
        })
