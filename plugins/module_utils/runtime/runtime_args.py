"""The arguments of the nvidia_container_runtime module, shared with its action plugin, which validates them the
same way before it plans on the control machine (the module's DOCUMENTATION describes each)."""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.runtime import isolation, runtime

# what the runtime plan reads (runtime.runtime_plan's inputs)
INPUTS = ("engine", "kubernetes_version", "set_default", "binary", "docker_config", "docker_runtime_path",
          "docker_runtime_args", "containerd_config", "containerd_dropin", "crio_config", "crio_dropin", "mode",
          "toolkit_version", "cdi_spec_path", "toolkit_config", "envvar_unprivileged", "stacks")
# the steps the action plugin asks of the module (the plan is made between them, on the control machine)
PHASES = ("observe", "read", "migrate", "apply")

ARGUMENT_SPEC = {
    "engine": {"type": "str", "default": "auto", "choices": ["auto", *runtime.RUNTIMES]},
    "kubernetes_version": {"type": "str", "required": True},
    "set_default": {"type": "bool", "default": True},
    "binary": {"type": "path", "default": "/usr/bin/nvidia-container-runtime"},
    "docker_config": {"type": "path", "default": "/etc/docker/daemon.json"},
    "docker_runtime_path": {"type": "str", "default": "nvidia-container-runtime"},
    "docker_runtime_args": {"type": "list", "elements": "str", "default": []},
    "containerd_config": {"type": "path", "default": "/etc/containerd/config.toml"},
    "containerd_dropin": {"type": "str", "default": "/etc/containerd/conf.d/99-nvidia.toml"},
    "crio_config": {"type": "path", "default": "/etc/crio/crio.conf"},
    "crio_dropin": {"type": "path", "default": "/etc/crio/crio.conf.d/99-nvidia.conf"},
    "mode": {"type": "str", "default": "auto", "choices": list(runtime.MODES)},
    "toolkit_version": {"type": "str", "default": "1.20.0"},
    "cdi_spec_path": {"type": "path", "default": "/var/run/cdi/nvidia.json"},
    "toolkit_config": {"type": "path", "default": "/etc/nvidia-container-runtime/config.toml"},
    "envvar_unprivileged": {"type": "str", "default": "auto", "choices": list(isolation.POLICIES)},
    "stacks": {"type": "list", "elements": "str", "default": []},
    "dev_char_links": {"type": "bool", "default": True},
    "health_timeout": {"type": "int", "default": 30},
    "render_dir": {"type": "path"},
    "render_host": {"type": "str"},
    "observed": {"type": "dict", "default": {}},
    # set by the action plugin
    "phase": {"type": "str", "default": "apply", "choices": list(PHASES)},
    "paths": {"type": "list", "elements": "str", "default": []},
    "text": {"type": "str"},
    "plan": {"type": "dict"},
    "judged": {"type": "dict", "default": {}},
}
REQUIRED_TOGETHER = [("render_dir", "render_host")]
