"""Filters over plugins/module_utils/runtime/runtime.py (documentation: the sidecar <filter>.yml files)."""

from __future__ import annotations

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import runtime
from ansible_collections.kgn.gpu_nodes.plugins.plugin_utils.filters import filter_module

FilterModule = filter_module({
    "docker_nvidia_package": runtime.docker_nvidia_package,
    "dockershim_available": runtime.dockershim_available,
    "container_runtime_choice": runtime.container_runtime_choice,
    "containerd_layout": runtime.containerd_layout,
    "nvidia_repo_layout": runtime.nvidia_repo_layout,
    "nvidia_toolkit_rpm_packages": runtime.nvidia_toolkit_rpm_packages,
    "json_document": runtime.json_document,
    "docker_daemon_merge": runtime.docker_daemon_merge,
    "containerd_nvidia": runtime.containerd_nvidia,
    "crio_dropin": runtime.crio_dropin,
    "toml_parse": runtime.toml_parse,
    "toml_emit": runtime.toml_emit,
    "runtime_mode": runtime.runtime_mode,
})
