#!/usr/bin/python
"""gpu_smoke: a short-lived GPU container through the engine kubelet uses, compared with the host's GPUs."""

DOCUMENTATION = r"""
---
module: gpu_smoke
short_description: Run a short-lived GPU container through the node's engine and compare what it sees with the host
description:
  - Proves the GPU works with a workload, the way kubelet's containers get it. Runs one container through the
    engine kubelet uses, with the GPUs asked for the way the node is configured, and lists the GPUs it sees
    (C(nvidia-smi -L) injected by the runtime, C(/dev/nvidia*), C(/proc/driver/nvidia/gpus)); compares them with
    the host's C(nvidia-smi -L) (same count, same UUIDs; the MIG devices it lists must be the host's).
  - Docker, C(docker run) with Docker's default runtime; legacy mode C(NVIDIA_VISIBLE_DEVICES=all), cdi mode
    C(--device nvidia.com/gpu=all) (Docker 25 and later). containerd, C(ctr run) in the CRI's namespace with
    the CRI's default runtime handler (its runtime type and C(BinaryName), read from C(crictl info) or
    C(containerd config dump)), so the container gets what kubelet's pods get; cdi mode C(--device
    nvidia.com/gpu=all) from containerd 2.0. CRI-O runs containers only through the CRI, skipped (the pod smoke
    covers it).
  - The container (a fixed name) is removed afterwards, also on failure, and a leftover of an interrupted run is
    removed first. The image is pulled when missing (not in check mode).
  - Returns a status (ok, no_gpu, failed, skipped) with the cause when it fails (runtime not found, nothing injected,
    driver/library mismatch, image missing, ...), decided by the project's smoke code (module_utils/smoke/smoke.py).
  - Check mode starts no container (skipped); the module never changes the node's configuration.
options:
  engine:
    description: The engine kubelet uses (the container_runtime concern's plan records it).
    type: str
    required: true
    choices: [docker, containerd, crio]
  mode:
    description: How the GPUs are handed to containers on this node, V(legacy) (the nvidia runtime) or V(cdi).
    type: str
    default: legacy
    choices: [legacy, cdi]
  image:
    description: The image to run; it needs C(sh) and a full glibc for the injected nvidia-smi.
    type: str
    default: ubuntu:24.04
  pull:
    description: Pull the image when the node lacks it.
    type: bool
    default: true
  namespace:
    description: containerd namespace (the CRI's, where kubelet's images are).
    type: str
    default: k8s.io
  cri_plugin:
    description: The CRI plugin's name in containerd's config (the runtime plan's); empty looks for each.
    type: str
    default: ""
  timeout:
    description: Seconds the container (and a pull) may take.
    type: int
    default: 90
author: kube-gpu-nodes
"""

EXAMPLES = r"""
- name: Run a GPU container through the engine
  kgn.gpu_nodes.gpu_smoke:
    engine: "{{ kgn_state_container_runtime.plan.engine }}"
  register: smoke
"""

RETURN = r"""
status:
  description: V(ok), V(no_gpu) (no GPU visible, on the host either), V(failed) or V(skipped).
  returned: always
  type: str
cause:
  description: Why it failed (the cause ids of docs/smoke.md), empty when it did not.
  returned: always
  type: str
summary:
  description: One line that says what was seen, or why not.
  returned: always
  type: str
host:
  description: The host's GPUs (listed, gpus, error, pci_gpus, smi_found, present).
  returned: always
  type: dict
exit_code:
  description: The exit code of that command (C(rc) is not used, Ansible would fail the task on it).
  returned: when a container was run
  type: int
argv:
  description: The command that ran the container.
  returned: when a container was run
  type: list
runtime:
  description: The runtime the container ran with (docker inspect's HostConfig.Runtime; the CRI's handler).
  returned: when a container was run
  type: dict
cleanup:
  description: leftover (a container of an earlier run was removed first), removed, gone (checked after), error.
  returned: when a container was run
  type: dict
"""

from ansible_collections.kgn.gpu_nodes.plugins.module_utils.errors import KgnError  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.host import NodeModule  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke import smoke  # noqa: E402
from ansible_collections.kgn.gpu_nodes.plugins.module_utils.smoke.smoke_live import run_engine_smoke  # noqa: E402


def main() -> None:
    module = NodeModule(
        argument_spec={
            "engine": {"type": "str", "required": True, "choices": list(smoke.ENGINES)},
            "mode": {"type": "str", "default": "legacy", "choices": list(smoke.MODES)},
            "image": {"type": "str", "default": smoke.DEFAULT_IMAGE},
            "pull": {"type": "bool", "default": True},
            "namespace": {"type": "str", "default": "k8s.io"},
            "cri_plugin": {"type": "str", "default": ""},
            "timeout": {"type": "int", "default": 90},
        },
        supports_check_mode=True,
    )
    try:
        result, changed = run_engine_smoke(module, **module.params)
    except KgnError as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
