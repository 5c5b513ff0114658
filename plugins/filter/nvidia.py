"""Filters over plugins/module_utils/nvidia.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils import nvidia
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "nvidia_min_driver": nvidia.nvidia_min_driver,
    "nvidia_cuda_compat": nvidia.nvidia_cuda_compat,
    "nvidia_gpu_family": nvidia.nvidia_gpu_family,
    "nvidia_gpu_info": nvidia.nvidia_gpu_info,
    "nvidia_branch_supports_gpu": nvidia.nvidia_branch_supports_gpu,
    "nvidia_accelerator_label": nvidia.nvidia_accelerator_label,
    "nvidia_upstream_version": nvidia.nvidia_upstream_version,
    "nvidia_gfd_labels": nvidia.nvidia_gfd_labels,
    "nvidia_apt_missing_components": nvidia.nvidia_apt_missing_components,
    "nvidia_pin_package": nvidia.nvidia_pin_package,
    "nvidia_apt_unmet": nvidia.nvidia_apt_unmet,
})
